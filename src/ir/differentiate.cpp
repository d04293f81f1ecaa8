// differentiate: the symbolic derivative of a program's per-element body with respect to some of
// its inputs, by reverse accumulation over the node list (as PyTorch's autograd does, with the
// same local formulas, so results at kinks, zeros and infinities agree with torch). The value and
// the derivatives end up in one hash-consed node list: a kernel computing both shares every term.
//
// A term that no requested input reaches gets no adjoint at all (not a 0 node): the product of a
// structural zero with an inf or nan value would otherwise turn a clean gradient into nan.
// Piecewise-constant operations (comparisons, logic, sign, floor, ...) pass no gradient: torch's
// zero gradient added to the others, except where torch multiplies that zero into an infinite local
// derivative behind it and gets nan (round(log(x)) at 0: torch nan, lossjit 0; docs/language.md).
//
// Two rules decide more than torch's local formulas do:
// - `where` guards its branches (Adjoint::guard): the side not selected gets no gradient at all,
//   not a zero that later products turn into nan. Each term of the side's gradient is formed as
//   usual and the guard applied last, `select(guard, term, 0)`, so an inf or nan factor of the side
//   (`w[y]` of an ignored row, `log(x)` where the other side was chosen) never reaches a gradient.
//   (Before: the side's adjoint was `select(c, g, 0)`, and `0 * w[y]` was nan.)
// - a value that is one per row (per_row: row reductions, takes, constants, and inputs of extent 1
//   along the row, as the layout says) gets, from a user that is per element (or a row reduction or
//   take, which use every element of the row), the sum of that user's contributions along the row,
//   and from a user that is one per row its contribution as is.
//   (Before: whether to sum was judged by the contribution's own expression, and every input but an
//   index counted as per element: `w * sum(a, -1)` with w [N, 1] summed w's C equal copies,
//   gradients C times too large; `a + sum(a, -1)` gave sum(a, -1) the constant 1 unsummed, and
//   `sum(r, -1)` of a per-row r passed g instead of C * g.)
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "pipeline.hpp"
#include "ir/row_sums.hpp"
#include "ir/simplify.hpp"

namespace lossjit {
namespace {

// The builtin an operator or call of a derivative formula applies.
std::optional<Builtin> formula_builtin(const ast::Expr& e) {
    std::optional<Builtin> fn;
    const int arity = static_cast<int>(e.args.size());
    if (e.kind == ast::ExprKind::Call) {
        if (const auto signature = find_function(e.text)) fn = signature->id;
    } else {
        fn = find_operator(e.kind == ast::ExprKind::Conditional ? "?:" : e.text, arity);
    }
    if (!fn || builtin_info(*fn).arity != arity)
        throw InternalError(fmt::format("derivative formula: no builtin '{}' of {} arguments", e.text, arity));
    return fn;
}

// The value of a formula's subtree that names no argument, in float64 (as the constant folder).
std::optional<double> fold(const ast::Expr& e) {
    switch (e.kind) {
        case ast::ExprKind::Number: return e.number;
        case ast::ExprKind::Name: return find_constant(e.text);
        case ast::ExprKind::Unary:
            if (e.text == "+") return fold(*e.args[0]);
            break;
        default: break;
    }
    std::array<double, 3> values{};
    for (std::size_t i = 0; i < e.args.size(); ++i) {
        const auto v = fold(*e.args[i]);
        if (!v) return std::nullopt;
        values[i] = *v;
    }
    return fold_builtin(*formula_builtin(e), values[0], values[1], values[2]);
}

// Every row's derivative formulas, parsed once by the language's own parser.
const ast::Expr* derivative_formula(Builtin fn, int argument) {
    static const std::vector<ast::Program> parsed = [] {
        std::vector<ast::Program> out;
        for (const auto& row : builtin_table()) {
            for (std::size_t i = 0; i < row.derivative.size(); ++i) {
                if (row.gradient != Gradient::Formula || row.derivative[i].empty()) {
                    out.emplace_back();
                    continue;
                }
                const std::string name = fmt::format("derivative of '{}' by argument {}", row.name.empty() ? row.op : row.name, i + 1);
                try {
                    out.push_back(parse(row.derivative[i], name));
                } catch (const SourceError& e) {
                    throw InternalError(fmt::format("{} does not parse: {}", name, e.what()));
                }
            }
        }
        return out;
    }();
    const auto& program = parsed.at(static_cast<std::size_t>(fn) * 3 + static_cast<std::size_t>(argument));
    return program.body ? program.body.get() : nullptr;
}

// A Composite program's whole-tensor reductions that the inputs differentiated reach, through its
// body (of a list of results, the first: the others are not differentiated), as indices in
// row_totals. `program`: hash-consed, so a reduction written twice is one.
std::vector<int> reductions_differentiated(const ir::Program& program, std::span<const int> wrt) {
    const auto totals = row_totals(program);
    std::vector<bool> depends(program.nodes.size(), false);  // does an input differentiated reach it?
    for (std::size_t id = 0; id < program.nodes.size(); ++id) {
        const ir::Node& n = program.nodes[id];
        bool d = n.kind == ir::NodeKind::Input && std::find(wrt.begin(), wrt.end(), n.slot) != wrt.end();
        if (n.kind == ir::NodeKind::Binding)
            d = depends[static_cast<std::size_t>(program.bindings[static_cast<std::size_t>(n.slot)].node)];
        for (int i = 0; i < n.arity; ++i) d = d || depends[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])];
        depends[id] = d;
    }
    const std::vector<int> body{program.body};
    const std::vector<bool> in_body = reached_nodes(program, body);
    std::vector<int> reached;
    for (std::size_t k = 0; k < totals.size(); ++k) {
        const auto node = static_cast<std::size_t>(totals[k].node);
        if (depends[node] && in_body[node]) reached.push_back(static_cast<int>(k));
    }
    return reached;
}

