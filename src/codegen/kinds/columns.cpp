// columns: the kind for fused gradients summed over rows (kinds.hpp): an input of one row broadcast
// over all others, whose gradient each block sums over a chunk of rows for a strip of columns
// (templates/columns.cuh). Its element and source are elementwise's; this file holds what differs:
// the threads, rows and registers it asks for, and its grid of chunks and strips.
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "codegen/kinds/kinds.hpp"
#include "lossjit/errors.hpp"

namespace lossjit::kinds {

void choose_columns(KernelSpec& spec, const ir::Program& program, const Layout& layout, const Knobs& knobs,
                    const GpuFacts& gpu) {
    const std::size_t inner = layout.dims.size() - 1;
    // A small gradient program (one that gets 1024 threads elsewhere): fewer threads, each walking
    // more rows at once (also where that many threads are asked for); 1024 threads walking 4 rows
    // spill on an H100 (5.67 ms against 3.04).
    const bool small = small_gradient_program(program, gpu);
    const int small_threads = default_value(Default::ColumnsSmallGradientThreads, gpu);
    if (small && knobs.block_threads == 0) spec.block_threads = small_threads;
    const bool more_rows = small && spec.block_threads == small_threads;
    // Each thread takes vector_width columns of a strip; narrow rows would leave most of a large
    // block idle, so the block shrinks to the columns there are (in warps, at least 64).
    const long long lanes = (layout.dims[inner] + spec.vector_width - 1) / spec.vector_width;
    int threads = spec.block_threads;
    while (threads > 64 && (threads / 2) % kWarpThreads == 0 && threads / 2 >= lanes) threads /= 2;
    if (threads != spec.block_threads) {
        spec.notes.push_back(fmt::format("{} threads per block for {} columns of {} ({} per thread)", threads,
                                         layout.dims[inner], spec.block_threads, spec.vector_width));
        spec.block_threads = threads;
    }
    if (knobs.unroll == 0 && knobs.items_per_thread == 0 && more_rows && transcendental_calls(program) < 2 &&
        !sixteen_bit_inputs(spec))
        spec.unroll = default_value(Default::ColumnsSmallUnroll, gpu);
    // A small float32 program: registers for more threads per SM, so more loads are in flight. Other
    // types spill under that cap and keep their registers.
    const auto float32 = [](DType d) { return d == DType::float32; };
    const bool all_float32 = spec.compute == DType::float32 &&
                             std::all_of(spec.input_dtypes.begin(), spec.input_dtypes.end(), float32) &&
                             std::all_of(spec.grad_dtypes.begin(), spec.grad_dtypes.end(), float32);
    if (small && all_float32)
        spec.min_blocks_per_sm = std::max(1, default_value(Default::ColumnsSmallThreadsPerSm, gpu) / spec.block_threads);
}

LaunchGrid columns_grid(const ir::Program& program, const KernelSpec& spec, const Layout& layout,
                        const Occupancy& occupancy) {
    if (spec.loop != KernelSpec::Loop::Columns) throw InternalError("columns_grid for another loop");
    const long long resident = occupancy.resident_blocks();
    LaunchGrid grid;
    // Chunks of rows times column strips, taken in turn by a resident grid. The chunk count is
    // the one (from enough items for every block to eight times that) whose busiest block walks
    // the fewest rows, the fewer chunks on a tie (partial sums: chunks x columns doubles). Enough
    // items alone left 8 of 264 blocks idle: hinge [32768, 32768], 16 strips, 16 chunks.
    // The rows come in batches where the summed input holds one row per batch ([N, 1, C] against
    // [N, M, C]: N batches of M rows); chunks never straddle two batches.
    const long long inner = layout.dims.back();
    const long long rows = layout.count / inner;
    long long batches = 1;
    const int batch_dims = summed_batch_dims(program, spec, layout);
    for (int d = 0; d < batch_dims; ++d) batches *= layout.dims[static_cast<std::size_t>(d)];
    const long long batch_rows = batches > 0 ? rows / batches : 0;
    const long long strip = static_cast<long long>(spec.block_threads) * spec.vector_width;
    const long long strips = (inner + strip - 1) / strip;
    const long long strip_blocks = std::max(1LL, std::min(strips, resident));
    const long long fill = std::max(1LL, (resident + strip_blocks * std::max(1LL, batches) - 1) /
                                             (strip_blocks * std::max(1LL, batches)));  // chunks per batch
    long long per_batch = fill, busiest = std::numeric_limits<long long>::max();
    for (long long p = fill; p <= 8 * fill && p <= std::max(1LL, batch_rows); ++p) {
        const long long items = p * strip_blocks * std::max(1LL, batches);
        const long long rows_of_busiest = (items + resident - 1) / resident * ((batch_rows + p - 1) / p);
        if (rows_of_busiest < busiest) {
            busiest = rows_of_busiest;
            per_batch = p;
        }
    }
    const long long chunk_rows = std::max(1LL, (batch_rows + per_batch - 1) / per_batch);
    const long long chunks = std::max(1LL, (batch_rows + chunk_rows - 1) / chunk_rows);
    const auto summed = std::count(spec.summed.begin(), spec.summed.end(), KernelSpec::OverRows);
    grid.chunk_rows = chunk_rows;
    grid.batch_rows = batch_rows;
    grid.chunks = static_cast<int>(chunks);
    grid.strip_blocks = static_cast<int>(strip_blocks);
    // No rows (an empty batch): one batch of nothing, whose blocks store nothing (the gradients
    // were cleared before the launch) but still count their arrivals.
    batches = std::max(1LL, batches);
    grid.sum_partials = static_cast<std::size_t>(summed * batches * chunks * inner);
    grid.sum_arrivals = static_cast<std::size_t>(batches * strips);
    const long long blocks = batches * chunks * strip_blocks;
    // The blocks take (chunk, strip) items in turn, so the grid stays within the resident grid that
    // the partial sums are sized for.
    grid.blocks = static_cast<unsigned>(std::clamp<long long>(blocks, 1, resident));
    return grid;
}

}  // namespace lossjit::kinds
