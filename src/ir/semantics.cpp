// semantics: what a program means beyond its nodes (what its reduction divides by, the dtype of its
// output), shared by the kernel launch and the CPU reference.
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "pipeline.hpp"

namespace lossjit {

namespace {

double divisor_of(ir::Reduction reduction, std::int64_t count, const Shape& shape) {
    switch (reduction) {
        case ir::Reduction::Sum: return 1.0;
        case ir::Reduction::Mean: return static_cast<double>(count);
        case ir::Reduction::BatchMean:
            if (shape.empty())
                throw UsageError("batchmean divides by the size of dimension 0, but the inputs are scalars");
            return static_cast<double>(shape[0]);
        case ir::Reduction::None: case ir::Reduction::Composite: break;
    }
    throw InternalError("divisor_of called for a map or a composite program");
}

}  // namespace

double reduction_divisor(const ir::Program& program, const Shape& shape) {
    if (program.by_rows()) throw InternalError("reduction_divisor called for a program that reduces along rows");
    switch (program.reduction) {
        case ir::Reduction::Sum: return 1.0;
        case ir::Reduction::Mean: return static_cast<double>(element_count(shape));
        case ir::Reduction::BatchMean:
            if (shape.empty())
                throw UsageError("batchmean divides by the size of dimension 0, but the inputs are scalars");
            return static_cast<double>(shape[0]);
        case ir::Reduction::None: case ir::Reduction::Composite: break;
    }
    throw InternalError("reduction_divisor called for a map");
}

std::vector<bool> per_row_inputs(const ir::Program& program, const Layout& layout) {
    if (!layout.by_rows) return {};
    const auto index = program.index_inputs();
    std::vector<bool> per_row(program.inputs.size(), false);
    for (std::size_t k = 0; k < per_row.size() && k < layout.inputs.size(); ++k)
        per_row[k] = (index[k] || layout.inputs[k].per_row) && !layout.inputs[k].per_k;
    return per_row;
}

std::vector<bool> k_inputs(const Layout& layout) {
    if (layout.k_columns == 0) return {};
    std::vector<bool> k(layout.inputs.size(), false);
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = layout.inputs[i].per_k;
    return k;
}

std::vector<bool> k_level_nodes(const ir::Program& program, const std::vector<bool>& k_inputs) {
    std::vector<bool> k(program.nodes.size(), false);
    if (std::none_of(k_inputs.begin(), k_inputs.end(), [](bool b) { return b; })) return k;
    auto input_k = [&](int node) {
        const auto slot = static_cast<std::size_t>(program.node(node).slot);
        return slot < k_inputs.size() && k_inputs[slot];
    };
    for (std::size_t id = 0; id < program.nodes.size(); ++id) {
        const ir::Node& n = program.nodes[id];
        switch (n.kind) {
            case ir::NodeKind::Input: k[id] = input_k(static_cast<int>(id)); break;
            case ir::NodeKind::Binding:
                k[id] = k[static_cast<std::size_t>(program.bindings[static_cast<std::size_t>(n.slot)].node)];
                break;
            case ir::NodeKind::Apply:
                for (int i = 0; i < n.arity; ++i) k[id] = k[id] || k[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])];
                break;
            case ir::NodeKind::Take: k[id] = input_k(n.args[1]); break;
            default: break;  // reductions reduce the K away; the rest are per row, per element or constant
        }
    }
    return k;
}

std::vector<bool> per_row_nodes(const ir::Program& program, const std::vector<bool>& input_per_row) {
    std::vector<bool> per_row(program.nodes.size(), true);
    for (std::size_t id = 0; id < program.nodes.size(); ++id) {
        const ir::Node& n = program.nodes[id];
        switch (n.kind) {
            case ir::NodeKind::Constant: case ir::NodeKind::Param: break;
            case ir::NodeKind::Input: per_row[id] = input_per_row[static_cast<std::size_t>(n.slot)]; break;
            case ir::NodeKind::Binding:
                per_row[id] = per_row[static_cast<std::size_t>(program.bindings[static_cast<std::size_t>(n.slot)].node)];
                break;
            case ir::NodeKind::Apply:
                for (int i = 0; i < n.arity; ++i)
                    per_row[id] = per_row[id] && per_row[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])];
                break;
            case ir::NodeKind::Take:  // K values per row where its index holds K (k_level_nodes)
                per_row[id] = input_per_row[static_cast<std::size_t>(program.node(n.args[1]).slot)];
                break;
            case ir::NodeKind::RowReduce: case ir::NodeKind::Total: case ir::NodeKind::RowLength:
            case ir::NodeKind::TakeCount: case ir::NodeKind::InRow:
                break;
            case ir::NodeKind::Seed: per_row[id] = !program.is_map(); break;  // a map's: the upstream element
            case ir::NodeKind::OneHot: case ir::NodeKind::ScatterAdd: per_row[id] = false; break;
        }
    }
    return per_row;
}