// A statistic's value is computed before the pass that uses it, as a number: no gradient passes
// back through it. Refused where it reads an input differentiated, rather than silently missing
// that path.
void refuse_gradients_through_statistics(const ir::Program& program, std::span<const int> wrt) {
    for (std::size_t i = 0; i < program.statistics.size(); ++i) {
        const ir::Program& statistic = *program.statistics[i];
        for (const auto& n : statistic.nodes) {
            if (n.kind != ir::NodeKind::Input || std::find(wrt.begin(), wrt.end(), n.slot) == wrt.end()) continue;
            const ast::Pos at = statistic_position(program, static_cast<int>(i));
            throw UnsupportedError(fmt::format(
                "{}:{}:{}: no gradient through '{}', a whole-tensor statistic used inside an expression, with respect to "
                "'{}' (it reads it): statistics are computed before the pass that uses them and pass no gradient; "
                "differentiate with respect to inputs no statistic reads",
                program.source_name, at.line, at.column, statistic_text(statistic),
                program.inputs[static_cast<std::size_t>(n.slot)]));
        }
    }
}

// Every row reduction's derivative formula (RowReductionInfo::derivative), parsed once.
const ast::Expr* row_derivative_formula(RowReduction how) {
    static const std::vector<ast::Program> parsed = [] {
        std::vector<ast::Program> out;
        for (const auto& row : row_reduction_table()) {
            if (row.derivative.empty()) {
                out.emplace_back();
                continue;
            }
            const std::string name = fmt::format("derivative of '{}(e, -1)'", row.name);
            try {
                out.push_back(parse(row.derivative, name));
            } catch (const SourceError& e) {
                throw InternalError(fmt::format("{} does not parse: {}", name, e.what()));
            }
        }
        return out;
    }();
    const auto& program = parsed.at(static_cast<std::size_t>(how));
    if (!program.body) throw InternalError("a row reduction without a derivative formula");
    return program.body.get();
}

class Differentiator {
public:
    Differentiator(const ir::Program& program, std::span<const int> wrt, const std::vector<bool>& per_row_inputs,
                   const std::vector<bool>& k_inputs)
        : source_(program), wrt_(wrt.begin(), wrt.end()), out_(program.header()), input_per_row_(per_row_inputs),
          input_k_(k_inputs) {
        const auto index = program.index_inputs();
        input_per_row_.resize(program.inputs.size(), false);
        input_k_.resize(program.inputs.size(), false);
        for (std::size_t k = 0; k < index.size(); ++k)
            input_per_row_[k] = (input_per_row_[k] || index[k]) && !input_k_[k];
    }

