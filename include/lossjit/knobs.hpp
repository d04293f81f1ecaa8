// The kernel variant knobs (docs/tuning.md): one type for what a caller asks for (Options::knobs),
// what the tuning store keeps, what a launch used (KernelInfo::knobs) and what a sweep varies.
#pragma once

#include <optional>
#include <string_view>

namespace lossjit {

// What each thread of a reduction adds its elements into (the block and grid finish is float64
// whatever this is). docs/tuning.md has the accuracy of each.
enum class Accumulator {
    Auto,                // float64, unless the tuning store chose otherwise
    Float64,             // the default: relative error ~1e-8 at any size
    Float32,             // fastest where conversions bind; error grows with elements per thread
    CompensatedFloat32,  // float32 with Neumaier's compensation: near float64 accuracy, no conversions
};
std::string_view to_string(Accumulator accumulator);  // "auto", "float64", "float32", "compensated"

// Which threads take a row of a program that reduces along rows (rows not side by side).
enum class RowTeam {
    Auto,   // a warp while rows are short, else the block; a block of automatic size a row takes the
            // fewest threads that keep its SM's loads in flight (docs/tuning.md)
    Warp,   // each warp of the block a row of its own
    Block,  // the whole block a row (or, with row_cluster, the blocks of a cluster)
};
std::string_view to_string(RowTeam team);  // "auto", "warp", "block"

// The ranges validate_knobs (src/tuning/knobs.cpp) enforces, and the launch and code generation
// rely on.
inline constexpr int kWarpThreads = 32;          // threads per block come in whole warps
inline constexpr int kMaxBlockThreads = 1024;    // the CUDA limit
inline constexpr int kMaxUnroll = 64;            // tiles per thread
inline constexpr int kMaxItemsPerThread = 64;    // elements per thread per tile (unroll x vector width)
inline constexpr int kMaxBlocksPerSm = 32;       // a reduction's partials are sized for this many per SM
inline constexpr int kMinRegisterBound = 32;     // a launch bound below this spills every kernel
inline constexpr int kMaxRegisters = 255;        // ptxas's own limit a thread (sm_50 to sm_90): no bound

// Every knob: 0 / Auto / nullopt is "automatic".
//
// Two conventions, one type:
// - asked for (Options::knobs, a sweep's variant): any knob may be automatic. A knob left automatic
//   takes the tuning store's value for the program, input shapes and GPU, if any, else the built-in
//   default; a knob that is set always wins.
// - resolved (KernelInfo::knobs, a tuning record): concrete values. block_threads > 0, accumulator
//   not Auto, fast_math and row_cache set (row_cluster and row_prefetch too, where the kernel keeps a row; row_team
//   where it reduces along rows, not side by side); max_registers the launch bound's registers a thread,
//   kMaxRegisters where the kernel has no bound;
//   max_blocks_per_sm 0 stays "no cap" (reductions: what occupancy allows, maps: none). KernelInfo
//   gives unroll, vector_width and items_per_thread as the kernel runs them (1 each for the strided
//   loop, which has no tiles). A tuning record keeps items_per_thread and
//   vector_width (unroll is implied: items / vector width), both 0 where the winner had no tiles, so
//   applying it leaves them automatic.
struct Knobs {
    int block_threads = 0;      // threads per block, a multiple of 32 in [32, 1024]; default 256 (maps: 128; reductions
                                // over 16-bit inputs or with logs (KL): 512; small fused gradient programs: 1024, 512
                                // when summing over or along rows; the columns loop narrows it to the columns there are)
    int unroll = 0;             // tiles per thread in the rows loop, [1, 64]; default chosen per layout
    int items_per_thread = 0;   // elements per thread per tile = unroll x vector width, [1, 64]; not with unroll
    int vector_width = 0;       // elements per access, 1, 4 or 8 (accesses of up to 16 bytes) where layout and alignment
                                // allow; default 8 where every operand is of 16 bits or fewer, else 4
    int max_blocks_per_sm = 0;  // cap on blocks per SM, [1, 32]; default: reductions what occupancy allows, maps no cap
    int max_registers = 0;      // registers a thread at most, [32, 255], through __launch_bounds__'s blocks per SM
                                // (65536 / (registers x block threads) of them, which may leave a few more
                                // registers than asked; 255: no bound); default per kernel and GPU (docs/tuning.md)
    Accumulator accumulator = Accumulator::Auto;  // reductions only; default float64
    std::optional<bool> fast_math;                // NVRTC --use_fast_math (approximate division, sqrt, exp, log); default off
    std::optional<bool> row_cache;                // programs that walk a row more than once: keep the row in shared
                                                  // memory between the walks; default on where the GPU's shared
                                                  // memory holds a row (or a large part of one)
    int row_cluster = 0;        // blocks of a thread-block cluster (sm_90) that take a row together: 1 (a block a row),
                                // 2, 4 or 8; default: clusters for few long rows, or for cached rows a block keeps
                                // less than half of (docs/tuning.md)
    std::optional<bool> row_prefetch;  // with the row cache: the last walk over a row copies the next row in (sm_80);
                                       // default per GPU (docs/tuning.md)
    RowTeam row_team = RowTeam::Auto;  // programs that reduce along rows: a warp or the block a row (RowTeam)

    bool operator==(const Knobs&) const = default;
};

}  // namespace lossjit