std::vector<RowTotal> row_totals(const ir::Program& program) {
    std::vector<RowTotal> totals;
    if (program.gradients_only) return totals;
    if (program.reduction == ir::Reduction::Composite) {
        // The totals the results reach (a binding of one they never use is not computed).
        std::vector<bool> reached(program.nodes.size(), false);
        for (int root : program.result_nodes()) reached[static_cast<std::size_t>(root)] = true;
        for (std::size_t id = program.nodes.size(); id-- > 0;) {
            if (!reached[id]) continue;
            const ir::Node& n = program.nodes[id];
            if (n.kind == ir::NodeKind::Total) continue;  // its argument is the kernel's, not the final value's
            if (n.kind == ir::NodeKind::Binding)
                reached[static_cast<std::size_t>(program.bindings[static_cast<std::size_t>(n.slot)].node)] = true;
            for (int i = 0; i < n.arity; ++i) reached[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])] = true;
        }
        for (std::size_t id = 0; id < program.nodes.size(); ++id)
            if (reached[id] && program.nodes[id].kind == ir::NodeKind::Total)
                totals.push_back({static_cast<ir::Reduction>(program.nodes[id].slot), program.nodes[id].args[0], static_cast<int>(id)});
    } else if (!program.is_map()) {
        totals.push_back({program.reduction, program.body, -1});
    }
    return totals;
}

std::vector<double> total_divisors(const ir::Program& program, const Layout& layout) {
    const auto per_row = per_row_nodes(program, per_row_inputs(program, layout));
    const auto k_level = k_level_nodes(program, k_inputs(layout));
    std::vector<double> divisors;
    for (const auto& t : row_totals(program)) {
        const bool k = k_level[static_cast<std::size_t>(t.argument)];
        const bool rows = k || per_row[static_cast<std::size_t>(t.argument)];
        // batchmean of one value per row divides by the rows' dimension 0, as torch's of the
        // keepdim=False result (dimension 0 of the whole shape may be the row's own); where the
        // rows' shape is a scalar (rank-1 inputs), by dimension 0 of the whole shape, as always.
        // K values per row count as the [rows..., K] they are (mean: rows times K).
        const Shape of_rows = rows ? rows_shape(layout) : Shape{};
        const std::int64_t count = k ? layout.rows * layout.k_columns : rows ? layout.rows : layout.count;
        divisors.push_back(divisor_of(t.reduction, count, of_rows.empty() ? layout.shape : of_rows));
    }
    return divisors;
}

std::optional<RowGradient> row_gradient_kind(const ir::Program& program, const Layout& layout, std::size_t g) {
    const ir::Derivative& d = program.derivatives[g];
    const OperandAccess& input = layout.inputs[static_cast<std::size_t>(d.input)];
    if (input.per_k) {
        const bool last = !layout.row_dims.empty() && layout.row_dims.back() + 1 == layout.shape.size();
        if (last && input.elements == layout.rows * layout.k_columns) return RowGradient::PerK;
        return std::nullopt;
    }
    if (input.elements == layout.count) return RowGradient::Elements;
    if (input.per_row && input.elements == layout.rows) return RowGradient::PerRow;
    if (d.scatters() && !input.per_row && !layout.dims.empty() && input.elements == layout.dims.back())
        return RowGradient::Scattered;
    return std::nullopt;
}