    ir::Program run() {
        copy_primal();
        if (out_.reduction == ir::Reduction::Composite) {
            out_.gradient_totals = reductions_differentiated(out_, wrt_);
        } else if (!out_.is_map()) {
            out_.gradient_totals = {0};
        }
        const auto totals = row_totals(out_);
        NodeBuilder& b = builder();
        const int primal = static_cast<int>(out_.nodes.size());
        mark_dependent(primal);
        adjoint_.assign(static_cast<std::size_t>(primal), std::nullopt);
        // The body's adjoint: the seed, or for a Composite program 1 (its derivative by each
        // reduction differentiated is a result of the factor program; a seed starts at each).
        const bool composite = out_.reduction == ir::Reduction::Composite;
        if (depends_[static_cast<std::size_t>(out_.body)])
            adjoint_[static_cast<std::size_t>(out_.body)] = Adjoint{composite ? b.constant(1.0) : seed()};
        for (int id = primal; id-- > 0;) {
            const auto adjoint = adjoint_[static_cast<std::size_t>(id)];
            if (!adjoint) continue;
            const ir::Node node = out_.node(id);  // a copy: building nodes may reallocate the list
            b.set_pos(node.pos);
            guard_ = adjoint->guard;  // every contribution of this node is guarded as its adjoint is
            // Whose contributions are one per element: those of a value per element, and those a row
            // reduction or a take makes for each element of its row.
            from_elements_ = node.kind == ir::NodeKind::RowReduce || node.kind == ir::NodeKind::Take ||
                             (node.kind != ir::NodeKind::Total && !per_row(id));
            from_k_values_ = node.kind != ir::NodeKind::Take && k_level(id);
            const int g = adjoint->value;
            if (node.kind == ir::NodeKind::Binding) give(out_.bindings[static_cast<std::size_t>(node.slot)].node, g);
            if (node.kind == ir::NodeKind::Apply) backward(node, id, g);
            if (node.kind == ir::NodeKind::RowReduce) backward_row_reduction(node, id, g);
            if (node.kind == ir::NodeKind::Take) backward_take(node, g);
            if (node.kind == ir::NodeKind::Total) {
                // A reduction the differentiated inputs reach: the body's derivative by it (a scalar
                // of the reductions) becomes a result of the factor program; its argument's elements
                // each get its seed, which includes that factor and the divisor.
                const auto k = std::find_if(totals.begin(), totals.end(), [&](const RowTotal& t) { return t.node == id; });
                const auto j = std::find(out_.gradient_totals.begin(), out_.gradient_totals.end(),
                                         static_cast<int>(k - totals.begin()));
                if (k == totals.end() || j == out_.gradient_totals.end())
                    throw InternalError("differentiate: a reduction with an adjoint that no input differentiated reaches");
                const auto seed_slot = static_cast<std::size_t>(j - out_.gradient_totals.begin());
                if (factors_.size() <= seed_slot) factors_.resize(seed_slot + 1, -1);
                factors_[seed_slot] = guarded(*adjoint);
                guard_ = -1;
                const int factor = factors_[seed_slot];
                if (known_at_launch(factor)) {
                    // A factor of constants and the caller's parameters (`loss + 1e-4 * z`, a list's
                    // first result alone, distillation's `batchmean(...) * T^2`) goes into the
                    // derivative itself: no kernel has to compute it before the gradient's.
                    factors_[seed_slot] = kFolded;
                    const int s = seed(static_cast<int>(seed_slot));
                    const ir::Node& f = out_.node(factor);
                    give(node.args[0], f.kind == ir::NodeKind::Constant && f.value == 1.0 ? s : b.mul(factor, s));
                } else {
                    give(node.args[0], seed(static_cast<int>(seed_slot)));
                }
            }
        }
        // A reduction an input reaches only through what passes no gradient (a comparison, floor, a
        // where's condition) got no adjoint: its seed is used nowhere, its factor is folded (as 1).
        if (!out_.gradient_totals.empty()) factors_.resize(out_.gradient_totals.size(), kFolded);
        for (int& f : factors_)
            if (f < 0) f = kFolded;
        // The factor kernel, unless every factor was folded; a folded one is 1 there (its constant is
        // in the derivative already).
        if (std::any_of(factors_.begin(), factors_.end(), [](int f) { return f != kFolded; })) {
            for (int& f : factors_)
                if (f == kFolded) f = b.constant(1.0);
            out_.gradient_factor = factor_program();
        }
        for (int slot : wrt_) {
            std::optional<int> d;
            for (int id = 0; id < primal; ++id) {
                const ir::Node& n = out_.node(id);
                if (n.kind == ir::NodeKind::Input && n.slot == slot && adjoint_[static_cast<std::size_t>(id)])
                    d = guarded(*adjoint_[static_cast<std::size_t>(id)]);
            }
            ir::Derivative derivative{slot, d ? *d : b.constant(0.0)};
            if (const auto s = scatters_.find(slot);
                d && s != scatters_.end() && s->second.one_index && s->second.takes == s->second.contributions) {
                derivative.scatter_index = s->second.index;
                derivative.scatter_node = s->second.value;
            }
            out_.derivatives.push_back(derivative);
        }
        return std::move(out_);
    }

private:
    NodeBuilder& builder() { return *builder_; }

    void copy_primal() {
        std::vector<int> roots{source_.body};
        for (const auto& binding : source_.bindings) roots.push_back(binding.node);  // the emitter prints every binding
        const std::vector<bool> live = reached_nodes(source_, roots);

        builder_ = std::make_unique<NodeBuilder>(out_);
        // distributed_take and per_row look through bindings while the copy goes on; the value kernel
        // beside the gradients computes each result.
        copy_nodes(source_, out_, live, [&](std::size_t, const ir::Node& n) {
            const bool k_take = n.kind == ir::NodeKind::Take && input_k_[static_cast<std::size_t>(out_.node(n.args[1]).slot)];
            return k_take && out_.node(n.args[0]).kind != ir::NodeKind::Input ? distributed_take(n) : builder_->intern(n);
        });
    }

