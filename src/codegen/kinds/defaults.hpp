// The launch policy's defaults: every number the kinds choose when a knob is left automatic, one
// row each, keyed by what it is for and by the class of GPU, each citing the measurement behind
// it. A GPU class whose measurements disagree with another's gets its own row; every default has
// a row for any GPU (what a GPU never measured, or code emitted without one, gets).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace lossjit {

// What the launch policy knows of the GPU it chooses for. All zero: no GPU (code emitted for none
// in particular); the policy then takes the rows for any GPU.
struct GpuFacts {
    int arch = 0;                       // compute capability x 10: 90 for sm_90
    int multiprocessors = 0;
    std::int64_t l2_bytes = 0;
    std::int64_t memory_bytes = 0;
    double memory_bytes_per_second = 0;  // peak, from the memory clock and bus width; 0 if not reported
    std::int64_t shared_bytes_per_block = 0;  // shared memory a block may have, opting in past 48 KB; 0 if not known
    int threads_per_sm = 0;                   // resident threads an SM holds; 0 if not known
};

// The classes the defaults tell apart: GPUs whose measured best settings differ. Hopper with HBM3
// (the H100, ~3.35 TB/s) and with HBM3e (the H200, ~4.8 TB/s) are the same SMs fed at different
// rates, which moves the balance between a block's registers and the loads it keeps in flight.
enum class GpuClass : unsigned char {
    Any,         // the row for every GPU without a row of its own
    HopperHbm3,  // sm_90 under 4 TB/s (or, where the bandwidth is not reported, under 100 GiB): H100
    HopperHbm3e, // sm_90 from 4 TB/s (or from 100 GiB): H200
};
GpuClass gpu_class(const GpuFacts& gpu);
std::string_view to_string(GpuClass gpu);

// GPUs lossjit knows by name, to choose kernels as they would without one (Options::gpu, `lossjit
// emit --gpu`): the facts their driver reports, so that the kernel chosen for the name is the one
// that GPU chooses (a GPU test checks it on the GPU it runs on).
struct NamedGpu {
    std::string_view name;         // "h100"
    std::string_view description;  // which GPU, for help texts
    GpuFacts facts;
};
std::span<const NamedGpu> named_gpus();
// The facts of the GPU called `name`; all zero (no GPU in particular) for an empty name; UsageError
// naming the known GPUs for any other.
GpuFacts named_gpu_facts(std::string_view name);