std::vector<RowGradient> row_gradient_kinds(const ir::Program& program, const Layout& layout) {
    std::vector<RowGradient> kinds;
    for (std::size_t g = 0; g < program.derivatives.size(); ++g) {
        const auto kind = row_gradient_kind(program, layout, g);
        const auto input = static_cast<std::size_t>(program.derivatives[g].input);
        if (!kind && layout.inputs[input].per_k)
            throw UnsupportedError(fmt::format(
                "the gradient of '{}', K values per row beside x[k]: the GPU writes it where it has one set of K for "
                "each row and the row is the last dimension (the CPU reference sums any: reference_grad, `lossjit run "
                "--cpu`)",
                program.inputs[input]));
        if (!kind)
            throw UnsupportedError(fmt::format(
                "the gradient of '{}' sums over a broadcast; for programs that reduce along rows, the GPU computes "
                "gradients of inputs of the full shape, of one value for each row ([N, 1] against [N, C]), of K values "
                "for each row (q [N, K] beside x[k], along the last dimension) and of one row read only through an "
                "index (class weights w[y]) (the CPU reference sums this one: reference_grad, "
                "`lossjit run --cpu`)",
                program.inputs[static_cast<std::size_t>(program.derivatives[g].input)]));
        kinds.push_back(*kind);
    }
    return kinds;
}

int walk_stage(const ir::Program& program, int id, const std::function<int(int)>& stage_of, bool k_walk) {
    const ir::Node& n = program.node(id);
    if (n.kind == ir::NodeKind::Binding) return stage_of(program.bindings[static_cast<std::size_t>(n.slot)].node);
    int s = 0;
    if (n.kind != ir::NodeKind::Total)
        for (int i = 0; i < n.arity; ++i) s = std::max(s, stage_of(n.args[static_cast<std::size_t>(i)]));
    return n.kind == ir::NodeKind::RowReduce && !k_walk ? s + 1 : s;
}

std::vector<bool> reached_nodes(const ir::Program& program, std::span<const int> roots) {
    std::vector<bool> reached(program.nodes.size(), false);
    std::vector<int> stack(roots.begin(), roots.end());
    while (!stack.empty()) {
        const int id = stack.back();
        stack.pop_back();
        if (reached[static_cast<std::size_t>(id)]) continue;
        reached[static_cast<std::size_t>(id)] = true;
        const ir::Node& n = program.node(id);
        if (n.kind == ir::NodeKind::Binding) stack.push_back(program.bindings[static_cast<std::size_t>(n.slot)].node);
        for (int i = 0; i < n.arity; ++i) stack.push_back(n.args[static_cast<std::size_t>(i)]);
    }
    return reached;
}

std::vector<double> parameter_values(const ir::Program& program, std::span<const double> caller,
                                     std::span<const double> statistics) {
    std::vector<double> values;
    for (std::size_t i = 0; i < program.params.size(); ++i) {
        const int statistic = program.params[i].statistic;
        if (statistic >= 0 && static_cast<std::size_t>(statistic) >= statistics.size())
            throw InternalError("a statistic read before it is computed");
        if (statistic < 0 && i >= caller.size()) throw InternalError("fewer parameter values than parameters");
        values.push_back(statistic >= 0 ? statistics[static_cast<std::size_t>(statistic)] : caller[i]);
    }
    return values;
}

double gradient_scale(const ir::Program& program, const Shape& shape) { return 1.0 / reduction_divisor(program, shape); }

DType default_output_dtype(const ir::Program& program, std::span<const TensorView> inputs) {
    std::vector<DType> dtypes;
    for (int slot : dtype_inputs(program))
        if (static_cast<std::size_t>(slot) < inputs.size()) dtypes.push_back(inputs[static_cast<std::size_t>(slot)].dtype);
    return result_dtype(dtypes);
}

std::vector<int> dtype_inputs(const ir::Program& program) {
    return program.source_reads.empty() ? read_inputs(program) : program.source_reads;
}

DType program_compute_dtype(const ir::Program& program, std::span<const DType> by_slot, std::optional<DType> upstream) {
    std::vector<DType> dtypes;
    for (int slot : dtype_inputs(program)) dtypes.push_back(by_slot[static_cast<std::size_t>(slot)]);
    if (upstream) dtypes.push_back(*upstream);
    return compute_dtype(dtypes);
}

std::vector<int> read_inputs(const ir::Program& program) {
    std::vector<bool> read(program.inputs.size(), false);
    for (const auto& n : program.nodes)
        if (n.kind == ir::NodeKind::Input) read[static_cast<std::size_t>(n.slot)] = true;
    std::vector<int> slots;
    for (std::size_t k = 0; k < read.size(); ++k)
        if (read[k]) slots.push_back(static_cast<int>(k));
    return slots;
}


