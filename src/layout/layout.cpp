// layout: how the kernel walks its operands. Broadcasting is expressed entirely through strides
// (a size-1 or missing dimension gets stride 0), and adjacent dimensions that every operand walks
// alike are merged, so the common cases reach the kernel as rank 1 (all contiguous) or rank 2 (a row
// vector broadcast over rows).
#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "lang/builtins.hpp"
#include "pipeline.hpp"

namespace lossjit {
namespace {

std::vector<std::int64_t> strides_of(const OperandShape& op) {
    if (op.strides.empty()) return contiguous_strides(op.shape);
    if (op.strides.size() != op.shape.size()) {
        throw UsageError(fmt::format("'{}' has {} strides for a shape of rank {}", op.name,
                                     op.strides.size(), op.shape.size()));
    }
    // The farthest element must be addressable: kernels and the reference add stride * index in
    // 64 bits, and an overflow there is undefined behaviour, not just a wrong address.
    constexpr std::int64_t kMaxReach = std::int64_t{1} << 62;
    if (element_count(op.shape) == 0) return op.strides;
    std::int64_t reach = 0;
    for (std::size_t d = 0; d < op.shape.size(); ++d) {
        const std::int64_t stride = op.strides[d];
        const std::int64_t steps = op.shape[d] - 1;
        if (stride < -kMaxReach || stride > kMaxReach || (steps > 0 && (stride < 0 ? -stride : stride) > (kMaxReach - reach) / steps)) {
            throw UsageError(fmt::format("'{}' has strides [{}] that reach beyond 2^62 elements for its shape [{}]",
                                         op.name, fmt::join(op.strides, ", "), fmt::join(op.shape, ", ")));
        }
        reach += (stride < 0 ? -stride : stride) * steps;
    }
    return op.strides;
}

// Drops extent-1 dimensions among the first `rank` of `shape`, then merges an outer dimension into
// its inner neighbour whenever every operand (a row of `all`) steps over the inner one exactly once
// per step of the outer one.
std::pair<std::vector<std::int64_t>, std::vector<std::vector<std::int64_t>>> merge_dims(
    const Shape& shape, const std::vector<std::vector<std::int64_t>>& all, std::size_t rank) {
    std::vector<std::int64_t> dims;
    std::vector<std::vector<std::int64_t>> strides(all.size());
    for (std::size_t d = 0; d < rank; ++d) {
        if (shape[d] == 1) continue;
        bool merge = !dims.empty();
        for (std::size_t k = 0; merge && k < all.size(); ++k)
            merge = strides[k].back() == all[k][d] * shape[d];
        if (merge) {
            dims.back() *= shape[d];
            for (std::size_t k = 0; k < all.size(); ++k) strides[k].back() = all[k][d];
        } else {
            dims.push_back(shape[d]);
            for (std::size_t k = 0; k < all.size(); ++k) strides[k].push_back(all[k][d]);
        }
    }
    return {std::move(dims), std::move(strides)};
}

// An operand's strides over the broadcast rank: 0 where it is broadcast (missing or extent 1).
std::vector<std::int64_t> aligned_strides(const OperandShape& op, std::size_t rank) {
    const auto s = strides_of(op);
    std::vector<std::int64_t> aligned(rank, 0);
    const std::size_t lead = rank - op.shape.size();
    for (std::size_t d = 0; d < op.shape.size(); ++d) aligned[lead + d] = op.shape[d] == 1 ? 0 : s[d];
    return aligned;
}

std::string describe(const OperandShape& op) {
    return fmt::format("'{}' [{}]", op.name, fmt::join(op.shape, ", "));
}

}  // namespace

Shape broadcast_shapes(std::span<const OperandShape> inputs) {
    std::size_t rank = 0;
    for (const auto& op : inputs) rank = std::max(rank, op.shape.size());
    Shape result(rank, 1);
    for (std::size_t back = 1; back <= rank; ++back) {
        std::int64_t extent = 1;
        const OperandShape* source = nullptr;
        for (const auto& op : inputs) {
            if (op.shape.size() < back) continue;
            const std::int64_t e = op.shape[op.shape.size() - back];
            if (e < 0) throw UsageError(fmt::format("{} has a negative extent", describe(op)));
            if (e == 1) continue;
            if (extent != 1 && e != extent) {
                throw UsageError(fmt::format(
                    "shapes do not broadcast: {} and {} differ in dimension {} from the end ({} vs {}); "
                    "dimensions are aligned from the last one, and must be equal or 1",
                    describe(*source), describe(op), back, extent, e));
            }
            extent = e;
            source = &op;
        }
        result[rank - back] = extent;
    }
    return result;
}

namespace {

// Two elements of an output at one location would be written by two threads: a race, one of them
// lost. A zero stride is the plain case; a view whose dimensions interleave (strides [2, 3] over
// [3, 2]) is refused too. Sorted by stride, each dimension must step past everything the smaller ones
// reach: a sufficient test (a few exotic views that do not overlap fail it and are refused as well).
void refuse_overlapping_output(const OperandShape& output) {
    if (output.strides.empty()) return;  // contiguous
    const std::vector<std::int64_t> strides = strides_of(output);  // its rank and reach checked first
    std::vector<std::pair<std::int64_t, std::int64_t>> dims;  // (|stride|, extent) of extents above 1
    for (std::size_t d = 0; d < output.shape.size(); ++d) {
        if (output.shape[d] == 0) return;  // no elements
        if (output.shape[d] > 1) dims.emplace_back(std::abs(strides[d]), output.shape[d]);
    }
    std::sort(dims.begin(), dims.end());
    std::int64_t reach = 0;  // the largest offset the smaller dimensions reach
    for (const auto& [stride, extent] : dims) {
        if (stride == 0) throw UsageError("the output has a zero stride: several elements would share one location");
        if (stride <= reach)
            throw UsageError(fmt::format("the output's strides [{}] over its shape [{}] put several elements at one "
                                         "location; give an output whose elements do not overlap (a contiguous one)",
                                         fmt::join(output.strides, ", "), fmt::join(output.shape, ", ")));
        reach += stride * (extent - 1);
    }
}

}  // namespace

Layout plan_layout(std::span<const OperandShape> inputs, const OperandShape* output) {
    Layout layout;
    layout.shape = broadcast_shapes(inputs);
    layout.count = element_count(layout.shape);
    const std::size_t rank = layout.shape.size();

    if (output && output->shape != layout.shape) {
        throw UsageError(fmt::format("the output has shape [{}], but the inputs broadcast to [{}]",
                                     fmt::join(output->shape, ", "), fmt::join(layout.shape, ", ")));
    }

    // Per-operand strides over the full broadcast rank; row k of `all` is operand k, output last.
    std::vector<std::vector<std::int64_t>> all;
    for (const auto& op : inputs) all.push_back(aligned_strides(op, rank));
    if (output) {
        refuse_overlapping_output(*output);
        auto s = strides_of(*output);
        for (std::size_t d = 0; d < rank; ++d)
            if (layout.shape[d] == 1) s[d] = 0;
        all.push_back(std::move(s));
    }

    auto [dims, strides] = merge_dims(layout.shape, all, rank);
    if (dims.empty() || layout.count == 0) {  // a scalar, all-ones or empty shape: one flat dimension
        dims = {layout.count};
        for (auto& s : strides) s = {layout.count == 1 ? 0 : 1};
    }
    if (dims.size() > static_cast<std::size_t>(kMaxRank)) {
        throw UsageError(fmt::format("the operands need {} dimensions after merging, more than the {} "
                                     "lossjit supports; make some of them contiguous",
                                     dims.size(), kMaxRank));
    }

    const auto dense = contiguous_strides(dims);
    auto access = [&](const std::vector<std::int64_t>& s) {
        OperandAccess a;
        std::copy(s.begin(), s.end(), a.strides.begin());
        a.contiguous = layout.count <= 1 || s == dense;
        return a;
    };
    for (std::size_t k = 0; k < inputs.size(); ++k) {
        layout.inputs.push_back(access(strides[k]));
        layout.inputs.back().elements = element_count(inputs[k].shape);
    }
    if (output) layout.output = access(strides.back());
    layout.dims = std::move(dims);
    return layout;
}

int walked_outer_prefix(const OperandAccess& access, std::size_t outer) {
    std::size_t split = 0;
    while (split < outer && access.strides[split] != 0) ++split;
    for (std::size_t d = split; d < outer; ++d)
        if (access.strides[d] != 0) return -1;
    return static_cast<int>(split);
}

Layout walked_dims_first(Layout layout, std::size_t operand) {
    const std::size_t rank = layout.dims.size();
    if (rank < 3 || operand >= layout.inputs.size()) return layout;
    const std::size_t outer = rank - 1;
    // A stable partition of the outer dimensions: those `operand` walks, then those it is broadcast
    // along; the innermost stays last.
    std::vector<std::size_t> order;
    for (int pass = 0; pass < 2; ++pass)
        for (std::size_t d = 0; d < outer; ++d)
            if ((layout.inputs[operand].strides[d] != 0) == (pass == 0)) order.push_back(d);
    order.push_back(outer);
    std::vector<OperandAccess*> operands;
    for (auto& access : layout.inputs) operands.push_back(&access);
    operands.push_back(&layout.output);
    // The reordered extents and strides, merged again as plan_layout merges them.
    Shape shape;
    std::vector<std::vector<std::int64_t>> all(operands.size());
    for (std::size_t d : order) {
        shape.push_back(layout.dims[d]);
        for (std::size_t k = 0; k < operands.size(); ++k) all[k].push_back(operands[k]->strides[d]);
    }
    auto [dims, strides] = merge_dims(shape, all, rank);
    const auto dense = contiguous_strides(dims);
    for (std::size_t k = 0; k < operands.size(); ++k) {
        operands[k]->strides = {};
        std::copy(strides[k].begin(), strides[k].end(), operands[k]->strides.begin());
        operands[k]->contiguous = layout.count <= 1 || strides[k] == dense;
    }
    layout.dims = std::move(dims);
    return layout;
}

namespace {

// An input of exactly the rows' shape ([N, D] for x [N, C, D] along dimension 1: what torch's
// keepdim=False gives, and what a per-row target is in torch) is aligned from the last dimension
// like every input, as [1, N, D]. Where the reduced dimensions are the leading ones that is where
// the rows are (fine); where the row is the last it is the documented NumPy reading ([N, 1] is one
// value per row there); anywhere else the shape reads two ways (it broadcasts only where extents
// coincide, N == C): refused, asking for the one meant.
void refuse_rows_shaped_value(const OperandShape& op, std::span<const OperandShape> values,
                              const std::vector<std::size_t>& reduced, std::size_t rank) {
    if (op.shape.empty() || op.shape.size() >= rank) return;
    bool leading = true, trailing = true;
    for (std::size_t i = 0; i < reduced.size(); ++i) {
        leading = leading && reduced[i] == i;
        trailing = trailing && reduced[reduced.size() - 1 - i] == rank - 1 - i;
    }
    if (leading || trailing) return;
    Shape full(rank, 1);
    for (const auto& v : values) {
        if (v.shape.size() != rank) continue;
        for (std::size_t d = 0; d < rank; ++d) full[d] = std::max(full[d], v.shape[d]);
    }
    Shape rows, keepdim = full;
    for (std::size_t d = 0; d < rank; ++d) {
        if (std::find(reduced.begin(), reduced.end(), d) == reduced.end()) rows.push_back(full[d]);
        else keepdim[d] = 1;
    }
    if (op.shape != rows) return;
    Shape aligned(rank - op.shape.size(), 1);
    aligned.insert(aligned.end(), op.shape.begin(), op.shape.end());
    throw UsageError(fmt::format(
        "'{}' [{}] has the rows' shape; inputs broadcast from the last dimension, so it would be read as [{}], "
        "which is not one value per row: give it the shape meant, [{}] for one value per row, or [{}] for the "
        "last dimensions",
        op.name, fmt::join(op.shape, ", "), fmt::join(aligned, ", "), fmt::join(keepdim, ", "), fmt::join(aligned, ", ")));
}

// `written` (a program's row_dims) as sorted positions in a shape of `rank` dimensions
// (UsageError where one is out of range or two name the same); `shape` (the largest input's) is for
// the message.
std::vector<std::size_t> resolve_row_dims(std::span<const int> written, std::size_t rank, const Shape& shape) {
    // A scalar program's rows are one element long: its only dimension is the row.
    const std::size_t dims = std::max<std::size_t>(rank, 1);
    std::vector<std::size_t> resolved;
    for (int d : written) {
        const long long r = d < 0 ? static_cast<long long>(dims) + d : d;
        if (r < 0 || r >= static_cast<long long>(dims)) {
            throw UsageError(fmt::format("the program reduces along dimension {}, but its inputs have {} dimension{} "
                                         "(the largest: [{}])",
                                         d, rank, rank == 1 ? "" : "s", fmt::join(shape, ", ")));
        }
        if (std::find(resolved.begin(), resolved.end(), static_cast<std::size_t>(r)) != resolved.end()) {
            throw UsageError(fmt::format("the program's dimensions ({}) name dimension {} twice for inputs of {} "
                                         "dimensions (the largest: [{}])",
                                         fmt::join(written, ", "), r, rank, fmt::join(shape, ", ")));
        }
        resolved.push_back(static_cast<std::size_t>(r));
    }
    std::sort(resolved.begin(), resolved.end());
    return resolved;
}

}  // namespace

Layout plan_row_layout(std::span<const OperandShape> inputs, const std::vector<bool>& index, const OperandShape* output,
                       bool output_per_row, std::span<const int> row_dims) {
    const std::vector<int> last_dim{-1};
    if (row_dims.empty()) row_dims = last_dim;
    auto is_index = [&](std::size_t k) { return k < index.size() && index[k]; };
    // The rank. An index holds one value per row: it has the rows' shape ([N, D] for x [N, C, D]
    // along dimension 1), one dimension fewer than the values, or the values' rank with the row's
    // dimension as 1 ([N, 1, D], torch's gather index).
    std::size_t values_rank = 0;
    for (std::size_t k = 0; k < inputs.size(); ++k)
        if (!is_index(k)) values_rank = std::max(values_rank, inputs[k].shape.size());
    // An index of the values' rank is the gather form where its extent along the row (a single
    // dimension: takes go along one) is 1, and gathers K values per row where it is K > 1 (torch's
    // gather index [N, K] against x [N, C]); then the other inputs of extent K there (q [N, K]) hold K
    // values per row too, and those of neither 1 nor K are the row's.
    const int single = row_dims.size() == 1 ? row_dims.front() : 0;
    const long long gather_at = single < 0 ? static_cast<long long>(values_rank) + single : single;
    const bool gathers = values_rank >= 2 && gather_at >= 0 && gather_at < static_cast<long long>(values_rank);
    // An operand's extent along the row's dimension, its shape aligned with the values' from the end.
    auto extent_at_row = [&](const Shape& shape) -> std::int64_t {
        const long long d = gather_at - static_cast<long long>(values_rank) + static_cast<long long>(shape.size());
        return d >= 0 && d < static_cast<long long>(shape.size()) ? shape[static_cast<std::size_t>(d)] : 1;
    };
    std::vector<bool> gather_form(inputs.size(), false), per_k(inputs.size(), false);
    std::int64_t k_columns = 0;
    for (std::size_t k = 0; k < inputs.size() && gathers; ++k) {
        if (!is_index(k) || inputs[k].shape.size() != values_rank) continue;
        gather_form[k] = true;
        const std::int64_t extent = inputs[k].shape[static_cast<std::size_t>(gather_at)];
        if (extent == 1) continue;
        if (k_columns != 0 && extent != k_columns)
            throw UsageError(fmt::format(
                "the indices gather {} and {} values per row ('{}' [{}]): the takes of one program gather one count",
                k_columns, extent, inputs[k].name, fmt::join(inputs[k].shape, ", ")));
        k_columns = extent;
        per_k[k] = true;
    }
    if (k_columns != 0) {
        bool row_values = false;
        std::vector<OperandShape> all_values;
        for (std::size_t k = 0; k < inputs.size(); ++k) {
            if (is_index(k)) continue;
            all_values.push_back(inputs[k]);
            const std::int64_t extent = extent_at_row(inputs[k].shape);
            per_k[k] = extent == k_columns;
            row_values = row_values || (extent != 1 && extent != k_columns);
        }
        if (!row_values) {
            std::size_t k = 0;
            while (!(is_index(k) && per_k[k])) ++k;  // the first index of K per row: there is one
            const bool same = inputs[k].shape == broadcast_shapes(all_values);
            throw UsageError(fmt::format(
                "the index '{}' [{}] {}; an index has the rows' shape (the values' without the row's dimension {}), or "
                "that with the row's dimension as 1, as torch's gather index, or as K: K indices per row, whose "
                "extent K must differ from the row's length (lossjit tells the K gathered values from the row's by it)",
                inputs[k].name, fmt::join(inputs[k].shape, ", "),
                same ? "has the values' shape" : fmt::format("has extent {} along the row's dimension, as every value "
                                                             "that is not 1 there", k_columns),
                gather_at));
        }
    }
    std::vector<OperandShape> values;  // for messages: what the row dimensions count in
    for (std::size_t k = 0; k < inputs.size(); ++k)
        if (!is_index(k) && !per_k[k]) values.push_back(inputs[k]);
    // The values' shape for messages, without broadcasting them yet (refuse_rows_shaped_value
    // explains a mismatch better than broadcasting would).
    Shape largest;
    for (const auto& v : values)
        if (v.shape.size() > largest.size()) largest = v.shape;
    std::size_t rank = values_rank;
    for (std::size_t k = 0; k < inputs.size(); ++k)
        if (is_index(k)) rank = std::max(rank, inputs[k].shape.size() + (gather_form[k] ? 0 : 1));
    const auto reduced = resolve_row_dims(row_dims, rank, largest);
    const std::size_t after = std::max<std::size_t>(rank, 1) - 1 - reduced.back();  // dimensions after the row's
    std::vector<OperandShape> operands(inputs.begin(), inputs.end());
    std::vector<std::int64_t> k_strides(inputs.size(), 0);
    for (std::size_t k = 0; k < operands.size(); ++k) {
        auto& op = operands[k];
        if (per_k[k]) {
            // Walked as one value per row (extent 1 along it); its K values k_stride apart.
            const auto d = static_cast<std::size_t>(gather_at - static_cast<long long>(values_rank) +
                                                    static_cast<long long>(op.shape.size()));
            op.strides = strides_of(op);
            k_strides[k] = op.strides[d];
            op.shape[d] = 1;
            op.strides[d] = 0;
            continue;
        }
        if (!is_index(k)) {
            refuse_rows_shaped_value(op, values, reduced, rank);
            continue;
        }
        if (gather_form[k]) continue;
        // The rows' shape: an extent-1 dimension inserted where the row is (y [N, D] as [N, 1, D]).
        if (op.shape.size() < after) continue;  // broadcast along the row anyway
        const auto at = static_cast<std::ptrdiff_t>(op.shape.size() - after);
        op.shape.insert(op.shape.begin() + at, 1);
        if (!op.strides.empty()) op.strides.insert(op.strides.begin() + at, 0);
    }
    Layout layout;
    layout.by_rows = true;
    layout.shape = broadcast_shapes(operands);
    layout.count = element_count(layout.shape);
    layout.row_dims = reduced;
    Shape full = layout.shape;  // at least one dimension: a scalar program's rows are one element
    if (full.empty()) full.push_back(1);
    const std::size_t full_rank = full.size();
    auto is_reduced = [&](std::size_t d) { return std::find(reduced.begin(), reduced.end(), d) != reduced.end(); };
    // The walk's order: the kept dimensions (they enumerate the rows), then the reduced ones (a row).
    std::vector<std::size_t> order;
    for (std::size_t d = 0; d < full_rank; ++d)
        if (!is_reduced(d)) order.push_back(d);
    const std::size_t kept = order.size();
    for (std::size_t d : reduced) order.push_back(d);
    Shape ordered;
    std::int64_t columns = 1;
    for (std::size_t i = 0; i < full_rank; ++i) {
        ordered.push_back(full[order[i]]);
        if (i >= kept) columns *= full[order[i]];
    }
    const Shape row_shape = rows_shape(layout);

    std::vector<std::vector<std::int64_t>> all;
    for (const auto& op : operands) all.push_back(aligned_strides(op, full_rank));
    if (output) {
        // Per row: the rows' shape (torch's keepdim=False), or with the reduced dimensions kept as 1;
        // else the full shape.
        const Shape keepdim = keepdim_shape(layout);
        const bool fits = output_per_row ? output->shape == row_shape || output->shape == keepdim
                                         : output->shape == layout.shape;
        if (!fits) {
            throw UsageError(fmt::format(
                "the output has shape [{}], but the program gives {} [{}]", fmt::join(output->shape, ", "),
                output_per_row ? "one value per row:" : "one value per element:",
                fmt::join(output_per_row ? row_shape : layout.shape, ", ")));
        }
        refuse_overlapping_output(*output);  // after the shape: a wrong shape is the plainer mistake
        OperandShape out = *output;
        if (output_per_row && out.shape == row_shape && !layout.shape.empty()) {
            out.strides = keepdim_strides(layout, strides_of(out));
            out.shape = keepdim;
        }
        if (out.shape.size() < full_rank) out.shape.insert(out.shape.begin(), full_rank - out.shape.size(), 1);
        if (!out.strides.empty() && out.strides.size() < full_rank) out.strides.insert(out.strides.begin(), full_rank - out.strides.size(), 0);
        all.push_back(aligned_strides(out, full_rank));
    }
    // Every operand's strides in the walk's order.
    for (auto& strides : all) {
        std::vector<std::int64_t> reordered;
        for (std::size_t d : order) reordered.push_back(strides[d]);
        strides = std::move(reordered);
    }

    auto [dims, strides] = merge_dims(ordered, all, kept);
    if (dims.empty()) {  // one row
        dims.push_back(1);
        for (auto& s : strides) s.push_back(0);
    }
    // The row: the reduced dimensions, which must merge into one run for every operand, or two.
    std::vector<std::vector<std::int64_t>> row_strides;
    for (const auto& s : all) row_strides.emplace_back(s.begin() + static_cast<std::ptrdiff_t>(kept), s.end());
    const Shape row_extents(ordered.begin() + static_cast<std::ptrdiff_t>(kept), ordered.end());
    auto [row_dims_merged, row_walk] = merge_dims(row_extents, row_strides, row_extents.size());
    // Two runs: segments of the inner one's extent, each operand's outer stride apart (Layout::row_inner).
    const bool room = dims.size() + 1 < static_cast<std::size_t>(kMaxRank) && columns < (std::int64_t{1} << 31);
    if (row_dims_merged.size() == 2 && room) {
        layout.row_inner = row_dims_merged[1];
        for (auto& walk : row_walk) walk = {walk[1], walk[0]};  // the inner stride first, as for one run
    } else if (row_dims_merged.size() == 2) {
        throw UnsupportedError(fmt::format(
            "the program reduces along dimensions ({}) of [{}], which its operands walk in two runs of memory; a row of "
            "two runs needs fewer than 2^31 elements and a dimension to spare (these have {} elements and {} "
            "dimensions after merging): make the inputs contiguous, or reduce along adjacent dimensions",
            fmt::join(reduced, ", "), fmt::join(layout.shape, ", "), columns, dims.size() + 1));
    } else if (row_dims_merged.size() > 2) {
        // Name the first operand whose own walk along the row takes more than two runs.
        std::string which = "its operands together";
        for (std::size_t k = 0; k < operands.size(); ++k) {
            const std::vector<std::vector<std::int64_t>> one{row_strides[k]};
            if (merge_dims(row_extents, one, row_extents.size()).first.size() > 2) {
                which = fmt::format("'{}' [{}]", operands[k].name, fmt::join(operands[k].shape, ", "));
                break;
            }
        }
        throw UnsupportedError(fmt::format(
            "the program reduces along dimensions ({}) of [{}], but {} does not lie in memory as one or two runs along "
            "them (a row is walked in at most two strides: (0, 2, 3) of a contiguous tensor is two; an input broadcast "
            "along the middle of such a row, or (0, 2, 4), three); make it contiguous, of the full rank, or reduce along "
            "adjacent dimensions",
            fmt::join(reduced, ", "), fmt::join(layout.shape, ", "), which));
    }
    dims.push_back(columns);
    for (std::size_t k = 0; k < all.size(); ++k)
        strides[k].push_back(columns == 1 || row_dims_merged.empty() ? 0 : row_walk[k][0]);
    std::vector<std::int64_t> outer_strides(all.size(), 0);
    if (layout.row_inner > 0)
        for (std::size_t k = 0; k < all.size(); ++k) outer_strides[k] = row_walk[k][1];
    if (dims.size() > static_cast<std::size_t>(kMaxRank)) {
        throw UsageError(fmt::format("the operands need {} dimensions after merging, more than the {} "
                                     "lossjit supports; make some of them contiguous",
                                     dims.size(), kMaxRank));
    }
    layout.rows = element_count(row_shape);
    const auto dense = contiguous_strides(dims);
    auto access = [&](const std::vector<std::int64_t>& s) {
        OperandAccess a;
        std::copy(s.begin(), s.end(), a.strides.begin());
        a.contiguous = s == dense;
        return a;
    };
    for (std::size_t k = 0; k < inputs.size(); ++k) {
        layout.inputs.push_back(access(strides[k]));
        layout.inputs.back().row_outer_stride = outer_strides[k];
        layout.inputs.back().contiguous = layout.inputs.back().contiguous && layout.row_inner == 0;
        // By shape, not by stride: a view expanded along the row (stride 0) still has C values.
        const auto& shape = operands[k].shape;
        bool per_row = true;
        for (std::size_t d : reduced) {
            const std::size_t from_end = full_rank - d;
            if (from_end <= shape.size() && shape[shape.size() - from_end] != 1) per_row = false;
        }
        layout.inputs.back().per_row = (columns == 1 || per_row) && !per_k[k];
        layout.inputs.back().per_k = per_k[k];
        layout.inputs.back().k_stride = k_strides[k];
        layout.inputs.back().elements = element_count(inputs[k].shape);
    }
    layout.k_columns = k_columns;
    if (output) {
        layout.output = access(strides.back());
        layout.output.row_outer_stride = outer_strides.back();
        layout.output.contiguous = layout.output.contiguous && layout.row_inner == 0;
    }
    layout.dims = std::move(dims);
    return layout;
}

GradientLayout plan_gradient_layout(std::span<const OperandShape> inputs, const OperandShape* upstream) {
    GradientLayout result;
    std::vector<OperandShape> read(inputs.begin(), inputs.end());
    if (upstream) {
        const Shape shape = broadcast_shapes(inputs);
        if (upstream->shape != shape) {
            throw UsageError(fmt::format("the upstream gradient has shape [{}], but the output's shape is [{}]",
                                         fmt::join(upstream->shape, ", "), fmt::join(shape, ", ")));
        }
        read.push_back(*upstream);
    }
    result.read = plan_layout(read, nullptr);
    std::vector<OperandShape> write;
    for (const auto& op : inputs) {
        write.push_back({op.name, op.shape, {}});
        result.sizes.push_back(element_count(op.shape));
    }
    result.write = plan_layout(write, nullptr);
    return result;
}

namespace {

// A dimension counted from the front means the same for every reduction only where each reduces
// an argument of the program's full rank: torch would count `sum(w, 0)` of a w [C] beside x [N, C]
// in w's own dimensions (C), lossjit in the broadcast shape's (N). Refused rather than guessed;
// dimensions from the end mean the same in both.
void refuse_ambiguous_dims(const ir::Program& program, std::span<const OperandShape> inputs, const Layout& layout) {
    if (!program.derivatives.empty() || std::none_of(program.row_dims.begin(), program.row_dims.end(), [](int d) { return d >= 0; }))
        return;
    const auto index = program.index_inputs();
    std::vector<long long> rank(program.nodes.size(), -1);  // of each node's value, by its inputs (-1: none)
    for (std::size_t id = 0; id < program.nodes.size(); ++id) {
        const ir::Node& n = program.nodes[id];
        if (n.kind == ir::NodeKind::Input) {
            const auto slot = static_cast<std::size_t>(n.slot);
            if (slot < inputs.size()) rank[id] = static_cast<long long>(inputs[slot].shape.size()) + (index[slot] ? 1 : 0);
        } else if (n.kind == ir::NodeKind::Binding) {
            rank[id] = rank[static_cast<std::size_t>(program.bindings[static_cast<std::size_t>(n.slot)].node)];
        } else if (n.kind != ir::NodeKind::Total) {
            for (int a = 0; a < n.arity; ++a) rank[id] = std::max(rank[id], rank[static_cast<std::size_t>(n.args[static_cast<std::size_t>(a)])]);
        }
        if (n.kind != ir::NodeKind::RowReduce) continue;
        const long long own = rank[static_cast<std::size_t>(n.args[0])];  // a scalar input's 0 too: torch keeps it
        if (own >= 0 && own < static_cast<long long>(layout.shape.size())) {
            throw UsageError(fmt::format(
                "{}:{}:{}: '{}' reduces along dimension{} ({}) counted from the front, but its argument has {} "
                "dimension{} where the inputs broadcast to [{}]: which dimension is meant depends on the count "
                "(torch counts the argument's own); write the dimensions from the end (negative), or give the "
                "inputs the same rank",
                program.source_name, n.pos.line, n.pos.column, row_reduction_info(static_cast<RowReduction>(n.slot)).name,
                program.row_dims.size() == 1 ? "" : "s", fmt::join(program.row_dims, ", "), own, own == 1 ? "" : "s",
                fmt::join(layout.shape, ", ")));
        }
    }
}

// x[y] of a value that is constant along the row because an input is (class weights `w` [C] aligned
// with another dimension than the row's, a per-row weight, a scalar) is that value whatever y says:
// never what is meant. Refused, naming the input.
void refuse_takes_of_broadcasts(const ir::Program& program, const Layout& layout) {
    if (layout.dims.back() <= 1) return;  // rows of one element: nothing is broadcast along them
    if (std::none_of(program.nodes.begin(), program.nodes.end(), [](const ir::Node& n) { return n.kind == ir::NodeKind::Take; }))
        return;
    const auto per_row = per_row_nodes(program, per_row_inputs(program, layout));
    const auto index = program.index_inputs();
    for (const auto& take : program.nodes) {
        if (take.kind != ir::NodeKind::Take || !per_row[static_cast<std::size_t>(take.args[0])]) continue;
        std::vector<int> stack{take.args[0]};
        while (!stack.empty()) {
            const ir::Node& n = program.node(stack.back());
            stack.pop_back();
            if (n.kind == ir::NodeKind::RowReduce || n.kind == ir::NodeKind::Take || n.kind == ir::NodeKind::Total) continue;
            if (n.kind == ir::NodeKind::Binding) stack.push_back(program.bindings[static_cast<std::size_t>(n.slot)].node);
            for (int a = 0; a < n.arity; ++a) stack.push_back(n.args[static_cast<std::size_t>(a)]);
            if (n.kind != ir::NodeKind::Input || index[static_cast<std::size_t>(n.slot)]) continue;
            const auto d = layout.row_dims.empty() ? 0 : layout.row_dims.front();
            throw UsageError(fmt::format(
                "{}:{}:{}: x[y] takes along dimension {}, but '{}' has extent 1 there (it broadcasts from the last "
                "dimension): it would give the same value whatever y is; give it the row's extent there (class "
                "weights along dimension 1 of [N, C, D] as [C, 1])",
                program.source_name, take.pos.line, take.pos.column, d, program.inputs[static_cast<std::size_t>(n.slot)]));
        }
    }
}

// Values of K per row (x[k], k [N, K]; q [N, K]) live beside the row, not along it: they may meet
// values per row and each other, a row reduction brings them back to one per row (sum(q * x[k], -1)),
// and a whole-tensor reduction reduces them as the [N, K] they are. Whatever would need them along
// the row's C columns is refused at the construct that does it, not guessed.
void refuse_misplaced_k_values(const ir::Program& program, const Layout& layout) {
    if (layout.k_columns == 0) return;
    const auto k_level = k_level_nodes(program, k_inputs(layout));
    const auto per_row = per_row_nodes(program, per_row_inputs(program, layout));
    auto is_k = [&](int id) { return static_cast<bool>(k_level[static_cast<std::size_t>(id)]); };
    auto is_element = [&](int id) { return !k_level[static_cast<std::size_t>(id)] && !per_row[static_cast<std::size_t>(id)]; };
    auto fail = [&](const ir::Node& n, const std::string& what) {
        throw UsageError(fmt::format("{}:{}:{}: {}", program.source_name, n.pos.line, n.pos.column, what));
    };
    constexpr const char* kReduceFirst = "reduce them along the row first (sum(q * x[k], -1))";
    const std::string values = fmt::format("values of K per row (x[k] with k of extent K = {} along the row, or an "
                                           "input of that extent)", layout.k_columns);
    std::vector<int> roots{program.body};
    for (const auto& b : program.bindings) roots.push_back(b.node);
    const auto reached = reached_nodes(program, roots);
    for (std::size_t id = 0; id < program.nodes.size(); ++id) {
        if (!reached[id]) continue;
        const ir::Node& n = program.nodes[id];
        switch (n.kind) {
            case ir::NodeKind::Apply: {
                bool k = false, element = false;
                for (int a = 0; a < n.arity; ++a) {
                    k = k || is_k(n.args[static_cast<std::size_t>(a)]);
                    element = element || is_element(n.args[static_cast<std::size_t>(a)]);
                }
                if (k && element)
                    fail(n, fmt::format("'{}' combines {} with the row's {} elements: {}",
                                        builtin_info(n.fn).is_operator() ? builtin_info(n.fn).op : builtin_info(n.fn).name,
                                        values, layout.dims.back(), kReduceFirst));
                break;
            }
            case ir::NodeKind::Take:
                if (is_k(n.args[0]))
                    fail(n, fmt::format("x[y] takes from {}: take from the row's values (x of the row's length)", values));
                break;
            case ir::NodeKind::RowReduce:
                if (is_k(n.args[0]) && static_cast<RowReduction>(n.slot) == RowReduction::Mean)
                    fail(n, fmt::format("mean, var and std of {} are not supported (their derivatives count the row's "
                                        "length, not K): sum(e, -1) / K, with K a parameter", values));
                break;
            default: break;
        }
    }
    if (program.is_map())
        for (int r : program.result_nodes())
            if (is_k(r))
                fail(program.node(r), fmt::format("a map of {} (an output [.., K]) is not supported: {}", values,
                                                  kReduceFirst));
}

}  // namespace

Layout plan_program_layout(const ir::Program& program, std::span<const OperandShape> inputs, const OperandShape* output) {
    if (!program.by_rows()) {
        Layout layout = plan_layout(inputs, output);
        // A gradient summed over a broadcast needs the dimensions its input walks outermost
        // (the kinds' choose): reorder for the first input that does not have them so.
        for (const auto& d : program.derivatives) {
            const auto& access = layout.inputs[static_cast<std::size_t>(d.input)];
            if (access.elements < layout.count && walked_outer_prefix(access, layout.dims.size() - 1) < 0)
                return walked_dims_first(std::move(layout), static_cast<std::size_t>(d.input));
        }
        return layout;
    }
    const auto index = program.index_inputs();
    Layout layout = plan_row_layout(inputs, index, nullptr, false, program.row_dims);
    refuse_ambiguous_dims(program, inputs, layout);
    refuse_takes_of_broadcasts(program, layout);
    refuse_misplaced_k_values(program, layout);
    if (!output) return layout;
    const bool per_row = program.is_map() && per_row_nodes(program, per_row_inputs(program, layout))[static_cast<std::size_t>(program.body)];
    if (!program.is_map() || program.results.empty()) return plan_row_layout(inputs, index, output, per_row, program.row_dims);
    // Several results of one value per row: the output is [R, rows...], result r at r times the
    // stride of its first dimension. Each result's rows are laid out as one output's would be, and
    // the row dimension, which a per-row output never walks, steps from result to result.
    const auto count = static_cast<std::int64_t>(program.result_count());
    const std::vector<std::int64_t> strides = strides_of(*output);
    if (output->shape.empty() || output->shape[0] != count)
        throw UsageError(fmt::format("the output has shape [{}], but the program's {} results of one value per row need "
                                     "[{}, ...] (result, then the rows)",
                                     fmt::join(output->shape, ", "), count, count));
    refuse_overlapping_output(*output);  // the results' stride too, against the rows'
    const OperandShape one{output->name, Shape(output->shape.begin() + 1, output->shape.end()),
                           std::vector<std::int64_t>(strides.begin() + 1, strides.end())};
    Layout results = plan_row_layout(inputs, index, &one, true, program.row_dims);
    results.output.strides[results.dims.size() - 1] = strides[0];
    results.output.contiguous = false;
    results.output.elements = element_count(output->shape);
    return results;
}

GradientLayout plan_row_gradient_layout(const ir::Program& program, std::span<const OperandShape> inputs) {
    if (!program.by_rows()) throw InternalError("plan_row_gradient_layout for a program that does not reduce along rows");
    std::vector<OperandShape> operands(inputs.begin(), inputs.end());
    std::vector<bool> index = program.index_inputs();
    index.resize(inputs.size(), false);
    GradientLayout result;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
        operands.push_back({inputs[k].name, index[k] ? Shape{} : inputs[k].shape, {}});
        result.sizes.push_back(element_count(inputs[k].shape));
    }
    index.resize(operands.size(), false);
    result.read = plan_row_layout(operands, index, nullptr, false, program.row_dims);
    return result;
}

