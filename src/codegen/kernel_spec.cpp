// kernel_spec: what a compiled kernel is specialised on (kernel_spec.hpp): its signature, its
// blocks, and the occupancy arithmetic the kinds' grids share. The choice itself is the kinds'
// (kinds/).
#include "codegen/kernel_spec.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "ir/print.hpp"  // has_common_path
#include "lang/builtins.hpp"
#include "lossjit/errors.hpp"

namespace lossjit {

int summed_batch_dims(const ir::Program& program, const KernelSpec& spec, const Layout& layout) {
    for (std::size_t g = 0; g < spec.summed.size(); ++g)
        if (spec.summed[g] == KernelSpec::OverRows || spec.summed[g] == KernelSpec::AlongRows)
            return std::max(0, walked_outer_prefix(layout.inputs[static_cast<std::size_t>(program.derivatives[g].input)],
                                                   layout.dims.size() - 1));
    return 0;
}

int preferred_vector_width(std::size_t widest_element_bytes) {
    return widest_element_bytes > 0 && widest_element_bytes <= 2 ? 8 : 4;
}

KernelOperands KernelOperands::unplaced(const ir::Program& program, DType dtype) {
    KernelOperands operands;
    // A map's backward reads its upstream gradient after the inputs.
    const std::size_t inputs = program.inputs.size() + (program.is_map() && !program.derivatives.empty() ? 1 : 0);
    operands.input_data.assign(inputs, nullptr);
    operands.input_dtypes.assign(inputs, dtype);
    const DType written = is_floating(dtype) ? dtype : DType::float32;
    operands.result_dtype = written;
    operands.grad_dtypes.assign(program.derivatives.size(), written);
    return operands;
}

long long KernelSpec::blocks(const KernelSpec& spec, const Layout& layout) {
    if (spec.loop == Loop::ByRow) {
        const long long teams = spec.block_threads / spec.team;
        return std::max<long long>(1, (layout.rows + teams - 1) / teams) * spec.row_cluster;
    }
    if (spec.loop == Loop::Strided) return std::max<long long>(1, (layout.count + spec.block_threads - 1) / spec.block_threads);
    const long long inner = layout.dims.back();
    const long long tile = static_cast<long long>(spec.block_threads) * spec.unroll * spec.vector_width;
    return inner == 0 ? 1 : (layout.count / inner) * ((inner + tile - 1) / tile);
}

int KernelSpec::register_bound() const {
    if (min_blocks_per_sm <= 1) return kMaxRegisters;
    return static_cast<int>(std::min<long long>(kMaxRegisters, kRegistersPerSm / (static_cast<long long>(min_blocks_per_sm) * block_threads)));
}

std::string KernelSpec::signature() const {
    // Knobs at their defaults add nothing: a float64 kernel's source (and key) is what it always was.
    std::string knobs;
    if (accumulator == Accumulator::Float32) knobs += ", float32 accumulator";
    if (accumulator == Accumulator::CompensatedFloat32) knobs += ", compensated float32 accumulator";
    if (fast_math) knobs += ", fast math";
    if (tuned) knobs += ", tuned";
    if (min_blocks_per_sm > 1) knobs += fmt::format(", registers for {} blocks per SM", min_blocks_per_sm);
    if (one_block) knobs += ", one block";
    // Not the columns kept: the source reads them from the launch, one source for every row length.
    if (row_cache_columns > 0) knobs += fmt::format(", row cache of {} input{}", row_cache_inputs, row_cache_inputs == 1 ? "" : "s");
    if (row_cluster > 1) knobs += fmt::format(", clusters of {} blocks a row", row_cluster);
    if (row_prefetch) knobs += row_walk_ahead ? ", next row walked ahead" : ", next row prefetched";
    if (row_split) knobs += ", rows of two strides";
    if (row_shift) knobs += ", vectors from each row's first aligned column";
    // Types other than float32 name themselves: an all-float32 kernel's signature is what it was.
    auto named = [](std::span<const DType> dtypes) {
        std::vector<std::string_view> names;
        for (DType d : dtypes) names.push_back(short_name(d));
        return fmt::format("{}", fmt::join(names, " "));
    };
    bool typed = compute != DType::float32 || result_dtype != DType::float32;
    for (DType d : input_dtypes) typed = typed || d != DType::float32;
    for (DType d : grad_dtypes) typed = typed || d != DType::float32;
    if (typed) {
        knobs += fmt::format(", inputs [{}] -> {}", named(input_dtypes), short_name(result_dtype));
        if (!grad_dtypes.empty()) knobs += fmt::format(", gradients [{}]", named(grad_dtypes));
        if (compute == DType::float64) knobs += ", float64 arithmetic";
    }
    if (loop == Loop::Strided) return fmt::format("strided, rank {}, {} threads/block{}", rank, block_threads, knobs);
    if (loop == Loop::ByRow) {
        // 1: once per row, 2: scattered (RowGradient's values).
        std::vector<int> flags;
        for (RowGradient g : row_gradients) flags.push_back(static_cast<int>(g));
        const bool per_row = std::any_of(flags.begin(), flags.end(), [](int f) { return f != 0; });
        const std::string once = per_row ? fmt::format(", gradients per row [{}]", fmt::join(flags, " ")) : "";
        return fmt::format("by row, rank {}, {} threads per row{}, inner strides [{}]{}, vector {}, unroll {}, {} threads/block{}",
                           rank, team, side_by_side ? fmt::format(" ({} rows side by side)", block_threads / team) : std::string(),
                           fmt::join(inner_strides, " "), once, vector_width, unroll, block_threads, knobs);
    }
    const std::string same_text =
        same_every_row.empty() ? "" : fmt::format(", same every row [{}]", fmt::join(same_every_row, " "));
    if (loop == Loop::Columns)
        return fmt::format("columns, rank {}, inner strides [{}]{}, summed [{}], vector {}, unroll {}, {} threads/block{}",
                           rank, fmt::join(inner_strides, " "), same_text, fmt::join(summed, " "), vector_width, unroll,
                           block_threads, knobs);
    const std::string sums_text = summed.empty() ? "" : fmt::format(", summed [{}]", fmt::join(summed, " "));
    return fmt::format("rows, rank {}, inner strides [{}]{}{}, vector {}, unroll {}, {} threads/block{}", rank,
                       fmt::join(inner_strides, " "), same_text, sums_text, vector_width, unroll, block_threads, knobs);
}

bool KernelSpec::common_path(const ir::Program& program) const {
    return loop == Loop::Rows && compute == DType::float32 && !fast_math && program.derivatives.empty() &&
           has_common_path(program);
}

std::size_t KernelSpec::dynamic_shared_bytes() const {
    if (row_cache_columns <= 0) return 0;
    const long long teams = block_threads / team;  // rows side by side: a block's rows
    return static_cast<std::size_t>(row_cache_columns) * static_cast<std::size_t>(row_cache_inputs) * size_of(compute) *
           static_cast<std::size_t>(teams);
}

bool KernelSpec::sums() const {
    return std::any_of(summed.begin(), summed.end(), [](int s) { return s != NotSummed; });
}

bool KernelSpec::scatters() const {
    return std::find(row_gradients.begin(), row_gradients.end(), RowGradient::Scattered) != row_gradients.end();
}

int Occupancy::per_sm() const {
    return max_blocks_per_sm > 0 ? std::min(fits_per_sm, max_blocks_per_sm) : fits_per_sm;
}

long long Occupancy::resident_blocks() const {
    return std::max(1, multiprocessors * std::min(std::max(per_sm(), 1), kMaxBlocksPerSm));
}

int Occupancy::blocks_per_sm(unsigned grid) const {
    const int sms = std::max(1, multiprocessors);
    return static_cast<int>(std::min<long long>(per_sm(), (static_cast<long long>(grid) + sms - 1) / sms));
}

double Occupancy::fraction(unsigned grid, int block_threads, int max_threads_per_sm) const {
    if (max_threads_per_sm <= 0) return 0;
    return static_cast<double>(blocks_per_sm(grid)) * block_threads / max_threads_per_sm;
}

}  // namespace lossjit