    // (e)[k] with K indices per row, as e of the takes of its inputs: `(x - lse)[k]` is `x[k] - lse`, an
    // identity of elementwise expressions, so that the derivative walks back through e at the K
    // gathered columns (values of K per row) and scatters only into the inputs themselves: a per-row
    // value inside e (lse) then gets its sum over the K, which a kernel computes in a walk over the K,
    // where through the columns it would need the scatter at every column. Where k is outside [0, C),
    // the take of a constant is nan and the value is nan, as the take's (e might not pass a nan on:
    // (x > 0)[k]).
    int distributed_take(const ir::Node& take) {
        NodeBuilder& b = builder();
        b.set_pos(take.pos);
        std::map<int, int> done;
        auto at_k = [&](auto&& self, int id) -> int {
            if (const auto it = done.find(id); it != done.end()) return it->second;
            const ir::Node n = out_.node(id);  // a copy: building nodes may reallocate the list
            int out = id;  // one value per row, or a constant: the same at every column
            if (n.kind == ir::NodeKind::Binding) {
                out = self(self, out_.bindings[static_cast<std::size_t>(n.slot)].node);
            } else if (!per_row(id)) {
                if (n.kind == ir::NodeKind::Apply) {
                    std::array<int, 3> args{-1, -1, -1};
                    for (int i = 0; i < n.arity; ++i)
                        args[static_cast<std::size_t>(i)] = self(self, n.args[static_cast<std::size_t>(i)]);
                    out = b.apply(n.fn, args, n.arity, n.pos);
                } else if (n.kind == ir::NodeKind::Input) {
                    out = take_at(id, take);
                } else {
                    throw InternalError("differentiate: a take of K indices of an element that is neither computed nor read");
                }
            }
            done[id] = out;
            return out;
        };
        const int value = at_k(at_k, take.args[0]);
        const int nowhere = b.unary(Builtin::IsNan, take_at(b.constant(0.0), take));
        return b.select(nowhere, b.constant(std::numeric_limits<double>::quiet_NaN()), value);
    }
    int take_at(int values, const ir::Node& take) {
        ir::Node n = take;
        n.args[0] = values;
        return builder().intern(n);
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

    // Where a node's values live, by the rules of per_row_nodes and k_level_nodes over the same
    // inputs: one value per row (a row reduction, a take by an index of one per row, an index, an
    // input of extent 1 along the row, a row's length, and what is computed from those and constants
    // alone); K values per row (a take by an index of K per row, an input of K per row, and what is
    // computed from them with values per row); else one per element. Memoized: nodes are added as
    // differentiation goes.
    enum class Level : signed char { Unknown = -1, Element, Row, K };
    Level level(int id) {
        if (level_.size() < out_.nodes.size()) level_.resize(out_.nodes.size(), Level::Unknown);
        if (const Level known = level_[static_cast<std::size_t>(id)]; known != Level::Unknown) return known;
        const ir::Node& n = out_.node(id);
        auto index_level = [&](int index) {
            return input_k_[static_cast<std::size_t>(out_.node(index).slot)] ? Level::K : Level::Row;
        };
        Level l = Level::Row;  // constants, parameters, row reductions, totals, row lengths, K
        switch (n.kind) {
            case ir::NodeKind::Input: {
                const auto slot = static_cast<std::size_t>(n.slot);
                l = input_k_[slot] ? Level::K : input_per_row_[slot] ? Level::Row : Level::Element;
                break;
            }
            case ir::NodeKind::Binding: l = level(out_.bindings[static_cast<std::size_t>(n.slot)].node); break;
            case ir::NodeKind::Apply:  // K if any argument is, else per row if every argument is
                for (int i = 0; i < n.arity; ++i) {
                    const Level arg = level(n.args[static_cast<std::size_t>(i)]);
                    if (arg == Level::K || l == Level::K) l = Level::K;
                    else if (arg == Level::Element) l = Level::Element;
                }
                break;
            case ir::NodeKind::Take: l = index_level(n.args[1]); break;
            case ir::NodeKind::OneHot: case ir::NodeKind::ScatterAdd: l = Level::Element; break;
            case ir::NodeKind::Seed: l = out_.reduction != ir::Reduction::None ? Level::Row : Level::Element; break;  // a map's varies
            default: break;
        }
        level_[static_cast<std::size_t>(id)] = l;
        return l;
    }
    bool per_row(int id) { return level(id) == Level::Row; }
    bool k_level(int id) { return level(id) == Level::K; }

    // d row reduction / d e_j times the reduction's adjoint g (one per row): the table's formula
    // (torch's backward formulas: sum 1, mean 1 / C, logsumexp softmax, amax / amin (g / count) *
    // mask), over x (e_j), self, g and C; none for an index (argmax).
    void backward_row_reduction(const ir::Node& n, int self, int g) {
        if (!wants(n, 0)) return;
        const RowReductionInfo& info = row_reduction_info(static_cast<RowReduction>(n.slot));
        if (!info.definition.empty())
            throw InternalError(fmt::format("differentiate: '{}' should have been expanded by the checker", info.name));
        if (info.gradient == Gradient::None) return;
        const FormulaArguments at{{n.args[0], -1, -1}, self, g};
        give(n.args[0], build(*row_derivative_formula(static_cast<RowReduction>(n.slot)), at));
    }

    // x[y]: the adjoint goes to column y of the row alone (torch's gather backward, a scatter).
    // x[k] with K indices per row: value j's adjoint goes to column k_j, repeated columns adding.
    void backward_take(const ir::Node& n, int g) {
        if (!wants(n, 0)) return;
        if (input_k_[static_cast<std::size_t>(out_.node(n.args[1]).slot)]) {
            // The guard goes inside the sum: it says which of the K values were selected (or, per
            // row, whether the row was), which a value per element cannot say after the sum.
            ir::Node scatter;
            scatter.kind = ir::NodeKind::ScatterAdd;
            scatter.arity = 2;
            scatter.args[0] = guarded(g, guard_);
            scatter.args[1] = n.args[1];
            scatter.pos = n.pos;
            give(n.args[0], builder().intern(scatter), -1);
            return;
        }
        // A take of an input itself also keeps the row's one value apart (Derivative::scatter_node).
        if (const ir::Node& taken = out_.node(n.args[0]); taken.kind == ir::NodeKind::Input) {
            Scatter& s = scatters_[taken.slot];
            const int index = out_.node(n.args[1]).slot;
            if (s.index >= 0 && s.index != index) s.one_index = false;
            s.index = index;
            const int value = guarded(g, guard_);
            s.value = s.value < 0 ? value : builder().add(s.value, value);
            ++s.takes;
        }
        ir::Node hot;
        hot.kind = ir::NodeKind::OneHot;
        hot.type = ValueType::Bool;
        hot.arity = 1;
        hot.args[0] = n.args[1];
        hot.pos = n.pos;
        const int at_index = builder().intern(hot);
        give(n.args[0], builder().select(at_index, g, builder().constant(0.0)));
    }

    // The body's derivative by each differentiated reduction, as a Composite program of its own: its
    // body, or with several a result each (bindings of their own, after the program's).
    std::shared_ptr<const ir::Program> factor_program() {
        auto factor = std::make_shared<ir::Program>(out_.header());
        factor->reduction = ir::Reduction::Composite;
        factor->indices = out_.index_inputs();
        factor->bindings = out_.bindings;
        factor->nodes = out_.nodes;
        for (int f : factors_)
            if (f < 0) throw InternalError("differentiate: a reduction differentiated without its factor");
        factor->body = factors_[0];
        if (factors_.size() > 1) {
            const std::string prefix = unused_prefix("factor");
            for (std::size_t j = 0; j < factors_.size(); ++j) {
                factor->results.push_back({prefix + std::to_string(j), static_cast<int>(factor->bindings.size()), {}});
                factor->bindings.push_back({prefix + std::to_string(j), factors_[j], {}});
            }
        }
        return factor;
    }

    // `base`, with underscores added until no input, parameter or binding of the program has it as a prefix.
    std::string unused_prefix(std::string base) const {
        auto taken = [&](std::string_view name) { return name.substr(0, base.size()) == base; };
        auto any_taken = [&] {
            return std::any_of(out_.inputs.begin(), out_.inputs.end(), taken) ||
                   std::any_of(out_.params.begin(), out_.params.end(), [&](const auto& p) { return taken(p.name); }) ||
                   std::any_of(out_.bindings.begin(), out_.bindings.end(), [&](const auto& b) { return taken(b.name); });
        };
        while (any_taken()) base += "_";
        return base;
    }

    // Whether `id` is a number of constants and the caller's parameters alone (ValueLevel::Constant,
    // no statistic among them): the same in every kernel of a launch, so a kernel computes it where
    // it is used. (A statistic's parameter is a device value of an earlier kernel, a reduction's:
    // its factor keeps the factor kernel.)
    bool known_at_launch(int id) const {
        if (value_levels(out_)[static_cast<std::size_t>(id)] != ValueLevel::Constant) return false;
        const std::vector<bool> reached = reached_nodes(out_, std::vector<int>{id});
        for (std::size_t i = 0; i < reached.size(); ++i) {
            const ir::Node& n = out_.nodes[i];
            if (reached[i] && n.kind == ir::NodeKind::Param && out_.params[static_cast<std::size_t>(n.slot)].statistic >= 0)
                return false;
        }
        return true;
    }

    int seed(int slot = 0) {
        ir::Node n;
        n.kind = ir::NodeKind::Seed;
        n.slot = slot;
        return builder().intern(n);
    }

    // Row sums and row lengths as RowSums (row_sums.hpp) builds them, over this program's levels and walks.
    RowSums sums() {
        return RowSums(out_, builder(), [this](int id) { return per_row(id); }, [this](int id) { return stage(id); });
    }
    // walk_stage (pipeline.hpp), the emitter's count, memoized: nodes are added as differentiation
    // goes, never changed. (The emitter also sums a mean's squared deviations in the mean's walk;
    // not counted here, so a split is judged against one walk too many, never too few.)
    int stage(int id) {
        if (stage_.size() < out_.nodes.size()) stage_.resize(out_.nodes.size(), -1);
        if (const int known = stage_[static_cast<std::size_t>(id)]; known >= 0) return known;
        const ir::Node& n = out_.node(id);
        const bool k_walk = n.kind == ir::NodeKind::RowReduce && k_level(n.args[0]);
        const int s = walk_stage(out_, id, [this](int arg) { return stage(arg); }, k_walk);
        stage_[static_cast<std::size_t>(id)] = s;
        return s;
    }
    // A contribution made at each element of the row (or at each of its K values, from_k_values_)
    // summed: a row reduction of what varies along them; K times one value per row.
    int sum_along_row(int e) {
        if (!from_k_values_ || !per_row(e)) return sums().reduce(RowReduction::Sum, e, from_k_values_);
        ir::Node count;
        count.kind = ir::NodeKind::TakeCount;
        return builder().mul(builder().intern(count), e);
    }

    // An adjoint and where it applies: `guard` (a condition node; -1: everywhere) is where every
    // `where` it came through selected its side. Elsewhere it is exactly 0, whatever it was
    // multiplied by; guarded() says so in nodes.
    struct Adjoint {
        int value;
        int guard = -1;
    };
    int guarded(int value, int guard) {
        return guard < 0 ? value : builder().select(guard, value, builder().constant(0.0));
    }
    int guarded(const Adjoint& a) { return guarded(a.value, a.guard); }

    // Adds `contribution`, under the guard of the node being differentiated (guard_), to `id`'s adjoint.
    void give(int id, int contribution) { give(id, contribution, guard_); }
    void give(int id, int contribution, int guard) {
        if (const ir::Node& to = out_.node(id); to.kind == ir::NodeKind::Input) ++scatters_[to.slot].contributions;
        // A contribution made at every element to a per-row value adds up along the row: the row
        // value was broadcast to every element, so its adjoint is the sum of theirs (each guarded
        // first). That the contribution itself is the same along the row (a constant 1 from
        // `a + sum(a, -1)`) does not matter: it is made C times.
        // From a value of K per row (q * x[k]), the contributions add along the K values instead,
        // and one that is the same for all K is made K times.
        if (per_row(id) && (from_elements_ || (guard >= 0 && !per_row(guard)))) {
            if (guard < 0 || per_row(guard)) {
                contribution = sum_along_row(contribution);  // the row is selected, or not, as a whole
            } else {
                // Selected at some elements: they add, and the sum is guarded by "any of them",
                // so a factor that follows (acos'(a) of where(c, b, acos(a)), a [N, 1]) cannot turn a
                // row where no element selected this side into nan.
                contribution = sum_along_row(guarded(contribution, guard));
                guard = builder().binary(Builtin::Ne, sum_along_row(guard), builder().constant(0.0));
            }
        }
        auto& slot = adjoint_[static_cast<std::size_t>(id)];
        if (!slot) {
            slot = Adjoint{contribution, guard};
        } else if (slot->guard == guard) {
            slot->value = builder().add(slot->value, contribution);
        } else {  // differently guarded terms: each becomes 0 where its guard is false, then they add
            slot = Adjoint{builder().add(guarded(*slot), guarded(contribution, guard))};
        }
    }

    // where(c, a, b): the adjoint goes on to a where c holds and to b elsewhere, as a guard. The
    // condition gets none.
    void backward_select(const ir::Node& n, int g) {
        NodeBuilder& b = builder();
        const int c = n.args[0];
        auto within = [&](int condition) { return guard_ < 0 ? condition : b.binary(Builtin::And, guard_, condition); };
        if (wants(n, 1)) give(n.args[1], g, within(c));
        if (wants(n, 2)) give(n.args[2], g, within(b.unary(Builtin::Not, c)));
    }

    // The local derivative rules (PyTorch's derivatives.yaml / FunctionsManual.cpp formulas, with g
    // the adjoint of `self`, the node's own value, reused where torch reuses `result`) live in the
    // builtins table; here only the rules that depend on the structure of the arguments.
    void backward(const ir::Node& n, int self, int g) {
        const BuiltinInfo& info = builtin_info(n.fn);
        switch (info.gradient) {
            case Gradient::None: return;  // piecewise constant: zero gradient
            case Gradient::Stopped: return;  // detach
            case Gradient::Refused:
                throw SourceError({out_.source_name, n.pos.line, n.pos.column},
                                  fmt::format("'{}' has no derivative in lossjit: no gradient can pass through it",
                                              info.name),
                                  out_.source);
            case Gradient::Rule: return rule(n, self, g);
            case Gradient::Formula: break;
        }
        const FormulaArguments at{{n.args[0], n.args[1], n.args[2]}, self, g};
        for (int i = 0; i < n.arity; ++i) {
            const ast::Expr* formula = derivative_formula(n.fn, i);
            if (formula && wants(n, i)) give(n.args[static_cast<std::size_t>(i)], build(*formula, at));
        }
    }

    bool wants(const ir::Node& n, int i) const {
        return i < n.arity && depends_[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])];
    }

    // The values a derivative formula's names stand for.
    struct FormulaArguments {
        std::array<int, 3> args;  // x, y, z
        int self;
        int g;
    };

    // A formula's constant subtrees (2 / sqrt(pi)) fold in float64 to one constant; everything else
    // goes through the NodeBuilder, arguments last to first and a condition first, the order in
    // which the hand-written rules built their nodes.
    int build(const ast::Expr& e, const FormulaArguments& at) {
        NodeBuilder& b = builder();
        if (const auto value = fold(e)) return b.constant(*value);
        switch (e.kind) {
            case ast::ExprKind::Number: break;
            case ast::ExprKind::Name: {
                for (int i = 0; i < 3; ++i)
                    if (e.text == std::string_view("xyz" + i, 1) && at.args[static_cast<std::size_t>(i)] >= 0)
                        return at.args[static_cast<std::size_t>(i)];
                if (e.text == "self") return at.self;
                if (e.text == "g") return at.g;
                if (e.text == "C") return sums().row_length();  // a row reduction's formula
                break;
            }
            case ast::ExprKind::Index: break;  // no formula indexes
            case ast::ExprKind::Tuple: break;
            case ast::ExprKind::Unary:
                if (e.text == "+") return build(*e.args[0], at);
                [[fallthrough]];
            case ast::ExprKind::Binary:
            case ast::ExprKind::Call:
            case ast::ExprKind::Conditional: {
                if (const auto row = find_row_reduction(e.text); row && e.kind == ast::ExprKind::Call && e.args.size() == 2)
                    return sums().row_reduce(*row, build(*e.args[0], at));  // sum(x == self, -1)
                const auto fn = formula_builtin(e);
                std::array<int, 3> args{-1, -1, -1};
                const std::size_t count = e.args.size();
                std::size_t last = count;
                if (e.kind == ast::ExprKind::Conditional) args[0] = build(*e.args[0], at);
                const std::size_t first = e.kind == ast::ExprKind::Conditional ? 1 : 0;
                while (last-- > first) args[last] = build(*e.args[last], at);
                return b.apply(*fn, args, static_cast<int>(count), e.pos);
            }
        }
        throw InternalError(fmt::format("derivative formula: unknown name '{}'", e.text));
    }

    void rule(const ir::Node& n, int self, int g) {
        NodeBuilder& b = builder();
        const int x = n.args[0], y = n.args[1];
        auto to = [&](int i, auto make) {
            if (wants(n, i)) give(n.args[static_cast<std::size_t>(i)], make());
        };
        auto k = [&](double v) { return b.constant(v); };
        auto f1 = [&](Builtin fn, int a) { return b.unary(fn, a); };
        auto f2 = [&](Builtin fn, int a, int c) { return b.binary(fn, a, c); };

        switch (n.fn) {
            case Builtin::Select: return backward_select(n, g);
            case Builtin::Pow: {
                const ir::Node exponent = out_.node(y);  // a copy: building nodes may reallocate the list
                if (wants(n, 0)) {
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
                return;
            }
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
                return;
            }
            default: break;
        }
        throw InternalError(fmt::format("differentiate: no rule for '{}'", builtin_info(n.fn).name));
    }

    const ir::Program& source_;
    std::vector<int> wrt_;
    ir::Program out_;
    std::unique_ptr<NodeBuilder> builder_;
    std::vector<bool> depends_;
    std::vector<std::optional<Adjoint>> adjoint_;
    std::vector<bool> input_per_row_;      // inputs that hold one value per row (indices among them)
    std::vector<bool> input_k_;            // inputs that hold K values per row (Layout::k_columns)
    int guard_ = -1;                       // the guard of the node being differentiated
    bool from_elements_ = false;           // its contributions are made at every element of a row
    bool from_k_values_ = false;           // ... at each of the row's K values (it is of K per row)
    std::vector<int> factors_;             // Composite: d body / d each reduction differentiated (gradient_totals)
    static constexpr int kFolded = -2;     // a factor that is a constant, folded into the derivative
    std::vector<Level> level_;             // per node: level(), Unknown until asked
    std::vector<int> stage_;               // per node: stage(), -1 until asked
    // Per input slot: the contributions its node received, and those of takes of the input itself
    // (`w[y]`): where all came so, with one index, the derivative also has a per-row form.
    struct Scatter {
        int contributions = 0;
        int takes = 0;
        int index = -1;       // the index's input slot
        bool one_index = true;
        int value = -1;       // the takes' adjoints added: one value per row
    };
    std::map<int, Scatter> scatters_;
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

