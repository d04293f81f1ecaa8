// differentiate: the symbolic derivative of a program's per-element body with respect to some of
// its inputs, by reverse accumulation over the node list (as PyTorch's autograd does, with the
// same local formulas, so results at kinks, zeros and infinities agree with torch). The value and
// the derivatives end up in one hash-consed node list: a kernel computing both shares every term.
//
// A term that no requested input reaches gets no adjoint at all (not a 0 node): the product of a
// structural zero with an inf or nan value would otherwise turn a clean gradient into nan.
// Piecewise-constant operations (comparisons, logic, sign, floor, ...) pass no gradient, which is
// torch's zero gradient added to the others (only the sign of a zero sum can differ).
#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>
#include <optional>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "pipeline.hpp"
#include "ir/simplify.hpp"

namespace lossjit {
namespace {

class Differentiator {
public:
    Differentiator(const ir::Program& program, std::span<const int> wrt) : source_(program), wrt_(wrt.begin(), wrt.end()) {
        out_.source_name = program.source_name;
        out_.source = program.source;
        out_.reduction = program.reduction;
        out_.inputs = program.inputs;
        out_.params = program.params;
    }

    ir::Program run() {
        copy_primal();
        NodeBuilder& b = builder();
        const int primal = static_cast<int>(out_.nodes.size());
        mark_dependent(primal);
        adjoint_.assign(static_cast<std::size_t>(primal), std::nullopt);
        if (depends_[static_cast<std::size_t>(out_.body)]) adjoint_[static_cast<std::size_t>(out_.body)] = b.constant(1.0);
        for (int id = primal; id-- > 0;) {
            const auto g = adjoint_[static_cast<std::size_t>(id)];
            if (!g) continue;
            const ir::Node node = out_.node(id);  // a copy: building nodes may reallocate the list
            b.set_pos(node.pos);
            if (node.kind == ir::NodeKind::Binding) give(out_.bindings[static_cast<std::size_t>(node.slot)].node, *g);
            if (node.kind == ir::NodeKind::Apply) backward(node, id, *g);
        }
        for (int slot : wrt_) {
            std::optional<int> d;
            for (int id = 0; id < primal; ++id) {
                const ir::Node& n = out_.node(id);
                if (n.kind == ir::NodeKind::Input && n.slot == slot) d = adjoint_[static_cast<std::size_t>(id)];
            }
            out_.derivatives.push_back({slot, d ? *d : b.constant(0.0)});
        }
        return std::move(out_);
    }

private:
    NodeBuilder& builder() { return *builder_; }

    void copy_primal() {
        std::vector<bool> live(source_.nodes.size(), false);
        auto mark = [&](auto&& self, int id) -> void {
            if (live[static_cast<std::size_t>(id)]) return;
            live[static_cast<std::size_t>(id)] = true;
            const ir::Node& n = source_.node(id);
            if (n.kind == ir::NodeKind::Binding) self(self, source_.bindings[static_cast<std::size_t>(n.slot)].node);
            for (int i = 0; i < n.arity; ++i) self(self, n.args[static_cast<std::size_t>(i)]);
        };
        mark(mark, source_.body);
        for (const auto& binding : source_.bindings) mark(mark, binding.node);  // the emitter prints every binding

        builder_ = std::make_unique<NodeBuilder>(out_);
        std::vector<int> map(source_.nodes.size(), -1);
        out_.bindings = source_.bindings;
        for (std::size_t id = 0; id < source_.nodes.size(); ++id) {
            if (!live[id]) continue;
            ir::Node n = source_.nodes[id];
            for (int i = 0; i < n.arity; ++i) n.args[static_cast<std::size_t>(i)] = map[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])];
            map[id] = builder_->intern(n);
        }
        for (auto& binding : out_.bindings) binding.node = map[static_cast<std::size_t>(binding.node)];
        out_.body = map[static_cast<std::size_t>(source_.body)];
    }

