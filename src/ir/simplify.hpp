// simplify: builds nodes into an ir::Program so that each distinct node exists once (hash-consing:
// a term used by the value and by several derivatives is computed once) and rewrites a node only
// where the rewrite gives the same bits for every input, nan, ±inf and ±0 included. Differentiation
// produces many trivial terms (g * 1, -(-g), folded constants); this is where they disappear.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <tuple>

#include "ir/program.hpp"

namespace lossjit {

class NodeBuilder {
public:
    // Appends to `program.nodes`; nodes already there are indexed, so building one again finds it.
    // Binding nodes are looked through (via program.bindings) when rewriting, never when interning.
    explicit NodeBuilder(ir::Program& program);

    // The node as given, no rewriting: how the primal program is copied, so its value is printed
    // exactly as the checker left it.
    int intern(const ir::Node& node);

    int constant(double value, ValueType type = ValueType::Float);
    // An application after folding and exact rewrites; `pos` is kept for diagnostics only.
    int apply(Builtin fn, std::array<int, 3> args, int arity, ast::Pos pos = {});

    int unary(Builtin fn, int a) { return apply(fn, {a, -1, -1}, 1, pos_); }
    int binary(Builtin fn, int a, int b) { return apply(fn, {a, b, -1}, 2, pos_); }
    int ternary(Builtin fn, int a, int b, int c) { return apply(fn, {a, b, c}, 3, pos_); }
    int neg(int a) { return unary(Builtin::Neg, a); }
    int add(int a, int b) { return binary(Builtin::Add, a, b); }
    int sub(int a, int b) { return binary(Builtin::Sub, a, b); }
    int mul(int a, int b) { return binary(Builtin::Mul, a, b); }
    int div(int a, int b) { return binary(Builtin::Div, a, b); }
    int select(int c, int a, int b) { return ternary(Builtin::Select, c, a, b); }

    // Position given to nodes built through the short forms above.
    void set_pos(ast::Pos pos) { pos_ = pos; }
    ast::Pos pos() const { return pos_; }

private:
    using Key = std::tuple<int, int, int, int, std::uint64_t, int, int, int, int>;
    static Key key_of(const ir::Node& node);
    const ir::Node& resolved(int id) const;  // through bindings
    bool is_constant(int id, double value) const;  // the same bits: -0 is not +0
    bool is_constant(int id) const { return resolved(id).kind == ir::NodeKind::Constant; }
    int rewrite(Builtin fn, std::array<int, 3> args, int arity, ast::Pos pos);

    ir::Program& program_;
    std::map<Key, int> index_;
    ast::Pos pos_;
};

// How a pass rebuilds a program node by node (differentiate's copy of the primal, split_row_sums):
// each of `source`'s nodes that `live` marks (every node where `live` is empty), in order, becomes
// `copy(id, node)` in `out`, `node` being the source node with its arguments already mapped to `out`.
// Each binding's value is set in `out` as soon as its node is copied (a value comes before every use
// of its name), so `copy` can look through bindings; then `out`'s body and results.
void copy_nodes(const ir::Program& source, ir::Program& out, const std::vector<bool>& live,
                const std::function<int(std::size_t id, const ir::Node& node)>& copy);

}  // namespace lossjit