namespace {

// sum(U * body) for a map's body, U an input after the map's own (differentiate(), pipeline.hpp).
ir::Program weighted_sum_of_map(const ir::Program& map) {
    ir::Program sum = map;
    const ast::Pos at = map.node(map.body).pos;
    ir::Node upstream;
    upstream.kind = ir::NodeKind::Input;
    upstream.slot = static_cast<int>(sum.inputs.size());
    upstream.pos = at;
    std::string name = "upstream";  // an identifier: the emitter names its variables after inputs
    while (std::find(sum.inputs.begin(), sum.inputs.end(), name) != sum.inputs.end()) name += "_";
    sum.inputs.push_back(name);
    sum.nodes.push_back(upstream);
    if (!sum.source_reads.empty()) sum.source_reads.push_back(upstream.slot);  // as an elementwise map's upstream
    ir::Node weighted;
    weighted.kind = ir::NodeKind::Apply;
    weighted.fn = Builtin::Mul;
    weighted.arity = 2;
    weighted.args = {static_cast<int>(sum.nodes.size()) - 1, map.body, -1};
    weighted.pos = at;
    sum.nodes.push_back(weighted);
    sum.body = static_cast<int>(sum.nodes.size()) - 1;
    sum.reduction = ir::Reduction::Sum;
    return sum;
}

}  // namespace