    // Like torch's requires_grad: does any requested input reach this node?
    void mark_dependent(int primal) {
        depends_.assign(static_cast<std::size_t>(primal), false);
        for (int id = 0; id < primal; ++id) {
            const ir::Node& n = out_.node(id);
            bool d = false;
            if (n.kind == ir::NodeKind::Input) d = std::find(wrt_.begin(), wrt_.end(), n.slot) != wrt_.end();
            if (n.kind == ir::NodeKind::Binding) d = depends_[static_cast<std::size_t>(out_.bindings[static_cast<std::size_t>(n.slot)].node)];
            for (int i = 0; i < n.arity; ++i) d = d || depends_[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])];
            depends_[static_cast<std::size_t>(id)] = d;
        }
    }

    void give(int id, int contribution) {
        auto& slot = adjoint_[static_cast<std::size_t>(id)];
        slot = slot ? builder().add(*slot, contribution) : contribution;
    }

    // The local derivative rules: PyTorch's derivatives.yaml / FunctionsManual.cpp formulas, with g the
    // adjoint of `self` (the node's own value, reused where torch reuses `result`).
    void backward(const ir::Node& n, int self, int g) {
        NodeBuilder& b = builder();
        const int x = n.args[0], y = n.args[1], z = n.args[2];
        auto wants = [&](int i) { return i < n.arity && depends_[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])]; };
        auto to = [&](int i, auto make) {
            if (wants(i)) give(n.args[static_cast<std::size_t>(i)], make());
        };
        auto k = [&](double v) { return b.constant(v); };
        auto f1 = [&](Builtin fn, int a) { return b.unary(fn, a); };
        auto f2 = [&](Builtin fn, int a, int c) { return b.binary(fn, a, c); };
        const double two_over_sqrt_pi = 2.0 / std::sqrt(std::numbers::pi);

        switch (n.fn) {
            case Builtin::Neg: to(0, [&] { return b.neg(g); }); break;
            case Builtin::Add:
                to(0, [&] { return g; });
                to(1, [&] { return g; });
                break;
            case Builtin::Sub:
                to(0, [&] { return g; });
                to(1, [&] { return b.neg(g); });
                break;
            case Builtin::Mul:
                to(0, [&] { return b.mul(g, y); });
                to(1, [&] { return b.mul(g, x); });
                break;
            case Builtin::Div:
                to(0, [&] { return b.div(g, y); });
                to(1, [&] { return b.neg(b.mul(g, b.div(self, y))); });  // -grad * ((x / y) / y)
                break;
            case Builtin::Mod:  // torch.remainder: other gets -grad * floor_divide(self, other)
                to(0, [&] { return g; });
                to(1, [&] { return b.neg(b.mul(g, f1(Builtin::Floor, b.div(x, y)))); });
                break;
            case Builtin::Pow: {
                const ir::Node& exponent = out_.node(y);
                if (wants(0)) {
                    if (exponent.kind == ir::NodeKind::Constant) {  // torch's pow(Tensor, Scalar)
                        if (exponent.value != 0.0)
                            give(x, b.mul(g, b.mul(k(exponent.value), f2(Builtin::Pow, x, k(exponent.value - 1.0)))));
                    } else {  // where(exponent == 0, 0, grad * exponent * self^(exponent - 1))
                        const int d = b.mul(g, b.mul(y, f2(Builtin::Pow, x, b.sub(y, k(1.0)))));
                        give(x, b.select(f2(Builtin::Eq, y, k(0.0)), k(0.0), d));
                    }
                }
                // where(self == 0 && exponent >= 0, 0, result * log(self))
                to(1, [&] {
                    const int at_zero = f2(Builtin::And, f2(Builtin::Eq, x, k(0.0)), f2(Builtin::Ge, y, k(0.0)));
                    return b.mul(g, b.select(at_zero, k(0.0), b.mul(self, f1(Builtin::Log, x))));
                });
                break;
            }
            case Builtin::Select:
                to(1, [&] { return b.select(x, g, k(0.0)); });
                to(2, [&] { return b.select(x, k(0.0), g); });
                break;
            case Builtin::Abs: to(0, [&] { return b.mul(g, f1(Builtin::Sign, x)); }); break;
            case Builtin::Sqrt: to(0, [&] { return b.div(g, b.mul(k(2.0), self)); }); break;
            case Builtin::Rsqrt: to(0, [&] { return b.mul(b.mul(k(-0.5), g), f2(Builtin::Pow, self, k(3.0))); }); break;
            case Builtin::Exp: to(0, [&] { return b.mul(g, self); }); break;
            case Builtin::Exp2: to(0, [&] { return b.mul(b.mul(g, self), k(std::numbers::ln2)); }); break;
            case Builtin::Expm1: to(0, [&] { return b.mul(g, b.add(self, k(1.0))); }); break;
            case Builtin::Log: to(0, [&] { return b.div(g, x); }); break;
            case Builtin::Log2: to(0, [&] { return b.div(g, b.mul(x, k(std::numbers::ln2))); }); break;
            case Builtin::Log10: to(0, [&] { return b.div(g, b.mul(x, k(std::numbers::ln10))); }); break;
            case Builtin::Log1p: to(0, [&] { return b.div(g, b.add(x, k(1.0))); }); break;
            case Builtin::Sin: to(0, [&] { return b.mul(g, f1(Builtin::Cos, x)); }); break;
            case Builtin::Cos: to(0, [&] { return b.mul(g, b.neg(f1(Builtin::Sin, x))); }); break;
            case Builtin::Tan: to(0, [&] { return b.mul(g, b.add(k(1.0), f2(Builtin::Pow, self, k(2.0)))); }); break;
            case Builtin::Tanh: to(0, [&] { return b.mul(g, b.sub(k(1.0), b.mul(self, self))); }); break;
            case Builtin::Sigmoid: to(0, [&] { return b.mul(b.mul(g, b.sub(k(1.0), self)), self); }); break;
            case Builtin::Softplus:  // beta 1, threshold 20: the gradient is exactly grad above it
                to(0, [&] {
                    const int e = f1(Builtin::Exp, x);
                    return b.select(f2(Builtin::Gt, x, k(20.0)), g, b.div(b.mul(g, e), b.add(e, k(1.0))));
                });
                break;
            case Builtin::Relu:  // threshold_backward(grad, result, 0): nothing where result <= 0
                to(0, [&] { return b.select(f2(Builtin::Le, self, k(0.0)), k(0.0), g); });
                break;
            case Builtin::Erf:
            case Builtin::Erfc:
                to(0, [&] {
                    const double c = n.fn == Builtin::Erf ? two_over_sqrt_pi : -two_over_sqrt_pi;
                    return b.mul(b.mul(k(c), f1(Builtin::Exp, b.neg(f2(Builtin::Pow, x, k(2.0))))), g);
                });
                break;
            case Builtin::Min:
            case Builtin::Max: {
                // torch.maximum / torch.minimum: half to each side of a tie; a nan side takes it all.
                const bool is_max = n.fn == Builtin::Max;
                std::optional<int> h;
                auto shared = [&] {
                    if (!h) h = b.select(f2(Builtin::Eq, x, y), b.div(g, k(2.0)), g);
                    return *h;
                };
                to(0, [&] { return b.select(f2(is_max ? Builtin::Lt : Builtin::Gt, x, y), k(0.0), shared()); });
                to(1, [&] { return b.select(f2(is_max ? Builtin::Gt : Builtin::Lt, x, y), k(0.0), shared()); });
                break;
            }
            case Builtin::Clamp:  // clamp_backward and clamp_backward_min_max
                to(0, [&] {
                    const int inside = f2(Builtin::And, f2(Builtin::Ge, x, y), f2(Builtin::Le, x, z));
                    return b.select(inside, g, k(0.0));
                });
                to(1, [&] {
                    const int low = f2(Builtin::And, f2(Builtin::Lt, x, y), f2(Builtin::Lt, y, z));
                    return b.select(low, g, k(0.0));
                });
                to(2, [&] {
                    const int high = f2(Builtin::Or, f2(Builtin::Gt, x, z), f2(Builtin::Lt, z, y));
                    return b.select(high, g, k(0.0));
                });
                break;
            case Builtin::Xlogy:
                to(0, [&] {
                    const int masked = f2(Builtin::And, f2(Builtin::Eq, x, k(0.0)), f2(Builtin::Le, y, k(0.0)));
                    return b.select(masked, k(0.0), f2(Builtin::Xlogy, g, y));
                });
                to(1, [&] { return b.div(b.mul(g, x), y); });
                break;
            case Builtin::Not: case Builtin::Lt: case Builtin::Le: case Builtin::Gt: case Builtin::Ge:
            case Builtin::Eq: case Builtin::Ne: case Builtin::And: case Builtin::Or: case Builtin::Sign:
            case Builtin::Floor: case Builtin::Ceil: case Builtin::Round: case Builtin::Trunc:
            case Builtin::IsNan: case Builtin::IsInf:
                break;  // piecewise constant: zero gradient
            case Builtin::Count_: throw InternalError("differentiate: unknown builtin");
        }
    }

    const ir::Program& source_;
    std::vector<int> wrt_;
    ir::Program out_;
    std::unique_ptr<NodeBuilder> builder_;
    std::vector<bool> depends_;
    std::vector<std::optional<int>> adjoint_;
};

}  // namespace

