// simplify: hash-consing and the rewrites that are exact in IEEE float arithmetic. Rules that look
// harmless but are not are deliberately absent:
//   x * 0 -> 0      wrong for x = ±inf or nan (nan), and for x < 0 (-0); kept only for a bool x
//   x + 0 -> x      wrong for x = -0 (-0 + 0 is +0); x + (-0) -> x and x - 0 -> x are exact
//   x - x -> 0      wrong for ±inf and nan
//   c1 * (c2 * x)   folding c1 * c2 rounds differently from two multiplications
// a + b and a * b are commutative in IEEE arithmetic, so their operands are put in one order
// (constants first, then by node id) and a * b and b * a become one node.
#include "ir/simplify.hpp"

#include <bit>
#include <cmath>
#include <limits>

#include "lossjit/errors.hpp"

namespace lossjit {

NodeBuilder::NodeBuilder(ir::Program& program) : program_(program) {
    for (std::size_t id = 0; id < program.nodes.size(); ++id)
        index_.emplace(key_of(program.nodes[id]), static_cast<int>(id));
}

NodeBuilder::Key NodeBuilder::key_of(const ir::Node& n) {
    double value = n.kind == ir::NodeKind::Constant ? n.value : 0.0;
    if (std::isnan(value)) value = std::numeric_limits<double>::quiet_NaN();  // one nan, whatever its payload
    return {static_cast<int>(n.kind), static_cast<int>(n.type), static_cast<int>(n.fn), n.slot,
            std::bit_cast<std::uint64_t>(value), n.arity, n.args[0], n.args[1], n.args[2]};
}

int NodeBuilder::intern(const ir::Node& node) {
    const auto [it, inserted] = index_.emplace(key_of(node), static_cast<int>(program_.nodes.size()));
    if (inserted) program_.nodes.push_back(node);
    return it->second;
}

int NodeBuilder::constant(double value, ValueType type) {
    ir::Node n;
    n.kind = ir::NodeKind::Constant;
    n.type = type;
    n.value = value;
    n.pos = pos_;
    return intern(n);
}

const ir::Node& NodeBuilder::resolved(int id) const {
    const ir::Node* n = &program_.node(id);
    while (n->kind == ir::NodeKind::Binding) n = &program_.node(program_.bindings.at(static_cast<std::size_t>(n->slot)).node);
    return *n;
}

bool NodeBuilder::is_constant(int id, double value) const {
    const ir::Node& n = resolved(id);
    return n.kind == ir::NodeKind::Constant && n.value == value && std::signbit(n.value) == std::signbit(value);
}

int NodeBuilder::apply(Builtin fn, std::array<int, 3> args, int arity, ast::Pos pos) {
    if (arity != builtin_info(fn).arity) throw InternalError("NodeBuilder::apply: wrong arity");
    for (int i = 0; i < arity; ++i)
        if (args[static_cast<std::size_t>(i)] < 0 || args[static_cast<std::size_t>(i)] >= static_cast<int>(program_.nodes.size()))
            throw InternalError("NodeBuilder::apply: argument out of range");
    return rewrite(fn, args, arity, pos);
}

int NodeBuilder::rewrite(Builtin fn, std::array<int, 3> args, int arity, ast::Pos pos) {
    const auto& info = builtin_info(fn);
    const int a = args[0], b = args[1], c = args[2];

    bool all_constant = true;
    std::array<double, 3> values{};
    for (int i = 0; i < arity; ++i) {
        const ir::Node& arg = resolved(args[static_cast<std::size_t>(i)]);
        all_constant = all_constant && arg.kind == ir::NodeKind::Constant;
        values[static_cast<std::size_t>(i)] = arg.value;
    }
    if (all_constant) return constant(fold_builtin(fn, values[0], values[1], values[2]), info.result);

    auto negated = [&](int id) { return resolved(id).kind == ir::NodeKind::Apply && resolved(id).fn == Builtin::Neg; };
    auto operand = [&](int id) { return resolved(id).args[0]; };
    auto is_bool = [&](int id) { return program_.node(id).type == ValueType::Bool; };
    auto constant_truth = [&](int id) { return resolved(id).value != 0.0; };  // nan is true

    switch (fn) {
        case Builtin::Neg:
            if (negated(a)) return operand(a);
            break;
        case Builtin::Add:
            if (is_constant(b, -0.0)) return a;
            if (is_constant(a, -0.0)) return b;
            if (negated(b)) return rewrite(Builtin::Sub, {a, operand(b), -1}, 2, pos);  // a + (-x) is a - x
            if (negated(a)) return rewrite(Builtin::Sub, {b, operand(a), -1}, 2, pos);
            break;
        case Builtin::Sub:
            if (is_constant(b, 0.0)) return a;
            if (is_constant(a, -0.0)) return rewrite(Builtin::Neg, {b, -1, -1}, 1, pos);
            if (negated(b)) return rewrite(Builtin::Add, {a, operand(b), -1}, 2, pos);
            break;
        case Builtin::Mul:
            if (is_constant(b, 1.0)) return a;
            if (is_constant(a, 1.0)) return b;
            if (is_constant(b, -1.0)) return rewrite(Builtin::Neg, {a, -1, -1}, 1, pos);
            if (is_constant(a, -1.0)) return rewrite(Builtin::Neg, {b, -1, -1}, 1, pos);
            // A bool is 0 or 1, finite and not negative: times ±0 it is that zero.
            if (is_constant(a) && resolved(a).value == 0.0 && is_bool(b)) return a;
            if (is_constant(b) && resolved(b).value == 0.0 && is_bool(a)) return b;
            // Rounding is symmetric, so signs move out of a product exactly.
            if (negated(a) && negated(b)) return rewrite(Builtin::Mul, {operand(a), operand(b), -1}, 2, pos);
            if (negated(a)) return rewrite(Builtin::Neg, {rewrite(Builtin::Mul, {operand(a), b, -1}, 2, pos), -1, -1}, 1, pos);
            if (negated(b)) return rewrite(Builtin::Neg, {rewrite(Builtin::Mul, {a, operand(b), -1}, 2, pos), -1, -1}, 1, pos);
            break;
        case Builtin::Div:
            if (is_constant(b, 1.0)) return a;
            if (is_constant(b, -1.0)) return rewrite(Builtin::Neg, {a, -1, -1}, 1, pos);
            if (negated(a)) return rewrite(Builtin::Neg, {rewrite(Builtin::Div, {operand(a), b, -1}, 2, pos), -1, -1}, 1, pos);
            if (negated(b)) return rewrite(Builtin::Neg, {rewrite(Builtin::Div, {a, operand(b), -1}, 2, pos), -1, -1}, 1, pos);
            break;
        case Builtin::Pow:
            if (is_constant(b, 1.0)) return a;  // pow(x, 1) is x for every x, nan included
            break;
        case Builtin::Select:
            if (is_constant(a)) return constant_truth(a) ? b : c;
            if (b == c) return b;
            break;
        case Builtin::And:
        case Builtin::Or: {
            const bool absorbing = fn == Builtin::Or;  // true || x is true; false && x is false
            for (auto [k, other] : {std::pair{a, b}, std::pair{b, a}}) {
                if (!is_constant(k)) continue;
                if (constant_truth(k) == absorbing) return constant(absorbing ? 1.0 : 0.0, ValueType::Bool);
                if (is_bool(other)) return other;
            }
            break;
        }
        case Builtin::Xlogy:
            // xlogy(1, y) is nan for a nan y and 1 * log(y) otherwise: log(y) exactly.
            if (is_constant(a, 1.0)) return rewrite(Builtin::Log, {b, -1, -1}, 1, pos);
            break;
        default: break;
    }

    ir::Node n;
    n.kind = ir::NodeKind::Apply;
    n.fn = fn;
    n.type = info.result;
    n.arity = arity;
    n.args = {a, arity > 1 ? b : -1, arity > 2 ? c : -1};
    n.pos = pos;
    if (fn == Builtin::Add || fn == Builtin::Mul) {
        const bool a_first = is_constant(a) != is_constant(b) ? is_constant(a) : a <= b;
        if (!a_first) std::swap(n.args[0], n.args[1]);
    }
    return intern(n);
}

void copy_nodes(const ir::Program& source, ir::Program& out, const std::vector<bool>& live,
                const std::function<int(std::size_t id, const ir::Node& node)>& copy) {
    std::vector<int> map(source.nodes.size(), -1);
    out.bindings = source.bindings;
    std::multimap<int, std::size_t> bound_by;  // source node -> the bindings of it
    for (std::size_t b = 0; b < source.bindings.size(); ++b) {
        bound_by.emplace(source.bindings[b].node, b);
        out.bindings[b].node = -1;
    }
    for (std::size_t id = 0; id < source.nodes.size(); ++id) {
        if (!live.empty() && !live[id]) continue;
        ir::Node n = source.nodes[id];
        for (int i = 0; i < n.arity; ++i) n.args[static_cast<std::size_t>(i)] = map[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])];
        map[id] = copy(id, n);
        const auto [first, last] = bound_by.equal_range(static_cast<int>(id));
        for (auto it = first; it != last; ++it) out.bindings[it->second].node = map[id];
    }
    out.body = map[static_cast<std::size_t>(source.body)];
    out.results = source.results;  // binding slots, kept
}

}  // namespace lossjit
