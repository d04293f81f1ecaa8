// The checker's output: a resolved, typed, constant-folded program. Every later stage (emit, the
// CPU reference, dumps) works from this and never looks at the syntax tree again.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "lang/ast.hpp"
#include "lang/builtins.hpp"

namespace lossjit::ir {

// What a program's body is: a map (None), one reduction of a per-element (or per-row) expression
// (Sum, Mean, BatchMean: `body` is the expression reduced), or a scalar expression of several
// reductions (Composite: `body` is that expression, its Total nodes the reductions).
enum class Reduction { None, Sum, Mean, BatchMean, Composite };

// Constant, Input, Param, Binding: leaves (a Binding stands for its bound value). Apply: a builtin
// of the language table, pointwise. The rest reduce:
// - RowReduce: args[0] reduced along the program's row dimensions (Program::row_dims; slot: the
//   RowReduction); one value per row, broadcast back along it.
// - Take: args[0] at column args[1] of its row (args[1] is an index input); one value per row. Where
//   the layout gives the index K integers per row (Layout::k_columns: `x[k]`, k [N, K]), K values per
//   row instead (k_level_nodes), which only values per row and other K-level values may meet until a
//   row reduction reduces them along the K (sum(q * x[k], -1)).
// - Total: args[0] reduced over everything (slot: a Reduction other than None and Composite);
//   only in a Composite body, a scalar.
// Six more appear only in derivatives (differentiate.cpp): RowLength, the row's length C (one value
// per row); TakeCount, K, how many values a take of K indices per row gathers (one value per row);
// OneHot, true at the column args[0] (an index input) names (a bool per element); InRow, true where
// args[0] (an index input of one per row) names a column of the row, 0 <= y < C: the row's sum of
// its OneHot (a bool per row), which a row sum of `onehot(y) ? a : 0` is in closed form; ScatterAdd, at each
// column of the row the sum of the K values of args[0] whose index (args[1], an index input of K per
// row) names that column (one value per element: the gradient of `x[k]`, torch's gather backward,
// repeated indices adding); and Seed,
// the gradient of the loss with respect to the reduced expression at one element, which every
// derivative starts from: for a reduction the upstream gradient / the divisor (times the gradient
// factor of a Composite program; one value, per row; slot: which of the reductions differentiated,
// Program::gradient_totals), for a map's backward the upstream tensor's element. Inside the derivatives, the guards of `where` apply after it: the side a where did not
// select gets 0 even where the upstream gradient or the factor is inf or nan.
enum class NodeKind : unsigned char {
    Constant, Input, Param, Binding, Apply, RowReduce, Take, Total, RowLength, TakeCount, OneHot, InRow, ScatterAdd,
    Seed
};

struct Node {
    NodeKind kind = NodeKind::Constant;
    ValueType type = ValueType::Float;
    Builtin fn = Builtin::Count_;     // Apply only
    int slot = -1;                    // Input, Param or Binding index
    double value = 0.0;               // Constant only
    int arity = 0;                    // Apply only
    std::array<int, 3> args{-1, -1, -1};
    ast::Pos pos;
};

struct ParamDecl {
    std::string name;
    double default_value;
    // A statistic's value (its index in Program::statistics), computed on the device by that program
    // before this one runs and read from there; -1: the caller's parameter (a kernel argument).
    // Statistics come after every parameter of the caller's.
    int statistic = -1;
};

struct BindingDef {
    std::string name;
    int node;  // the bound value
    ast::Pos pos;
};

// The derivative of the per-element body with respect to one input: d body / d input at one
// element, before the reduction's scale (1/N, 1/dim0) and the upstream gradient multiply it.
// Filled only by differentiate(), which puts value and derivatives in one node list so that they
// share every common subexpression.
struct Derivative {
    int input;  // input slot
    int node;
    // Where every contribution to the input came through takes of the input itself with one index
    // (class weights `w[y]`, w [C] gathered along the row): the same derivative as one value per
    // row (`scatter_node`) that goes to element index[row] of the input (`scatter_index`: the
    // index's input slot), so that a kernel can add rows into classes instead of walking the
    // one-hot `node`. -1: not of that form.
    int scatter_index = -1;
    int scatter_node = -1;
    bool scatters() const { return scatter_node >= 0; }
};

// One of a program's several results (`loss, z, acc`): a binding of one number.
struct Result {
    std::string name;
    int binding;  // its slot in Program::bindings
    ast::Pos pos;
};

// Nodes are stored so that every node's arguments come before it, which lets evaluators walk the
// array once, front to back.
struct Program {
    std::string source_name;
    std::string source;
    Reduction reduction = Reduction::None;
    std::vector<std::string> inputs;
    std::vector<ParamDecl> params;
    std::vector<BindingDef> bindings;
    std::vector<Node> nodes;
    int body = -1;
    // The dimensions every RowReduce and Take of the program goes along, as written (sorted; negative
    // from the end): a "row" is the elements that differ only in these, resolved against the
    // inputs' rank by the layout (plan_row_layout). Empty: the last dimension, {-1}.
    std::vector<int> row_dims;
    std::vector<Derivative> derivatives;  // empty unless differentiated; further roots beside body
    // Several results (a Composite program): each a binding of one number, the first the body (what
    // gradients are of). Empty: the body is the one result. Passes that rebuild a program keep the
    // bindings' slots, so these stay valid; header() leaves them out (a program built from another,
    // a statistic or a gradient factor, has one result).
    std::vector<Result> results;
    // A differentiated reduction: the whole-tensor reductions its derivatives start from, as indices
    // in row_totals: Seed j stands for the gradient reaching the elements of reduction
    // gradient_totals[j] (upstream / its divisor, times factor j). A plain reduction: {0}. A
    // Composite program: each reduction the inputs differentiated reach; the body's derivative by
    // each, a scalar of the reductions, is a result of gradient_factor (a Composite program of its
    // own, launched first: its values scale the gradients; results in this order). A factor that is
    // a constant is folded into the derivatives instead (1 in gradient_factor); where all are,
    // gradient_factor is null.
    std::vector<int> gradient_totals;
    std::shared_ptr<const Program> gradient_factor;
    // A map's gradient program, sum(U * body) differentiated (differentiate(), pipeline.hpp): only its
    // derivatives are wanted, so it has no value to compute (row_totals is empty, gradient_totals
    // too: its one seed is the upstream's scale, 1). Computing it cost layer norm's gradient kernel a
    // division and a float64 add per element (10-15% of its time on an H100 and an H200).
    bool gradients_only = false;
    // Whole-tensor reductions used per element or inside another reduction (`x / sqrt(sum(x^2))`,
    // `mean((x - mean(x))^2)`), split off by split_statistics: each a program of its own (a
    // reduction, or Composite) whose value a parameter with its index (ParamDecl::statistic) reads.
    // In the order they are computed: one's statistic parameters name earlier entries of this list
    // (the statistics' own `statistics` are empty). Every program that reads one (this one, its
    // gradient programs, the statistics themselves) shares this list.
    std::vector<std::shared_ptr<const Program>> statistics;
    // A statistic's program is planned by rows as a Composite program is (so that its reduction of a
    // value per row runs over the rows, as a Composite's would), with the indices of the program it
    // was split from: they keep the rows' shape though it takes nothing.
    bool statistic = false;
    std::vector<bool> indices;
    // The input slots the program as the user wrote it reads (set before statistics are split off;
    // empty: read_inputs). Their dtypes decide the compute type and a map's output dtype of this
    // program and of every program built from it (its statistics, gradient programs and gradient
    // factor): a statistic that reads only integers still computes in float64 where the program
    // reads a float64 input, as it would unsplit (dtype_inputs, pipeline.hpp).
    std::vector<int> source_reads;