ir::Program differentiate(const ir::Program& program, std::span<const int> wrt, const std::vector<bool>& per_row_inputs,
                          const std::vector<bool>& k_inputs) {
    for (int slot : wrt)
        if (slot < 0 || slot >= static_cast<int>(program.inputs.size())) throw InternalError("differentiate: input slot out of range");
    if (!program.derivatives.empty()) throw InternalError("differentiate: the program is already differentiated");
    refuse_gradients_through_statistics(program, wrt);
    if (program.is_map() && !program.results.empty() && !wrt.empty()) {
        const ast::Pos at = program.results.front().pos;
        throw UnsupportedError(fmt::format(
            "{}:{}:{}: no gradient of a list of results of one value per row yet (the vector-Jacobian product of "
            "several outputs): compute them without one, or differentiate a program of one of them",
            program.source_name, at.line, at.column));
    }
    if (program.reduction == ir::Reduction::Composite) {
        // The gradient of f(T1, ..., Tk) is the sum over the reductions of df/dTi times Ti's gradient;
        // df/dTi is known only once every reduction is: the factors are computed first, by a kernel
        // of their own (which reads what the reductions read), and scale each reduction's seed.
        return Differentiator(program, wrt, per_row_inputs, k_inputs).run();
    }
    if (differentiates_as_weighted_sum(program) && !wrt.empty()) {
        std::vector<bool> per_row = per_row_inputs, k = k_inputs;
        per_row.resize(program.inputs.size(), false);
        k.resize(program.inputs.size(), false);
        const auto index = program.index_inputs();
        for (std::size_t i = 0; i < index.size(); ++i) per_row[i] = (per_row[i] || index[i]) && !k[i];
        const bool body_per_row = per_row_nodes(program, per_row)[static_cast<std::size_t>(program.body)];
        per_row.push_back(body_per_row);  // the upstream gradient has the output's shape
        k.push_back(false);
        ir::Program gradients = Differentiator(weighted_sum_of_map(program), wrt, per_row, k).run();
        gradients.gradients_only = true;  // the weighted sum itself is nobody's: no kernel computes it
        gradients.gradient_totals.clear();
        return gradients;
    }
    return Differentiator(program, wrt, per_row_inputs, k_inputs).run();
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