std::vector<int> gradient_slots(const ir::Program& program, std::span<const std::string> names) {
    std::vector<int> slots;
    for (const auto& name : names) {
        const auto it = std::find(program.inputs.begin(), program.inputs.end(), name);
        if (it == program.inputs.end()) {
            const bool is_param = std::any_of(program.params.begin(), program.params.end(),
                                              [&](const ir::ParamDecl& p) { return p.name == name; });
            if (is_param)
                throw UsageError(fmt::format("'{}' is a parameter: parameters are constants and have no gradient", name));
            throw UsageError(fmt::format("no gradient for '{}': it is not an input of the program ({})", name,
                                         program.inputs.empty() ? std::string("it has none")
                                                                : fmt::format("{}", fmt::join(program.inputs, ", "))));
        }
        const int slot = static_cast<int>(it - program.inputs.begin());
        if (std::find(slots.begin(), slots.end(), slot) != slots.end())
            throw UsageError(fmt::format("the gradient for '{}' is asked for twice", name));
        slots.push_back(slot);
    }
    return slots;
}

ir::Program differentiate(const ir::Program& program, std::span<const int> wrt) {
    for (int slot : wrt)
        if (slot < 0 || slot >= static_cast<int>(program.inputs.size())) throw InternalError("differentiate: input slot out of range");
    if (!program.derivatives.empty()) throw InternalError("differentiate: the program is already differentiated");
    return Differentiator(program, wrt).run();
}

std::vector<int> shared_nodes(const ir::Program& program, std::span<const int> roots) {
    std::vector<int> uses(program.nodes.size(), 0);
    std::vector<bool> seen(program.nodes.size(), false);
    auto visit = [&](auto&& self, int id) -> void {
        if (seen[static_cast<std::size_t>(id)]) return;
        seen[static_cast<std::size_t>(id)] = true;
        const ir::Node& n = program.node(id);
        for (int i = 0; i < n.arity; ++i) {
            const int arg = n.args[static_cast<std::size_t>(i)];
            ++uses[static_cast<std::size_t>(arg)];
            self(self, arg);
        }
    };
    for (int root : roots) {
        ++uses[static_cast<std::size_t>(root)];
        visit(visit, root);
    }
    std::vector<int> shared;
    for (std::size_t id = 0; id < program.nodes.size(); ++id)
        if (uses[id] > 1 && program.nodes[id].kind == ir::NodeKind::Apply) shared.push_back(static_cast<int>(id));
    return shared;
}

}  // namespace lossjit
