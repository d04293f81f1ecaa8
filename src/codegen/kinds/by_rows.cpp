// by rows: the kind for programs that reduce along rows, any dimensions (kinds.hpp): row reductions
// (logsumexp(x, -1), sum(e, -1)), takes (x[y]) and several whole-tensor reductions, a team of
// threads (a warp, or the block) per row. Its choice of team and numbers, and its grid; its source
// is by_rows_emit.cpp.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "codegen/kinds/kinds.hpp"
#include "lang/builtins.hpp"
#include "lossjit/errors.hpp"

namespace lossjit::kinds {

namespace {

constexpr int kFirstClusterArch = 90;  // thread-block clusters and distributed shared memory from sm_90
constexpr long long kRegisterBytes = 4;
constexpr int kMaxRowCluster = 8;      // the portable cluster size (lj::Team takes 2, 4 or 8)
constexpr int kFirstAsyncCopyArch = 80;  // cp.async (the row prefetch) from sm_80
constexpr int kWarpSchedulersPerSm = 4;  // an SM's warps split among four schedulers (sm_70 to sm_90)

// Static shared memory (all_reduce's partials, the totals, the finish's scratch) stays below this;
// a block may have kPortableShared where the GPU is not known.
constexpr std::int64_t kStaticReserve = 8 * 1024, kPortableShared = 48 * 1024;
constexpr long long kAssumedThreadsPerSm = 2048;  // A100, H100, H200, where the GPU is not known

// A row's columns in whole vectors of 4: what the row cache keeps of a row it keeps whole.
long long vector_row(long long columns) { return (columns + 3) / 4 * 4; }

// The blocks of `spec` an SM holds at once, by its threads and its shared memory (the row cache's).
long long cached_blocks_per_sm(const KernelSpec& spec, const GpuFacts& gpu) {
    const std::int64_t shared = gpu.shared_bytes_per_block > 0 ? gpu.shared_bytes_per_block : kPortableShared;
    const long long threads_per_sm = gpu.threads_per_sm > 0 ? gpu.threads_per_sm : kAssumedThreadsPerSm;
    const long long block_shared = static_cast<long long>(spec.dynamic_shared_bytes()) + kStaticReserve;
    return std::max(1LL, std::min(threads_per_sm / spec.block_threads, shared / block_shared));
}

// The block takes each row and the hardware hands out the rows' blocks (not a prefetching team, which
// takes its rows in turn): the grid is the by-rows kind's to choose (by_rows_grid).
bool block_team_rows(const KernelSpec& spec) {
    return spec.team == spec.block_threads && spec.team > kWarpThreads && !spec.row_prefetch;
}
// A block a row whose row cache leaves no room for a second block on its SM: its own threads are all
// that keep the SM's loads in flight, and nothing overlaps its row's merges.
bool block_alone_on_sm(const KernelSpec& spec, const GpuFacts& gpu) {
    return spec.team == spec.block_threads && spec.row_cluster == 1 && cached_blocks_per_sm(spec, gpu) == 1;
}
// A side-by-side team of several threads a row merges its accumulators through shared memory
// (lj::SideTeam::all_reduce: kMergeAccumulatorBytes at most for each thread and kind of
// accumulator), at most kSideMergeBudget (choose_by_rows keeps it there).
constexpr long long kSideMergeBudget = 40 * 1024, kMergeAccumulatorBytes = 16;

long long side_merge_bytes(const ir::Program& program, int block_threads, int team) {
    if (team <= 1) return 0;
    std::set<std::string_view> kinds;
    for (const auto& n : program.nodes)
        if (n.kind == ir::NodeKind::RowReduce)
            kinds.insert(row_reduction_info(static_cast<RowReduction>(n.slot)).cuda_accumulator);
    return static_cast<long long>(block_threads) * kMergeAccumulatorBytes * static_cast<long long>(kinds.size());
}

// Threads a row of a side-by-side block: one where that gives ByRowSideTeamBlocksPerSm blocks an SM;
// else as few as do (the block's loads at one column stay a run of block_threads / team rows, a
// whole warp at least).
int side_team(int block_threads, long long rows, long long sms, const GpuFacts& gpu) {
    const long long enough = default_value(Default::ByRowSideTeamBlocksPerSm, gpu) * sms;
    int team = 1;
    while (team < block_threads / kWarpThreads && (rows * team + block_threads - 1) / block_threads < enough) team *= 2;
    while (team > 1 && (block_threads % team != 0 || (block_threads / team) % kWarpThreads != 0)) team /= 2;
    return team;
}

// The row cache of rows side by side (lj::SideTeam): each thread keeps the columns it walks of its
// row, interleaved with its block's other rows. Every thread an SM holds keeps its share, so the
// shared memory bounds the threads an SM holds, and fewer threads must keep the bytes in flight
// that many would: blocks of ByRowSideCachedThreads (their threads a row chosen again for that
// size) loading ByRowSideCachedUnroll elements of their row at once, registers for as many blocks
// as the shared memory holds. Automatic where whole rows fit at ByRowSideCachedMinThreadsPerSm
// threads an SM (RMS norm over the 64 channels of [N, 64, H, W]: 256 bytes a thread, 13 blocks of
// 64 an SM); asked for, as many leading columns as fit.
void choose_side_cache(KernelSpec& spec, const ir::Program& program, long long rows, long long columns, long long sms,
                       int inputs, bool asked, const Knobs& knobs, const GpuFacts& gpu) {
    KernelSpec cached = spec;
    if (knobs.block_threads == 0) {
        cached.block_threads = default_value(Default::ByRowSideCachedThreads, gpu);
        cached.team = side_team(cached.block_threads, rows, sms, gpu);
    }
    const long long rows_per_block = cached.block_threads / cached.team;
    const long long merge = side_merge_bytes(program, cached.block_threads, cached.team);
    const std::int64_t sm_shared = gpu.shared_bytes_per_block > 0 ? gpu.shared_bytes_per_block : kPortableShared;
    const std::int64_t budget = sm_shared - kStaticReserve - merge;
    const long long row = vector_row(columns);
    const long long per_column = static_cast<long long>(inputs) * static_cast<long long>(size_of(cached.compute));
    cached.row_cache_columns = std::max<long long>(0, std::min<long long>(row, budget / (per_column * rows_per_block) / 4 * 4));
    cached.row_cache_inputs = inputs;
    if (cached.row_cache_columns == 0) {
        if (asked)
            spec.notes.push_back(fmt::format("a row cache was asked for, but {} rows side by side do not keep a column in "
                                             "the {} KB of shared memory a block may have",
                                             rows_per_block, sm_shared / 1024));
        return;
    }
    // The blocks an SM holds with their shares of the cache (the driver keeps kBlockReserve of an SM's
    // shared memory a block; a team of one thread a row has no static shared memory to speak of).
    constexpr long long kBlockReserve = 1024;
    const long long threads_per_sm = gpu.threads_per_sm > 0 ? gpu.threads_per_sm : kAssumedThreadsPerSm;
    const long long block_bytes = cached.row_cache_columns * per_column * rows_per_block + kBlockReserve + merge;
    const long long blocks_per_sm =
        std::max(1LL, std::min(threads_per_sm / cached.block_threads, (sm_shared + kBlockReserve) / block_bytes));
    const bool whole = cached.row_cache_columns >= row;
    if (!asked && !(whole && blocks_per_sm * cached.block_threads >= default_value(Default::ByRowSideCachedMinThreadsPerSm, gpu)))
        return;
    if (knobs.unroll == 0 && knobs.items_per_thread == 0) {
        cached.unroll = default_value(Default::ByRowSideCachedUnroll, gpu);
        while (cached.unroll > 1 && static_cast<long long>(cached.team) * (cached.unroll / 2) >= columns) cached.unroll /= 2;
    }
    // Registers for as many blocks as the shared memory holds, but not fewer than
    // ByRowSideCachedMinRegisters a thread (short rows would fit 32 blocks of 64: 32 registers).
    const long long register_blocks =
        blocks_at_registers(default_value(Default::ByRowSideCachedMinRegisters, gpu), cached.block_threads);
    cached.min_blocks_per_sm = static_cast<int>(std::min(blocks_per_sm, register_blocks));
    spec = std::move(cached);
}

// Whether the walks call a transcendental function (exp, log, ...) at each element, not once a row.
bool transcendental_elements(const ir::Program& program, const std::vector<bool>& input_per_row) {
    const std::vector<bool> per_row = per_row_nodes(program, input_per_row);
    for (std::size_t i = 0; i < program.nodes.size(); ++i)
        if (!per_row[i] && transcendental_call(program, program.nodes[i])) return true;
    return false;
}

// The row cache (KernelSpec::row_cache_columns): where the program walks its rows more than once
// and reads an input again, the first walk keeps it in shared memory. With the cache, a block holds
// most of an SM's shared memory: often one block an SM, whose own threads must keep the bytes in
// flight that many blocks would (ByRowCachedThreads, ByRowCachedBytesInFlight; knobs set win).
// Rows a warp would take, each warp of the block its share of the cache, go to the whole block
// where the warps would keep less than ByRowCacheWarpMinShare-th of their rows and the block more
// (triplet 32768 x 8192: 14% of each row, or the whole row). Automatic where at least
// ByRowCacheMinShare-th of the row fits the shared memory a block may have (48 KB where the GPU is
// not known); asked for, as much of the row as fits. Asked for (knob row_cluster, sm_90), the
// blocks of a thread-block cluster share each row a block would take, each walking and keeping its
// part in at most its share of the SM's shared memory (ByRowClusterBlocksPerSm blocks an SM), so
// that an SM keeps several rows under way. Rows side by side: choose_side_cache.
// `walks`: the program's (row_walks); `element_inputs` and `element_bytes`: the inputs a thread's
// loads along the row are counted of, and one element of each (choose_by_rows);
// `transcendental_elements`: the walks call exp, log or the like at each element.
void choose_row_cache(KernelSpec& spec, const ir::Program& program, long long rows, long long columns, long long sms,
                      bool warp_per_row, const RowWalks& walks, long long element_inputs, long long element_bytes,
                      bool transcendental_elements, const Knobs& knobs, const GpuFacts& gpu) {
    if (knobs.row_cache == false) return;
    const bool asked = knobs.row_cache == true;
    const int inputs = static_cast<int>(walks.read_again.size());
    // Three walks or more with exp or log at each element of two inputs or more (distillation's
    // value and gradient): more values live a thread (128-159 registers at ByRowCachedValuesPerThread,
    // with spills), and the cache saves two reads of the row, not one.
    const bool many_walks = walks.count >= 3 && inputs >= 2 && transcendental_elements;
    if (inputs == 0) {
        if (asked) spec.notes.push_back("a row cache was asked for, but no input is read by more than one walk over the row");
        return;
    }
    if (spec.side_by_side) return choose_side_cache(spec, program, rows, columns, sms, inputs, asked, knobs, gpu);
    const std::int64_t budget = (gpu.shared_bytes_per_block > 0 ? gpu.shared_bytes_per_block : kPortableShared) - kStaticReserve;
    const long long row = vector_row(columns);
    element_inputs = std::max(element_inputs, 1LL);
    element_bytes = std::max(element_bytes, 1LL);
    // Rows read an element at a time keep too few bytes in flight for one block an SM (an L2
    // normalization of 8192 x 65535 on an H100: 30.5% of the floor with the cache at 512 threads x 32
    // loads, spilling; 54.2% at 1024 x 2, as without it): only where asked for.
    if (!asked && spec.vector_width < 4) return;
    const std::int64_t cluster_block_bytes = (budget + kStaticReserve) / default_value(Default::ByRowClusterBlocksPerSm, gpu);
    // `cluster` blocks of a thread-block cluster take each row (block teams only), each caching its
    // share; they are meant to fit ByRowClusterBlocksPerSm to an SM, whose loads share the bytes in
    // flight and whose registers are bounded for it.
    auto with_cache = [&](bool warp_team, int cluster, int threads = 0) {
        KernelSpec cached = spec;
        if (knobs.block_threads == 0)
            cached.block_threads = threads > 0 ? threads : default_value(Default::ByRowCachedThreads, gpu);
        cached.team = warp_team ? kWarpThreads : cached.block_threads;
        cached.row_cluster = cluster;
        const long long blocks_per_sm = cluster > 1 ? default_value(Default::ByRowClusterBlocksPerSm, gpu) : 1;
        if (cluster > 1) cached.min_blocks_per_sm = static_cast<int>(blocks_per_sm);
        if (knobs.unroll == 0 && knobs.items_per_thread == 0) {
            const long long per_unroll = static_cast<long long>(cached.block_threads) * cached.vector_width * element_bytes;
            const long long in_flight = default_value(Default::ByRowCachedBytesInFlight, gpu) / blocks_per_sm;
            // Each load's values stay in registers until the row's walk uses them: past
            // ByRowCachedValuesPerThread, ByRowCachedThreads threads (512) spill; more threads a
            // block have fewer registers each, so as many fewer values. (1024 threads x unroll 8 of
            // bfloat16, the bytes in flight of float32's unroll 4: 168-192 bytes a thread of local
            // memory, fused cross-entropy and focal, stop 60; without the cache, which those bytes
            // then do not earn, 1.35-1.7x faster on an H200: docs/results/issue-31/stop61.)
            const long long values_per_unroll = static_cast<long long>(cached.vector_width) * element_inputs;
            const long long full_threads = default_value(Default::ByRowCachedThreads, gpu);
            long long values = default_value(Default::ByRowCachedValuesPerThread, gpu) / blocks_per_sm *
                               std::min<long long>(full_threads, cached.block_threads) / cached.block_threads;
            if (many_walks)
                values = std::min<long long>(values, default_value(Default::ByRowCachedValuesManyWalks, gpu));
            cached.unroll = 1;
            while (cached.unroll * 2 <= kMaxUnroll && per_unroll * cached.unroll * 2 <= in_flight &&
                   values_per_unroll * cached.unroll * 2 <= values)
                cached.unroll *= 2;
            // No more loads than a row has.
            while (cached.unroll > 1 &&
                   static_cast<long long>(cached.team) * cluster * cached.vector_width * (cached.unroll / 2) >= columns)
                cached.unroll /= 2;
        }
        const std::int64_t per_column = static_cast<std::int64_t>(inputs) * static_cast<std::int64_t>(size_of(cached.compute)) *
                                        (cached.block_threads / cached.team);
        // A block's share of the row: whole vectors of its threads' walks.
        const long long stride = static_cast<long long>(cached.team) * cached.vector_width;
        const long long share = cluster > 1 ? (row + stride * cluster - 1) / (stride * cluster) * stride : row;
        // A cluster's block keeps no more than leaves room for its fellows on the SM (rows longer
        // than the largest cluster holds keep their leading columns).
        const std::int64_t block_budget = cluster > 1 ? std::min(budget, cluster_block_bytes - kStaticReserve) : budget;
        cached.row_cache_columns = std::max<long long>(0, std::min<long long>(share, block_budget / per_column / 4 * 4));
        cached.row_cache_inputs = inputs;
        return cached;
    };
    // The bytes an SM's blocks keep in flight: as many blocks as its shared memory and threads hold.
    const long long enough_in_flight = default_value(Default::ByRowCachedBytesInFlight, gpu);
    auto sm_in_flight = [&](const KernelSpec& c) {
        return cached_blocks_per_sm(c, gpu) * c.block_threads * c.unroll * c.vector_width * element_bytes;
    };
    KernelSpec cached = with_cache(warp_per_row, 1);
    // Rows a warp takes that the block's warps keep in part: on an H200 (ByRowWarpWholeRows) fewer
    // warps that keep their rows whole, as many as fit, in fours (one for each of an SM's four
    // warp schedulers), down to ByRowWarpWholeRowsMinWarps. Cross-entropy's value and gradient over
    // 32768 x 4096: 16 warps keeping 89% of each row 0.334-0.350 ms, 12 keeping it whole 0.311-0.321
    // though their loads keep 48 KB in flight, not ByRowCachedBytesInFlight; 14 (whole, uneven among
    // the schedulers) 0.343-0.358, 10 0.327, 8 0.356 (docs/results/issue-31/stop68). Only where the
    // 16 warps' cache is worth its place (16-bit inputs, short of the bytes in flight, keep none).
    bool whole_warp_rows = false;
    if (cached.team == kWarpThreads && knobs.block_threads == 0 && cached.row_cache_columns < row &&
        sm_in_flight(cached) >= enough_in_flight && default_value(Default::ByRowWarpWholeRows, gpu) != 0) {
        const int min_warps = default_value(Default::ByRowWarpWholeRowsMinWarps, gpu);
        for (int warps = cached.block_threads / kWarpThreads - kWarpSchedulersPerSm; warps >= min_warps;
             warps -= kWarpSchedulersPerSm) {
            KernelSpec fewer = with_cache(true, 1, warps * kWarpThreads);
            if (fewer.row_cache_columns < row) continue;
            cached = std::move(fewer);
            whole_warp_rows = true;
            break;
        }
    }
    // (A block size set by hand or by a tuning record decides the team as the automatic one does,
    // unless row_team is set, so that a record, which keeps row_team, replays the kernel it timed.)
    if (knobs.row_team == RowTeam::Auto && warp_per_row &&
        cached.row_cache_columns * default_value(Default::ByRowCacheWarpMinShare, gpu) < row) {
        KernelSpec block_team = with_cache(false, 1);
        if (block_team.row_cache_columns > cached.row_cache_columns) cached = std::move(block_team);
    }
    // A block a row of automatic size: the fewest threads (from ByRowBlockTeamMinThreads) whose
    // blocks keep ByRowCachedBytesInFlight in flight an SM with the same share of the row, so that
    // an SM has more rows under way (each row's walks wait on the block's merges between them).
    if (cached.team == cached.block_threads && knobs.block_threads == 0 && knobs.row_cluster <= 1) {
        for (int threads = default_value(Default::ByRowBlockTeamMinThreads, gpu); threads < cached.block_threads; threads *= 2) {
            KernelSpec fewer = with_cache(false, 1, threads);
            if (fewer.row_cache_columns >= cached.row_cache_columns && sm_in_flight(fewer) >= enough_in_flight) {
                cached = std::move(fewer);
                break;
            }
        }
    }
    // A fused value-and-gradient kernel whose block keeps a row the SM has room for once (no second
    // block beside it) and whose element work calls exp, log or the like: ByRowAloneGradientThreads
    // threads, whose warps hide the arithmetic and the row's merges where half as many, with twice
    // the registers, did not (H100 and H200, docs/tuning.md "A block alone on its SM"). Not where the
    // elements' work is light (cosine: 1.5-2% slower on an H200, equal on an H100) or a walk merges a
    // centered accumulator (layer norm's backward: 3-4% slower on an H200). Programs past
    // SmallGradientProgramNodes keep the default: 1024 threads leave 64 registers a thread.
    if (block_alone_on_sm(cached, gpu) && knobs.block_threads == 0 && !program.derivatives.empty() && transcendental_elements &&
        !walks.centered &&
        program.nodes.size() <= static_cast<std::size_t>(default_value(Default::SmallGradientProgramNodes, gpu))) {
        KernelSpec more = with_cache(false, 1, default_value(Default::ByRowAloneGradientThreads, gpu));
        if (more.block_threads > cached.block_threads && more.row_cache_columns >= cached.row_cache_columns)
            cached = std::move(more);
    }
    // Blocks of a cluster share a row a block takes where asked for (knob row_cluster), and where a
    // block would keep less than 1 / ByRowClusterLongRowShare of its row: the smallest cluster whose
    // blocks keep that much of their shares, else the largest where its blocks keep more of the row
    // than one block (cross-entropy's value and gradient over 131072 columns: clusters of 4, 82.0% of
    // the floor against 66.2% a block a row on an H100, 69.0 against 56.4% on an H200). Where a block
    // keeps the row, clusters are not automatic: on an H200 the smallest cluster whose blocks' shares
    // leave room for ByRowClusterBlocksPerSm blocks an SM won for RMS norm 16384 x 32768 (83.2% of the
    // floor against 76.9% with a block a row) and lost for cross-entropy, cosine and softmax (docs/tuning.md).
    const bool clusters = cached.team == cached.block_threads && gpu.arch >= kFirstClusterArch;
    if (clusters && knobs.row_cluster > 1) {
        cached = with_cache(false, knobs.row_cluster);
    } else if (clusters && knobs.row_cluster == 0) {
        const long long part = default_value(Default::ByRowClusterLongRowShare, gpu);  // keep 1 / part at least
        if (cached.row_cache_columns * part < row) {
            for (int cluster = 2; cluster <= kMaxRowCluster; cluster *= 2) {
                KernelSpec in_cluster = with_cache(false, cluster);
                const bool keeps_share = in_cluster.row_cache_columns * cluster * part >= row;
                if (keeps_share || (cluster == kMaxRowCluster &&
                                    in_cluster.row_cache_columns * cluster > cached.row_cache_columns)) {
                    cached = std::move(in_cluster);
                    break;
                }
            }
        }
    }
    // Short of ByRowCachedBytesInFlight (16-bit inputs, whose registers hold half the bytes), not
    // automatic: bfloat16 softmax 16384 x 32768 on an H100, 512 threads x 8 x 4 x 2 bytes, one block
    // an SM: 48.3% of the floor with the cache, 59.7% without (32768 x 4096, the warps' share: 61.8%
    // against 54.8%, lost by this rule).
    const long long kept = cached.row_cache_columns * cached.row_cluster;
    // Programs of many walks over inputs of 4 bytes or more keep it short of that too: distillation
    // 8192 x 1000, its warps' loads 32 KB in flight an SM, 0.127 ms with the cache against 0.210
    // without; 16384 x 2048 0.366 / 0.446 (H100; 16-bit inputs not measured: the rule above holds).
    const bool wide_many_walks = many_walks && element_bytes >= 4 * element_inputs;
    const bool worth = kept * default_value(Default::ByRowCacheMinShare, gpu) >= row &&
                       (sm_in_flight(cached) >= enough_in_flight || wide_many_walks || whole_warp_rows);
    if (kept <= 0 || (!asked && !worth)) {
        if (asked)
            spec.notes.push_back(fmt::format("a row cache was asked for, but no column of the row fits the {} KB of shared "
                                             "memory a block may have ({} KB kept for the kernel's own)",
                                             (budget + kStaticReserve) / 1024, kStaticReserve / 1024));
        return;
    }
    spec = std::move(cached);
}

// Few long rows (layer norm over [16, 64, 256, 256]: 16 rows of 4M elements, a block each, 16 of 132
// SMs busy): the blocks of a thread-block cluster share each row, so that rows x cluster blocks
// fill the GPU. A cluster chosen with the row cache (choose_row_cache) stays; else, with block
// teams on sm_90, the knob's cluster, or automatically the smallest of 2, 4, 8 whose blocks cover
// the SMs where the rows are fewer than SMs / ByRowClusterFewRowsShare and each block still walks
// ByRowClusterMinTiles tiles of its row (not where a row cache was chosen for a block a row). Without
// a cache every block reads its share of the row from memory in every walk, as one block would the
// whole row. Clusters, not blocks that hand each other partials through global memory: such a
// hand-over costs microseconds a row, and at best tied them (stop 71, docs/results/rounds-2026-11-23-to-12-04.md).
void choose_row_cluster(KernelSpec& spec, long long rows, long long columns, long long sms, const Knobs& knobs,
                        const GpuFacts& gpu) {
    if (spec.row_cluster > 1 || knobs.row_cluster == 1) return;
    const bool block_team = !spec.side_by_side && spec.team == spec.block_threads;
    if (!block_team || gpu.arch < kFirstClusterArch) {
        if (knobs.row_cluster > 1)
            spec.notes.push_back(fmt::format("a row cluster of {} blocks was asked for, but clusters take a row with whole "
                                             "blocks (not warps, not rows side by side), on GPUs with clusters (sm_90 or "
                                             "later; none is known to `lossjit emit` without --gpu)",
                                             knobs.row_cluster));
        return;
    }
    if (knobs.row_cluster > 1) {
        spec.row_cluster = knobs.row_cluster;
        return;
    }
    // A row cache chosen for a block a row holds the whole row in each block: kept as it is.
    if (spec.row_cache_columns > 0 || rows * default_value(Default::ByRowClusterFewRowsShare, gpu) > sms) return;
    const long long tile = static_cast<long long>(spec.block_threads) * spec.vector_width * spec.unroll;
    const long long min_tiles = default_value(Default::ByRowClusterMinTiles, gpu);
    int cluster = 1;
    while (cluster < kMaxRowCluster && rows * cluster < sms && columns >= 2LL * cluster * tile * min_tiles) cluster *= 2;
    spec.row_cluster = cluster;
}

// The row prefetch (KernelSpec::row_prefetch): where a team keeps its row in the cache (not side by
// side, not shifted, not of two strides) and the cache keeps each input's own bits (inputs of the
// compute type: a copy, no conversion), on sm_80 or later; automatic per GPU (ByRowPrefetch,
// ByRowPrefetchCentered, ByRowPrefetchAlone, ByRowPrefetchAlonePart). `walks`: the program's
// (row_walks); its `walks_ahead` is read only past the checks below of what else it depends on (rows
// side by side, of two strides, shifted, in clusters).
void choose_row_prefetch(KernelSpec& spec, const ir::Program& program, const RowWalks& walks, long long columns,
                         const Knobs& knobs, const GpuFacts& gpu) {
    if (knobs.row_prefetch == false) return;
    const bool asked = knobs.row_prefetch == true;
    std::string why_not;
    if (spec.row_cache_columns <= 0) why_not = "no row is kept in the row cache";
    else if (spec.side_by_side) why_not = "rows side by side are kept a thread or a few a row";
    else if (spec.row_split) why_not = "rows of two strides are walked by runs";
    else if (spec.row_shift) why_not = "rows that do not start on a vector boundary walk their edges from memory";
    // Clusters taking rows in turn lost: H100, cross-entropy value + gradient 4096 x 131072 in
    // clusters of 4, 57-58% of the floor with a grid of 66 clusters, 81-82% a cluster a row; H200
    // (stop 70), with a grid of the clusters the driver says fit at once (cuOccupancyMaxActiveClusters),
    // 64.5-65.1% against 75.0-75.1, and no cluster size or blocks an SM won by more than the spread
    // (docs/results/issue-31/stop70: the patch and its numbers).
    else if (spec.row_cluster > 1) why_not = "blocks of a cluster take each row together";
    else if (gpu.arch < kFirstAsyncCopyArch)
        why_not = gpu.arch > 0 ? fmt::format("its copies need sm_{} or later (this GPU is sm_{})", kFirstAsyncCopyArch, gpu.arch)
                               : fmt::format("its copies need sm_{} or later (no GPU is known to `lossjit emit` without --gpu)",
                                             kFirstAsyncCopyArch);
    if (why_not.empty()) {
        const auto slots = read_inputs(program);
        for (int k : walks.read_again) {
            const auto i = static_cast<std::size_t>(k);
            const DType dtype = spec.input_dtypes.empty() ? DType::float32 : spec.input_dtypes[i];
            if (dtype != spec.compute || spec.inner_strides[i] != 1) {
                why_not = fmt::format("the row cache keeps '{}' ({}) as {}", program.inputs[static_cast<std::size_t>(slots[i])],
                                      spec.inner_strides[i] != 1 ? "walked by runs" : to_string(dtype), to_string(spec.compute));
                break;
            }
        }
    }
    if (!why_not.empty()) {
        if (asked) spec.notes.push_back(fmt::format("a row prefetch was asked for, but {}", why_not));
        return;
    }
    // Automatic where a block takes each row and the first walk's work at each element is heavy (a
    // centered accumulator's float64 updates): its loads then wait on the arithmetic, where the
    // copies do not. On an H200 also where a block alone on its SM keeps its whole row: nothing else
    // on the SM reads while its row's merges and its last walk's stores run, and the copies keep
    // the faster memory busy then (cross-entropy, softmax's backward); and where such a block keeps
    // one input's row in part for a fused value and gradient (the cross-entropy family over 65536
    // columns, 86% kept). Elsewhere the next row's copies, waited for after the last walk's stores,
    // cost more than the merges they would overlap (warps' rows; two blocks an SM, as triplet's; two
    // inputs kept in part, as distillation's; the H100: docs/tuning.md, "The row prefetch").
    const bool block_team = spec.team == spec.block_threads;
    const bool fused_gradient = !program.derivatives.empty() && !program.is_map();
    const bool alone = block_alone_on_sm(spec, gpu);
    const bool whole_row_alone = alone && spec.row_cache_columns >= vector_row(columns);
    const bool part_row_alone = alone && !whole_row_alone && spec.row_cache_inputs == 1 && fused_gradient;
    const Default rule = block_team && walks.centered ? Default::ByRowPrefetchCentered
                         : whole_row_alone             ? Default::ByRowPrefetchAlone
                         : part_row_alone              ? Default::ByRowPrefetchAlonePart
                                                       : Default::ByRowPrefetch;
    spec.row_prefetch = asked || default_value(rule, gpu) != 0;
    // Where the first walk only reduces the cached inputs, the row before can do it as it reads the
    // row in (KernelSpec::row_walk_ahead) instead of copying it. Where that measured faster: a fused
    // value and gradient of few enough threads (ByRowWalkAheadMaxThreads: cosine's 512), and on an
    // H200 of 1024 threads a block alone on its SM where the walk ahead picks every take of the row
    // (ByRowWalkAheadPickedMaxThreads: cross-entropy's x[y]), so that a row's start waits on nothing.
    // Not those whose takes' owners read them at the row's start (class weights' w[y], focal's and
    // label smoothing's (x - lse)[y]: 5-14 points slower), nor maps (softmax forward + backward 0.7-2%
    // slower in each of three rounds): the defaults table's evidence.
    if (spec.row_prefetch && walks.walks_ahead && fused_gradient) {
        spec.row_walk_ahead = spec.block_threads <= default_value(Default::ByRowWalkAheadMaxThreads, gpu) ||
                              (spec.block_threads <= default_value(Default::ByRowWalkAheadPickedMaxThreads, gpu) &&
                               row_takes_picked(program, spec));
    }
}

// Takes of K indices per row (x[k]): the kernel walks the K values with the team's lanes (K is
// carried one past the last dimension, each such input's stride between its K values there), and a
// gradient that scatters back along the row (ir::NodeKind::ScatterAdd) is written by the element
// pass as if nothing were gathered, then rewritten at the gathered columns. What that cannot do is
// refused: no dimension left for K; scatters by two indices. A row reduction or total of what the
// scatter reaches would need the scattered values at every column: differentiate scatters only into
// inputs (distributed_take), so that is an internal error.
void refuse_what_the_k_stage_cannot(const ir::Program& program, const Layout& layout) {
    if (layout.k_columns == 0) return;
    auto refuse = [&](const std::string& why) {
        throw UnsupportedError(fmt::format("takes of K indices per row (x[k] with k of extent {} along the row): {}; the "
                                           "CPU reference computes this (Loss::reference, reference_grad; `lossjit "
                                           "run --cpu`)",
                                           layout.k_columns, why));
    };
    if (layout.dims.size() >= static_cast<std::size_t>(kMaxRank))
        refuse(fmt::format("the kernel carries K in a dimension of its own, but the operands need all {}", kMaxRank));
    std::vector<bool> scatters(program.nodes.size(), false);  // reaches a ScatterAdd through element work
    int index = -1;
    for (std::size_t id = 0; id < program.nodes.size(); ++id) {
        const ir::Node& n = program.nodes[id];
        if (n.kind == ir::NodeKind::ScatterAdd) {
            const int slot = program.node(n.args[1]).slot;
            if (index >= 0 && index != slot) refuse("the gradient scatters by two indices");
            index = slot;
            scatters[id] = true;
            continue;
        }
        if (n.kind == ir::NodeKind::Binding)
            scatters[id] = scatters[static_cast<std::size_t>(program.bindings[static_cast<std::size_t>(n.slot)].node)];
        for (int a = 0; a < n.arity; ++a)
            if (scatters[static_cast<std::size_t>(n.args[static_cast<std::size_t>(a)])]) {
                if (n.kind != ir::NodeKind::Apply)
                    throw InternalError("a reduction of what a take's gradient scatters along the row (differentiate "
                                        "scatters only into inputs)");
                scatters[id] = true;
            }
    }
}

}  // namespace

KernelSpec choose_by_rows(const ir::Program& program, const Layout& layout, const KernelOperands& operands,
                          const Knobs& knobs, bool tuned, const GpuFacts& gpu) {
    using Loop = KernelSpec::Loop;
    if (!layout.by_rows) throw InternalError("a program that reduces along rows planned without a row layout");
    refuse_what_the_k_stage_cannot(program, layout);
    const auto totals = row_totals(program).size();
    if (totals > static_cast<std::size_t>(kMaxTotals))
        throw UnsupportedError(fmt::format("the program combines {} reductions of the whole tensor; a kernel holds at most {}",
                                           totals, kMaxTotals));
    KernelSpec spec;
    spec.loop = Loop::ByRow;
    spec.rank = static_cast<int>(layout.dims.size());
    const std::size_t inner = layout.dims.size() - 1;
    const long long columns = layout.dims[inner];
    const auto slots = read_inputs(program);
    const auto per_row = per_row_inputs(program, layout);
    // Strided rows that lie side by side in every input read along them (a reduction over an outer
    // dimension: sum(x, 0) of a contiguous [R, C], mean(x, 1) of [B, C, H, W]), where there are rows
    // enough: a block of neighbouring rows, a thread each or a few (lj::SideTeam), so that a warp's
    // loads are of 32 neighbouring elements, where a team on one strided row would read a sector per
    // element.
    const long long sms = gpu.multiprocessors > 0 ? gpu.multiprocessors : default_value(Default::AssumedMultiprocessors, gpu);
    // (Not with K values per row: their walk and the gradient's fix-up are a team's.)
    bool side_by_side = inner >= 1 && columns > 1 && layout.k_columns == 0 &&
                        layout.rows >= default_value(Default::ByRowSideTeamMinRowsPerSm, gpu) * sms;
    bool reads_along = false;
    for (int slot : slots) {
        const auto& access = layout.inputs[static_cast<std::size_t>(slot)];
        if (per_row[static_cast<std::size_t>(slot)]) continue;
        reads_along = true;
        side_by_side = side_by_side && access.strides[inner] != 1 && access.strides[inner - 1] == 1;
    }
    // Rows of two strides (Layout::row_inner) are walked by a team each.
    side_by_side = side_by_side && reads_along && layout.row_inner == 0;
    spec.row_split = layout.row_inner > 0;
    // Else a warp per row while a row is a few thousand elements (no block-wide synchronisation per
    // row); the whole block beyond, so that long rows are not read by 32 threads alone.
    const bool warp_per_row = knobs.row_team == RowTeam::Auto ? columns <= default_value(Default::ByRowWarpMaxColumns, gpu)
                                                              : knobs.row_team == RowTeam::Warp;
    const Default threads = side_by_side ? Default::ByRowSideTeamThreads
                            : warp_per_row ? Default::ByRowWarpTeamThreads
                                           : Default::ByRowBlockTeamThreads;
    spec.block_threads = knobs.block_threads > 0 ? knobs.block_threads : default_value(threads, gpu);
    spec.fast_math = knobs.fast_math.value_or(false);
    spec.tuned = tuned;
    spec.accumulator = Accumulator::Float64;
    if (knobs.accumulator != Accumulator::Auto && knobs.accumulator != Accumulator::Float64)
        spec.notes.push_back("a program that reduces along rows accumulates in float64");
    if (operands.input_dtypes.size() < program.inputs.size() || operands.input_data.size() < program.inputs.size())
        throw InternalError("kernel operands do not match the program");
    std::vector<bool> along;  // per kernel input: laid out along the row (not one value a row, not K values)
    for (int slot : slots) {
        const auto k = static_cast<std::size_t>(slot);
        // 2: the same along each run of a row of two (stride 0 within a run only: loaded once a vector).
        const auto& access = layout.inputs[k];
        const bool run_constant = layout.row_inner > 0 && access.strides[inner] == 0 && access.row_outer_stride != 0;
        spec.inner_strides.push_back(access.per_k ? 3 : per_row[k] ? 0 : run_constant ? 2 : 1);
        spec.input_dtypes.push_back(operands.input_dtypes[k]);
        along.push_back(!per_row[k] && !access.per_k);
    }
    spec.compute = program_compute_dtype(program, operands.input_dtypes);
    // An index is a value of the program's type: rounded beyond 2^24 in float32, never silently.
    constexpr long long kExactFloat32Integers = 1LL << 24;
    if (spec.compute != DType::float64 && columns > kExactFloat32Integers) {
        for (const auto& n : program.nodes) {
            if (n.kind != ir::NodeKind::RowReduce) continue;
            const auto& info = row_reduction_info(static_cast<RowReduction>(n.slot));
            if (info.is_index)
                throw UnsupportedError(fmt::format("{} over rows of {} columns: a column index above 2^24 is not exact in "
                                                   "float32; give a float64 input (or use the CPU reference)",
                                                   info.name, columns));
        }
    }
    spec.result_dtype = operands.result_dtype;
    spec.grad_dtypes = operands.grad_dtypes;
    spec.row_gradients = row_gradient_kinds(program, layout);  // refuses what the GPU cannot sum
    // The inputs a thread's loads along the row are counted of, for its unroll and the values it
    // holds for the row cache: where a warp takes the row, those the walks read there, not one laid
    // out along the row but only taken at a column of it (class weights' w[y], w of [C]). Counted
    // as two inputs, class weights took half cross-entropy's unroll and cached values; as one, on an
    // H200 its value and gradient ran 2-18% faster at 2048-8192 columns (forward -1% to +5%), but
    // where a block takes the row 2% (forward, 16384 x 32768) and 2-6% (value and gradient) slower
    // (rounds 213-214, docs/results/issue-31/stop67): a block's row counts every input along it.
    const bool walked_only = warp_per_row && !side_by_side;
    // The program's walks, the same for every spec below (of the spec they need the inputs' strides).
    const RowWalks walks = row_walks(program, spec);
    int element_inputs = 0;
    long long element_bytes = 0;  // one element of each input counted
    for (std::size_t i = 0; i < along.size(); ++i) {
        if (!along[i] || (walked_only && !walks.loads(i))) continue;
        element_inputs += 1;
        element_bytes += static_cast<long long>(size_of(spec.input_dtypes[i]));
    }
    const bool warp_one_input_values = walked_only && program.derivatives.empty() && element_inputs <= 1;

    // Four elements per access where every operand walked along the row steps by 1 and starts each
    // row at the same column of a vector: rows that start on a vector boundary, or shifted rows
    // (KernelSpec::row_shift: a length not a multiple of 4, a row stride not a multiple of 4), whose
    // columns before the first boundary and after the last are walked one at a time. Same-shaped
    // contiguous operands agree; a view with its own row stride does not.
    auto residues = [&](const OperandAccess& access) {
        std::vector<long long> r;
        for (std::size_t d = 0; d < inner; ++d) r.push_back((access.strides[d] % 4 + 4) % 4);
        return r;
    };
    std::optional<std::vector<long long>> walked_residues;  // the first operand's; every other's must match
    auto aligned = [&](const void* data, DType dtype, const OperandAccess& access) {
        if (reinterpret_cast<std::uintptr_t>(data) % vector_alignment(dtype) != 0) return false;
        if (access.strides[inner] != 1) return false;
        // A row of two strides: every segment whole vectors, each starting aligned.
        if (layout.row_inner > 0 && (layout.row_inner % 4 != 0 || access.row_outer_stride % 4 != 0)) return false;
        if (!walked_residues) walked_residues = residues(access);
        return *walked_residues == residues(access);
    };
    std::string why_scalar;
    if (layout.row_inner % 4 != 0)
        why_scalar = fmt::format("the row's runs ({} columns) are not a multiple of 4 long", layout.row_inner);
    // Only the inputs the walks load are loaded in vectors: one only taken at a column of the row
    // (class weights' w[y]) is read an element at a time wherever it starts.
    for (std::size_t i = 0; i < slots.size() && why_scalar.empty(); ++i) {
        const auto k = static_cast<std::size_t>(slots[i]);
        if (!walks.loads(i)) continue;
        if (spec.inner_strides[i] == 1 && !aligned(operands.input_data[k], spec.input_dtypes[i], layout.inputs[k]))
            why_scalar = fmt::format("the rows of '{}' are not contiguous, do not start {}-byte aligned, or start at "
                                     "another column of a vector than the other inputs' rows",
                                     program.inputs[k], vector_alignment(spec.input_dtypes[i]));
    }
    const bool per_row_body = per_row_nodes(program, per_row)[static_cast<std::size_t>(program.body)];
    const bool writes_elements = (program.is_map() && !per_row_body) || !program.derivatives.empty();
    if (writes_elements && why_scalar.empty())
        for (std::size_t k = 0; k < operands.written_data.size(); ++k)
            if (!aligned(operands.written_data[k], operands.written_dtypes[k], layout.output))
                why_scalar = "the rows written (output or gradients) are not contiguous, do not all start aligned, or "
                             "start at another column of a vector than the inputs' rows";
    const bool shifted = columns % 4 != 0 || (walked_residues &&
                                              std::any_of(walked_residues->begin(), walked_residues->end(),
                                                          [](long long r) { return r != 0; }));
    if (!walked_residues && columns % 4 != 0 && why_scalar.empty())  // nothing walked along the row to align with
        why_scalar = fmt::format("the rows' length ({}) is not a multiple of 4", columns);
    if (shifted && layout.row_inner > 0 && why_scalar.empty())
        why_scalar = fmt::format("rows of two strides whose length ({}) or strides are not multiples of 4", columns);
    bool vector = why_scalar.empty();
    if (knobs.vector_width == 1) vector = false;
    if (knobs.vector_width > 1 && !vector)
        spec.notes.push_back(fmt::format("vector width {} was asked for, but {}: vector width 1 is used",
                                         knobs.vector_width, why_scalar));
    else if (knobs.vector_width > 4)
        spec.notes.push_back(fmt::format("vector width {} was asked for, but the by-row loop reads at most 4 elements "
                                         "per access: vector width 4 is used", knobs.vector_width));
    spec.vector_width = vector ? 4 : 1;
    spec.row_shift = vector && shifted;

    // A block of rows side by side is whole warps of rows (a knob's thread count always is; a
    // tuning record's is checked as a knob is, but no kernel is emitted that would not compile).
    spec.side_by_side = side_by_side && spec.block_threads % kWarpThreads == 0;
    if (spec.side_by_side && knobs.row_team != RowTeam::Auto)
        spec.notes.push_back("a row team was asked for, but rows side by side take a thread or a few each: the knob does "
                             "not apply");
    spec.team = warp_per_row ? kWarpThreads : spec.block_threads;
    if (spec.side_by_side) {
        // A thread per row where that gives blocks enough; else as few threads per row as do (the
        // block's loads at one column stay a run of block_threads / team rows, a whole warp at least).
        const auto choose_team = [&] { spec.team = side_team(spec.block_threads, layout.rows, sms, gpu); };
        choose_team();
        // Several threads on a row (fewer rows than a thread each can fill the GPU with): blocks of
        // more rows read longer runs at each column (4224 rows: 96% of the copy rate at 1024 threads
        // against 50% at 512 on an H100). Measured on reductions; a kernel that also writes every
        // element (maps, gradients) keeps its registers (1024 threads allow 64).
        if (spec.team > 1 && knobs.block_threads == 0 && !writes_elements) {
            spec.block_threads = default_value(Default::ByRowSideSharedThreads, gpu);
            choose_team();
        }
        // With several threads per row, lj::SideTeam's all_reduce keeps an accumulator per thread in
        // shared memory for each kind of accumulator the program uses: past kSideMergeBudget of the
        // 48 KB a block may have statically, NVRTC refuses the kernel (block 1024 with four kinds: 64
        // KB). Fewer threads then.
        const long long bytes = side_merge_bytes(program, spec.block_threads, spec.team);
        if (bytes > kSideMergeBudget) {
            const long long per_thread = bytes / spec.block_threads;
            int smaller = kWarpThreads;  // a power of 2: the threads per row can still grow by halves
            while (smaller * 2 * per_thread <= kSideMergeBudget) smaller *= 2;
            spec.notes.push_back(fmt::format("rows side by side with {} kinds of accumulator would keep {} KB of shared "
                                             "memory at {} threads a block: {} threads are used",
                                             per_thread / kMergeAccumulatorBytes, bytes / 1024, spec.block_threads, smaller));
            spec.block_threads = smaller;
            choose_team();
        }
    }
    if (knobs.unroll > 0) {
        spec.unroll = knobs.unroll;
    } else if (knobs.items_per_thread > 0) {
        spec.unroll = std::clamp(knobs.items_per_thread / spec.vector_width, 1, kMaxUnroll);
    } else if (spec.side_by_side) {
        // A thread alone on its row that only reduces it keeps 8 loads of it in flight, 4 where it
        // compares (amax, argmax: a select, and argmax's index, per element; 8 there was 5-8% slower
        // on an H100 at strides of 4095 and 8192 floats); one that also writes every element (RMS
        // norm) keeps 8 (16 spills there, and on an H200 is 13% slower).
        const bool compares = std::any_of(program.nodes.begin(), program.nodes.end(), [](const ir::Node& n) {
            if (n.kind != ir::NodeKind::RowReduce) return false;
            const auto how = static_cast<RowReduction>(n.slot);
            return how == RowReduction::Max || how == RowReduction::Min || row_reduction_info(how).is_index;
        });
        const Default unroll = spec.team > 1 || writes_elements ? Default::ByRowSideTeamUnroll
                               : compares                       ? Default::ByRowSideAloneCompareUnroll
                                                                : Default::ByRowSideAloneUnroll;
        spec.unroll = default_value(unroll, gpu);
        while (spec.unroll > 1 && static_cast<long long>(spec.team) * (spec.unroll / 2) >= columns) spec.unroll /= 2;
    } else {
        // One input read along the row (cross-entropy's logits): per team and GPU, a warp's rows more
        // loads in flight than a block's (measured on values alone: gradient kernels keep the block's
        // number); two or three (cosine, triplet) their own.
        const Default one_input = warp_one_input_values ? Default::ByRowWarpUnrollOneInput : Default::ByRowUnrollOneInput;
        spec.unroll = default_value(element_inputs <= 1 ? one_input : Default::ByRowUnrollSeveralInputs, gpu);
        while (spec.unroll > 1 && static_cast<long long>(spec.team) * spec.vector_width * (spec.unroll / 2) >= columns)
            spec.unroll /= 2;
    }
    const bool transcendental = transcendental_elements(program, per_row);
    choose_row_cache(spec, program, layout.rows, columns, sms, warp_per_row, walks, element_inputs, element_bytes,
                     transcendental, knobs, gpu);
    choose_row_cluster(spec, layout.rows, columns, sms, knobs, gpu);
    choose_row_prefetch(spec, program, walks, columns, knobs, gpu);
    // A warp's rows of one input, values alone, without the cache: on an H200 at most
    // ByRowWarpOneInputMaxRegisters a thread, so that a program heavier than most at unroll 8 (loss,
    // z-loss and accuracy: 78 registers, one block of 512 an SM) keeps two blocks' loads in flight
    // (64 registers, no local memory: 1-5% faster than 512 x 4, where unbounded it was 2-9% slower).
    if (warp_one_input_values && spec.row_cache_columns == 0 && spec.team == kWarpThreads) {
        const int registers = default_value(Default::ByRowWarpOneInputMaxRegisters, gpu);
        if (registers < kMaxRegisters)
            spec.min_blocks_per_sm = static_cast<int>(blocks_at_registers(registers, spec.block_threads));
    }
    // A block's row of several inputs, reduced alone (cosine, triplet over 16384 columns and more): on
    // an H200 at most ByRowBlockSeveralInputsMaxRegisters a thread, four blocks of 256 an SM where
    // unbounded cosine took 73 (three): the rows' merges and starts then leave a fourth block loading
    // (cosine 93.7 -> 97.0% of the read roofline; 48 registers, five blocks, 95.5; round 237). Only
    // as measured, one walk of light element work (no exp or log), and where a thread's loads in
    // flight take at most three quarters of those registers: float64 triplet (96 registers of loads),
    // cosine at unroll 8 (64) and distillation's three walks of bfloat16 spill under the bound.
    if (!warp_per_row && !spec.side_by_side && element_inputs >= 2 && !writes_elements && walks.count == 1 &&
        !transcendental && spec.row_cache_columns == 0 && spec.row_cluster <= 1) {
        const int registers = default_value(Default::ByRowBlockSeveralInputsMaxRegisters, gpu);
        const long long load_bytes = static_cast<long long>(spec.unroll) * spec.vector_width * element_bytes;
        if (registers < kMaxRegisters && load_bytes <= registers * kRegisterBytes * 3 / 4)
            spec.min_blocks_per_sm = static_cast<int>(blocks_at_registers(registers, spec.block_threads));
    }
    // Not a cluster's blocks: clusters taking rows in turn lost (choose_row_prefetch).
    spec.resident_grid = block_team_rows(spec) && spec.row_cluster <= 1 &&
                         default_value(Default::ByRowBlockTeamResidentGrid, gpu) != 0;
    spec.one_block = !program.is_map() && KernelSpec::blocks(spec, layout) <= 1;
    return spec;
}

namespace {

// The scatter kernels' chunks (templates/scatter.cuh): a block's thread walks all rows of its chunk,
// so chunks of about kScatterChunkRows rows keep that short; each chunk's sums cost a row of
// `classes` doubles, so at most kScatterSumsDoubles of them (64 MiB) bound the chunks where the
// classes are many (16384 rows of 131072 classes: 64 chunks of 256 rows).
constexpr long long kScatterChunkRows = 1024;
constexpr long long kScatterSumsDoubles = 1LL << 23;
constexpr long long kMaxGridY = 65535;
constexpr long long kScatterFinishBlocks = 65535;  // the finish's threads take classes grid-stride beyond

void plan_scatter(LaunchGrid& grid, const KernelSpec& spec, const Layout& layout) {
    LaunchGrid::Scatter& s = grid.scatter;
    s.rows = layout.rows;
    s.classes = layout.dims.empty() ? 0 : layout.dims.back();
    const long long rows = std::max<long long>(s.rows, 1);
    const long long classes = std::max<long long>(s.classes, 1);
    const long long most = std::clamp<long long>(kScatterSumsDoubles / classes, 1, kMaxGridY);
    const long long chunks = std::clamp<long long>((rows + kScatterChunkRows - 1) / kScatterChunkRows, 1, most);
    s.chunk_rows = (rows + chunks - 1) / chunks;
    s.chunks = (rows + s.chunk_rows - 1) / s.chunk_rows;
    s.class_blocks = static_cast<unsigned>((s.classes + lj::kScatterClasses - 1) / lj::kScatterClasses);
    s.finish_blocks = static_cast<unsigned>(
        std::clamp<long long>((s.classes + lj::kScatterThreads - 1) / lj::kScatterThreads, 1, kScatterFinishBlocks));
    s.row_doubles = static_cast<std::size_t>(rows) * (sizeof(lj::ScatteredRow) / sizeof(double));
    const auto scattered = static_cast<std::size_t>(
        std::count(spec.row_gradients.begin(), spec.row_gradients.end(), RowGradient::Scattered));
    s.rows_at = grid.sum_partials;
    s.sums_at = s.rows_at + scattered * s.row_doubles;
    grid.sum_partials = s.sums_at + static_cast<std::size_t>(s.chunks * classes);
}

}  // namespace

LaunchGrid by_rows_grid(const ir::Program& program, const KernelSpec& spec, const Layout& layout,
                        const Occupancy& occupancy) {
    if (spec.loop != KernelSpec::Loop::ByRow) throw InternalError("by_rows_grid for another loop");
    const long long resident = occupancy.resident_blocks();
    // Teams of a block: a block per row, so that blocks ending at different times keep every SM
    // busy to the end (H100, 16384 x 32768: 0.750 ms against 0.789 for a resident grid taking
    // rows in turn; an H200 measured otherwise where the slots below leave blocks several rows
    // each). Warp teams: a resident grid (32768 x 4096: 0.202 ms against 0.219 for a
    // block per 16 rows). A team that prefetches its next row (KernelSpec::row_prefetch) takes rows
    // in turn too. A reduction's partial sums (one per block and total) must fit the workspace's
    // slots; beyond, blocks take rows grid-stride.
    const long long wanted = KernelSpec::blocks(spec, layout);
    long long grid_limit = block_team_rows(spec) && occupancy.max_blocks_per_sm <= 0 ? std::numeric_limits<int>::max() : resident;
    if (!program.is_map()) {
        const long long totals = std::max<long long>(1, static_cast<long long>(row_totals(program).size()));
        const long long slots = std::max(1LL, static_cast<long long>(occupancy.multiprocessors) * kMaxBlocksPerSm / totals);
        // Rows beyond the slots, so that each block takes several: where it measured faster
        // (KernelSpec::resident_grid), every block at once, taking rows in turn.
        if (spec.resident_grid && wanted > slots) grid_limit = std::min(grid_limit, resident);
        grid_limit = std::min(grid_limit, slots);
    }
    LaunchGrid grid;
    // Whole clusters: a launch of a kernel with a cluster size takes a grid of its multiples.
    const long long cluster = std::max(1, spec.row_cluster);
    grid_limit = std::max(cluster, grid_limit / cluster * cluster);
    grid.blocks = static_cast<unsigned>(std::clamp<long long>(wanted, cluster, grid_limit));
    if (spec.one_block && grid.blocks != 1) throw InternalError("a one-block kernel planned with a larger grid");
    if (spec.scatters()) plan_scatter(grid, spec, layout);
    return grid;
}

}  // namespace lossjit::kinds