namespace {

// Walks one result of a Composite program: what share a part of the rows has in it, or a SourceError
// at the node that keeps it from being a sum of reductions (linear_loss then runs the program by its
// reductions, split_totals).
class RowShareOf {
public:
    explicit RowShareOf(const ir::Program& program) : p_(program), levels_(value_levels(program)) {}

    RowShare of(int id) const {
        const std::optional<RowShare> share = linear(id);
        if (!share) refuse(id, "a result that is not a reduction times constants");
        return *share;
    }

private:
    // The share of a value linear in reductions (of one kind); nullopt for a constant.
    std::optional<RowShare> linear(int id) const {
        const ir::Node& n = p_.node(id);
        if (levels_[static_cast<std::size_t>(id)] == ValueLevel::Constant) return std::nullopt;
        switch (n.kind) {
            case ir::NodeKind::Binding: return linear(p_.bindings[static_cast<std::size_t>(n.slot)].node);
            case ir::NodeKind::Total:
                return row_share(static_cast<ir::Reduction>(n.slot));
            case ir::NodeKind::Apply: break;
            default: refuse(id, "a value per element or per row where one number is expected");
        }
        const int a = n.args[0], b = n.args[1];
        switch (n.fn) {
            case Builtin::Neg: return linear(a);
            case Builtin::Add: case Builtin::Sub: {
                const auto left = linear(a), right = linear(b);
                if (!left || !right) refuse(id, "a constant added to a reduction (each part would add it again)");
                if (*left != *right) refuse(id, "a sum added to a mean (the parts weigh them differently)");
                return left;
            }
            case Builtin::Mul: {
                const bool left_constant = constant(a), right_constant = constant(b);
                if (left_constant && !right_constant) return linear(b);
                if (right_constant && !left_constant) return linear(a);
                break;
            }
            case Builtin::Div:
                if (constant(b)) return linear(a);
                break;
            default: break;
        }
        refuse(id, "reductions combined other than by +, - and constant factors");
    }

    bool constant(int id) const { return levels_[static_cast<std::size_t>(id)] == ValueLevel::Constant; }

    [[noreturn]] void refuse(int id, std::string_view what) const {
        const ast::Pos pos = p_.node(id).pos;
        throw SourceError({p_.source_name, pos.line, pos.column},
                          fmt::format("this program's results are not sums of its reductions: {}", what),
                          p_.source);
    }

    const ir::Program& p_;
    std::vector<ValueLevel> levels_;
};

}  // namespace

void check_row_split(const ir::Program& program) {
    auto refuse_program = [&](std::string_view why) {
        throw SourceError({program.source_name, 1, 1},
                          fmt::format("this program cannot run a part of the rows at a time: {}", why), program.source);
    };
    if (program.is_map() && !program.by_rows())
        refuse_program("it is a map of one value per element, as large as the logits; write a reduction, or a map "
                       "of one value per row");
    if (program.is_map() && !program.results.empty())
        refuse_program("it is a map of several results; linear_loss takes maps of one");
    if (!program.statistics.empty()) {
        const ast::Pos at = statistic_position(program, 0);
        throw SourceError({program.source_name, at.line, at.column},
                          fmt::format("this program cannot run a part of the rows at a time: the whole-tensor "
                                      "value '{}' is used per element, and a part of the rows has another",
                                      statistic_text(*program.statistics[0])),
                          program.source);
    }
    for (int d : program.row_dims)
        if (d != -1 && d != 1) refuse_program("it reduces along the first dimension, which the parts split");
}

std::vector<RowShare> row_shares(const ir::Program& program) {
    check_row_split(program);
    switch (program.reduction) {
        case ir::Reduction::None: return {};  // a map of one value per row: each part writes its rows
        case ir::Reduction::Sum: case ir::Reduction::Mean: case ir::Reduction::BatchMean:
            return {row_share(program.reduction)};
        default: break;
    }
    const RowShareOf walk(program);
    std::vector<RowShare> shares;
    for (int node : program.result_nodes()) shares.push_back(walk.of(node));
    return shares;
}

}  // namespace lossjit