// What a default is for. The kinds ask for these by name (kinds/*.cpp); the table says the value.
enum class Default : unsigned char {
    // Threads per block
    MapThreads,                     // a map without gradients (one tile per block)
    ReductionThreads,               // a reduction without gradients
    GradientThreads,                // a value-and-gradient or map-backward kernel
    SmallGradientThreads,           // the same with a small program (SmallGradientProgram)
    ColumnsSmallGradientThreads,    // the columns loop (gradients summed over rows), small program
    AlongRowsSmallGradientThreads,  // a reduction whose gradients sum along rows ([N, 1]), small program
    SixteenBitReductionThreads,     // a reduction over 16-bit inputs read 8 to an access
    CommonPathReductionThreads,     // a reduction with the logs' common path (KL)
    ByRowWarpTeamThreads,           // by rows, a warp per row: warps per block x 32
    ByRowBlockTeamThreads,          // by rows, the block per row
    ByRowSideTeamThreads,           // by rows, strided rows side by side (lj::SideTeam), a thread a row
    ByRowSideSharedThreads,         // ... where several threads share a row (fewer rows)
    // Shapes and thresholds
    ByRowWarpMaxColumns,            // rows up to this long get a warp each, longer ones the block
    ByRowBlockTeamResidentGrid,     // 1 where a block's rows outnumber the partial sums' slots (each block
                                    // takes several): a resident grid takes them in turn, not a block a slot
    ByRowSideTeamMinRowsPerSm,      // strided rows side by side are taken side by side from this many per SM
    ByRowSideTeamBlocksPerSm,       // ... with as few threads per row as give this many blocks per SM
    AssumedMultiprocessors,         // the SMs a kernel emitted without a GPU (lossjit emit) is planned for
    SmallGradientProgramNodes,      // a gradient program of at most this many nodes (and two
                                    // derivatives, three streams) counts as small
    ShortElementProgram,            // function applications up to which a reduction's program is short
    ColumnsSmallThreadsPerSm,       // the columns loop's small float32 programs: registers for this many threads per SM
    ByRowWarpOneInputMaxRegisters,  // a warp's rows of one input, values alone, no row cache: registers a thread at most
    ByRowBlockSeveralInputsMaxRegisters,  // a block's row of several inputs, reduced alone, no row cache: the same
    // Unrolling: 16-byte accesses per thread per tile, divided among the tensors that stream
    ShortReductionAccesses,
    LongReductionAccesses,
    MapAccesses,
    MapBackwardAccesses,
    SixteenBitAccesses,             // inputs of 16 bits or fewer (vector width 8)
    GradientUnrollLimit,            // a fused value-and-gradient kernel's unroll at most
    TranscendentalUnrollLimit,      // two or more transcendental calls per element: unroll at most
    CommonPathUnrollLimit,          // the same on the logs' common path
    ColumnsSmallUnroll,             // the columns loop with a small program: rows walked at once
    ByRowUnrollOneInput,            // by rows, one input read along the row (cross-entropy), a block a row
    ByRowWarpUnrollOneInput,        // ... a warp a row
    ByRowUnrollSeveralInputs,       // by rows, two or more (cosine, triplet)
    ByRowSideTeamUnroll,            // by rows, side by side: elements of its row a thread loads at once
    ByRowSideAloneUnroll,           // ... where each row has one thread (it steps through its rows alone)
    ByRowSideAloneCompareUnroll,    // ... the same for a program with amax, amin, argmax or argmin (compares)
    ByRowCachedThreads,             // by rows with a row cache: threads per block (one block an SM, mostly)
    ByRowAloneGradientThreads,      // ... a fused value-and-gradient kernel's block alone on its SM (its cache fills it)
    ByRowCachedBytesInFlight,       // ... bytes its loads keep in flight (threads x unroll x vector x input bytes)
    ByRowCachedValuesPerThread,     // ... at most this many loaded values a thread (unroll x vector x inputs)
    ByRowCachedValuesManyWalks,     // ... at most this many where 3+ walks of exp or log read 2+ cached inputs
    ByRowCacheMinShare,             // ... automatic where at least 1 / this of the row fits
    ByRowCacheWarpMinShare,         // ... rows a warp would take go to the block where warps keep less
    ByRowBlockTeamMinThreads,       // ... a block a row of automatic size: the fewest threads tried
    ByRowWarpWholeRows,             // ... 1 where fewer warps keep whole the rows the default block's warps keep in part
    ByRowWarpWholeRowsMinWarps,     // ... at least this many warps a block then
    ByRowClusterBlocksPerSm,        // ... a cluster's blocks share a row that would leave fewer blocks an SM (sm_90)
    ByRowClusterLongRowShare,       // ... rows a block keeps under 1 / this of: clusters whose blocks keep that of their shares
    ByRowClusterFewRowsShare,       // rows fewer than SMs / this take a cluster's blocks each (sm_90), cache or not
    ByRowClusterMinTiles,           // ... where each block of the cluster walks at least this many tiles of the row
    ByRowPrefetch,                  // by rows with a row cache: 1 where the last walk copies the next row in (sm_80)
    ByRowPrefetchCentered,          // ... the same for a block a row and a centered accumulator (layer norm)
    ByRowPrefetchAlone,             // ... the same for a block a row alone on its SM, its whole row kept
    ByRowPrefetchAlonePart,         // ... and a fused value and gradient whose block alone keeps one input's row in part
    ByRowWalkAheadMaxThreads,       // ... a fused value and gradient of at most this many threads a block walks the next row ahead
    ByRowWalkAheadPickedMaxThreads, // ... at most this many where the walk ahead picks every take of the row (x[y])
    ByRowSideCachedThreads,         // rows side by side with a row cache: threads per block (a thread a row)
    ByRowSideCachedUnroll,          // ... elements of its row a thread loads at once
    ByRowSideCachedMinThreadsPerSm, // ... automatic where whole rows fit at this many threads an SM
    ByRowSideCachedMinRegisters,    // ... registers a thread at least (bounds the blocks its registers are set for)
    Count_,
};

struct DefaultRow {
    Default what;
    GpuClass gpu;
    int value;
    std::string_view measured;  // the numbers that chose it, briefly
    std::string_view evidence;  // where they are, relative to the repository (docs/results/...)
};

std::span<const DefaultRow> default_table();
// The value for `gpu`: its class's row, else the row for any GPU.
int default_value(Default what, const GpuFacts& gpu);
std::string_view to_string(Default what);
// A default that switches a way of emitting on (1) or off (0); every other is a count, above 0.
bool is_switch(Default what);

}  // namespace lossjit