    // This program without its nodes, bindings, body and derivatives: what a pass that builds a
    // program from this one starts from.
    Program header() const {
        Program p;
        p.source_name = source_name;
        p.source = source;
        p.reduction = reduction;
        p.inputs = inputs;
        p.params = params;
        p.row_dims = row_dims;
        p.statistics = statistics;
        p.statistic = statistic;
        p.indices = indices;
        p.source_reads = source_reads;
        return p;
    }

    const Node& node(int id) const { return nodes[static_cast<std::size_t>(id)]; }
    // How many numbers a reduction returns (1 but for a list of results), and the node of each.
    std::size_t result_count() const { return results.empty() ? 1 : results.size(); }
    std::vector<int> result_nodes() const {
        if (results.empty()) return {body};
        std::vector<int> out;
        for (const auto& r : results) out.push_back(bindings[static_cast<std::size_t>(r.binding)].node);
        return out;
    }
    bool is_map() const { return reduction == Reduction::None; }
    // Reduces along rows (RowReduce, Take) or is Composite: the kernel walks row by row
    // (kinds/by_rows_emit.cpp), and the layout walks the row dimensions last (plan_row_layout).
    bool by_rows() const {
        if (reduction == Reduction::Composite || statistic) return true;
        for (bool index : indices)
            if (index) return true;
        for (const auto& n : nodes)  // a Total too: even in a binding the body never uses
            if (n.kind == NodeKind::RowReduce || n.kind == NodeKind::Take || n.kind == NodeKind::Total) return true;
        return false;
    }
    // The caller's parameters (kernel arguments, Loss::set_param) come first, then the statistics'.
    std::size_t caller_params() const {
        std::size_t n = 0;
        while (n < params.size() && params[n].statistic < 0) ++n;
        return n;
    }
    bool reads_statistics() const { return caller_params() < params.size(); }
    std::vector<int> reduced_dims() const { return row_dims.empty() ? std::vector<int>{-1} : row_dims; }
    // Input slots used as an index (`x[y]`): integers, one per row (shape: the rows' shape).
    std::vector<bool> index_inputs() const {
        std::vector<bool> index(inputs.size(), false);
        for (std::size_t k = 0; k < indices.size() && k < index.size(); ++k) index[k] = indices[k];
        for (const auto& n : nodes)
            if (n.kind == NodeKind::Take) index[static_cast<std::size_t>(nodes[static_cast<std::size_t>(n.args[1])].slot)] = true;
        return index;
    }
};

std::string_view to_string(Reduction r);

}  // namespace lossjit::ir