Shape rows_shape(const Layout& layout) {
    Shape rows;
    for (std::size_t d = 0; d < layout.shape.size(); ++d)
        if (std::find(layout.row_dims.begin(), layout.row_dims.end(), d) == layout.row_dims.end()) rows.push_back(layout.shape[d]);
    return rows;
}

Shape keepdim_shape(const Layout& layout) {
    Shape shape = layout.shape;
    for (std::size_t d : layout.row_dims)
        if (d < shape.size()) shape[d] = 1;
    return shape;
}

std::vector<std::int64_t> keepdim_strides(const Layout& layout, std::span<const std::int64_t> rows_strides) {
    std::vector<std::int64_t> strides;
    std::size_t next = 0;
    for (std::size_t d = 0; d < layout.shape.size(); ++d) {
        const bool row = std::find(layout.row_dims.begin(), layout.row_dims.end(), d) != layout.row_dims.end();
        strides.push_back(row ? 0 : rows_strides[next++]);
    }
    return strides;
}

Shape program_output_shape(const ir::Program& program, std::span<const OperandShape> inputs) {
    if (!program.by_rows()) return broadcast_shapes(inputs);
    return program_output_shape(program, plan_program_layout(program, inputs, nullptr));
}

Shape program_output_shape(const ir::Program& program, const Layout& layout) {
    if (!program.by_rows()) return layout.shape;
    if (!per_row_nodes(program, per_row_inputs(program, layout))[static_cast<std::size_t>(program.body)]) return layout.shape;
    Shape rows = rows_shape(layout);
    if (program.is_map() && !program.results.empty())  // several results: [R, rows...]
        rows.insert(rows.begin(), static_cast<std::int64_t>(program.result_count()));
    return rows;
}

}  // namespace lossjit
