// kernel_spec: what a compiled kernel is specialised on besides the program (KernelSpec), and how it
// is launched: the grid, and how many of its blocks run at once (Occupancy). The kinds (kinds/)
// choose both and emit the source; the runtime only carries out what they decide, so the variant and
// its grid cannot disagree.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "lossjit/dtype.hpp"
#include "codegen/kinds/defaults.hpp"
#include "lossjit/knobs.hpp"
#include "pipeline.hpp"

namespace lossjit {

// A vector of `width` elements (4 or 8) is read or written in accesses of at most 16 bytes: width 4
// is 16 bytes of float32, 8 of bfloat16, 4 of uint8; width 8 is 16 bytes of bfloat16, 8 of uint8,
// two 16-byte accesses of float32. Its start must be aligned to this many bytes.
inline std::size_t vector_alignment(DType dtype, int width = 4) {
    return std::min<std::size_t>(16, static_cast<std::size_t>(width) * size_of(dtype));
}

// The widest vector the rows and columns loops use for operands of these element sizes: 8 where
// every operand is of 2 bytes or fewer (so an access moves 16 bytes, as four float32 do), else 4.
int preferred_vector_width(std::size_t widest_element_bytes);

// What a launch passes besides shapes: where the data is (its alignment decides vector accesses)
// and its element types.
struct KernelOperands {
    // Program input order; for a map's backward, the upstream gradient after them.
    std::vector<const void*> input_data;
    std::vector<DType> input_dtypes;
    // The tensors written where each element lives: a map's output, or the full-shape gradients.
    std::vector<const void*> written_data;
    std::vector<DType> written_dtypes;
    DType result_dtype = DType::float32;  // a map's output, or a reduction's result
    std::vector<DType> grad_dtypes;       // per derivative, in program.derivatives' order

    // Every input of `dtype`, without data (emitting code for no particular call: all aligned);
    // what is written is of `dtype` too if it is a floating type, else float32.
    static KernelOperands unplaced(const ir::Program& program, DType dtype = DType::float32);
};

// What a compiled kernel is specialised on besides the program. Part of the cache key (through the
// source it produces; fast_math also through the NVRTC options).
struct KernelSpec {
    enum class Loop {
        Rows,     // every operand walks the innermost dim with stride 1 or 0: tiles, wide loads
        Strided,  // anything else: coordinates per element
        Columns,  // gradients summed over rows (a broadcast row vector's): chunks of rows, column strips
        ByRow,    // programs that reduce along rows: a team (a warp, the block, or side by side) per row (kinds/by_rows.cpp)
    };
    Loop loop = Loop::Rows;
    int rank = 1;
    int vector_width = 1;            // 1, 4 or 8 elements per access (4: 16 bytes of float32; 8: 16 bytes of bfloat16)
    int unroll = 1;                  // tiles of block_threads * unroll * vector_width elements
    std::vector<int> inner_strides;  // Rows, Columns: per read input, 1 (contiguous) or 0 (one value per row);
                                     // ByRow: 0 one value per row (an index, or extent 1 along the row), 2 the
                                     // same along each run of a row of two strides (row_split), else 1
    // Rows, Columns: per read input, 1 where every row reads the same values (contiguous, outer strides
    // all 0: t [C] against p [N, C]); the rows loop then loads them once per block where the grid keeps
    // each block to the same columns (plan_grid), the columns loop once per strip. Empty where no input
    // repeats.
    std::vector<int> same_every_row;
    int team = 32;                   // ByRow: threads per row: a warp (32) or the block (block_threads),
                                     // or 1 to block_threads / 32 where the rows lie side by side
    bool side_by_side = false;       // ByRow: a block takes block_threads / team neighbouring strided rows (lj::SideTeam)
    // ByRow: rows of two strides (Layout::row_inner): column j at lj::split_column, the launch giving
    // the segments' length in extents.dims[rank] and each operand's stride between them in strides[rank].
    bool row_split = false;
    // ByRow, vector width 4: rows that do not all start on a vector boundary (a length not a
    // multiple of 4, such as a vocabulary of 50257) but start at the same column of a vector in
    // every operand walked along them: each row's columns before its first boundary and after its
    // last are walked one at a time, the rest in aligned vectors (kinds/by_rows_emit.cpp).
    bool row_shift = false;
    // ByRow: per derivative, how the kernel writes it (RowGradient): where each element lives, once
    // per row at the row's index (an input of one value for each row, [N, 1] against [N, C]: summed
    // along the row), or once per row with its index, for the classes' sums (`w[y]`, w [C]).
    std::vector<RowGradient> row_gradients;
    bool scatters() const;  // some gradient is Scattered: the launch runs lj's scatter kernels after it
    // ByRow: the row cache. A program that walks each row more than once (a statistic, then the
    // elements; a value, then its gradient) keeps the first `row_cache_columns` columns of the
    // `row_cache_inputs` inputs that later walks read again in shared memory (dynamic: the kernel
    // reads its size), so that those walks read the row from the SM, not from memory. 0: no cache.
    long long row_cache_columns = 0;
    int row_cache_inputs = 0;
    // ByRow with block teams: the blocks of a thread-block cluster (sm_90) that take each row
    // together, each walking and caching its share of the row (row_cache_columns is a block's
    // share); 1: a block per row.
    int row_cluster = 1;
    // ByRow with a row cache, a team of a warp or a block (not side by side, shifted or of two
    // strides), every cached input of the compute type (the cache keeps its bits): the last walk to
    // read the cache copies the team's next row into it as it goes (cp.async, sm_80), and the
    // grid is resident, each team taking rows in turn; the first walk reads the cache too.
    bool row_prefetch = false;
    // With the row prefetch, where the first walk only reduces the cached inputs at each column (no
    // per-row value, no element work): the last walk reads the team's next row from memory itself,
    // does the first walk's work on it and keeps it in the cache, so that the next row starts at its
    // merges; and the first tile of the row after is loaded before those merges (into registers
    // carried from row to row, RowProgram::Ahead), so that memory stays busy across them. No copies.
    bool row_walk_ahead = false;
    // ByRow, a block a row (not in clusters, no prefetch), on a GPU where it measured faster
    // (Default::ByRowBlockTeamResidentGrid): where the rows outnumber the partial sums' slots, so that
    // each block takes several rows anyway, a resident grid, each block taking rows in turn, rather
    // than a block a slot (by_rows_grid). The launch's grid only: the kernel's source is the same.
    bool resident_grid = false;
    std::size_t dynamic_shared_bytes() const;  // what a launch gives the row cache
    // __launch_bounds__'s second argument (emit_detail.hpp: launch_bounds), the blocks per SM the
    // registers must allow; 1: no demand beyond one block. Set by the kinds' defaults (the columns
    // loop, some row kernels) or by the registers knob (choose).
    int min_blocks_per_sm = 1;
    // The registers a thread that bound leaves (Knobs::max_registers as a launch reports it):
    // kRegistersPerSm / (min_blocks_per_sm x block_threads), kMaxRegisters where there is no bound.
    int register_bound() const;
    // How a derivative is summed where its input is broadcast: the kernel's own values (lj::Summed,
    // templates/abi.cuh).
    enum Summed : int {
        NotSummed = lj::kNotSummed,       // the input has the full shape: one gradient element per element
        OverRows = lj::kSummedOverRows,   // one row repeated over all others ([C] against [N, C]): Columns loop
        AlongRows = lj::kSummedAlongRows, // one value per row or per batch of rows ([N, 1], [1, C, 1, 1]): Rows loop, per tile
        OverAll = lj::kSummedOverAll,     // one value for everything (a scalar): Rows loop, summed per block
    };
    std::vector<int> summed;         // per derivative, a Summed; empty where none is summed
    bool sums() const;               // some derivative is summed: the kernel takes an lj::SumScratch
    // The element gets a common path (kinds/elementwise_emit.cpp, templates/rows.cuh): a float32 rows-loop kernel without
    // gradients or fast math whose program calls log or xlogy (BuiltinInfo::cuda_common).
    bool common_path(const ir::Program& program) const;
    // Element types. Empty lists mean all float32 (what a spec made by hand, in tests, gets).
    std::vector<DType> input_dtypes; // per read input (as inner_strides), then a map's upstream gradient
    DType result_dtype = DType::float32;  // a map's output, or a reduction's result
    std::vector<DType> grad_dtypes;  // per derivative
    DType compute = DType::float32;  // what the program computes in: compute_dtype() of its dtype_inputs
    bool one_block = false;          // reductions: the whole input fits one block's tile, the grid is 1
    int block_threads = 256;
    // Reductions: what each thread sums into. Emitted only when not Float64, so float64 kernels are
    // the same bytes as before the knob existed.
    Accumulator accumulator = Accumulator::Float64;
    bool fast_math = false;  // NVRTC --use_fast_math (see compile_options)
    bool tuned = false;      // the knobs came from the tuning store; marks the signature
    // Not part of the kernel: knobs that were asked for and could not be honoured, and why.
    std::vector<std::string> notes;

    // The fastest variant the layout and the pointers' alignment allow, within `knobs` (as asked
    // for, after the tuning store filled what it has), for `gpu` (its class picks the defaults;
    // none: the defaults for any GPU): knobs that are set are honoured where the layout allows
    // (else `notes` says why not), automatic ones are chosen by the program's kind (kinds/kinds.cpp
    // dispatches). Null pointers in `operands` count as aligned (for emitting code without data).
    // Gradient kernels: `layout.output` is the full-shape gradients' layout, and a map's upstream
    // gradient is one more input after the program's (in `layout` and `operands`). A derivative
    // whose input is broadcast is summed (Summed): a row broadcast over all other dimensions, one
    // value per row, or one value for everything; UnsupportedError for other broadcasts. `tuned`:
    // some knob came from the tuning store (marks the signature). max_blocks_per_sm is a launch
    // setting, not part of the spec.
    static KernelSpec choose(const ir::Program& program, const Layout& layout, const KernelOperands& operands,
                             const Knobs& knobs = {}, bool tuned = false, const GpuFacts& gpu = {});
    std::string signature() const;  // readable, e.g. "rows, rank 2, inner strides [1 0], vector 4, ..."
    // Blocks the rows or strided loop has work for (one per tile, or per block_threads elements).
    static long long blocks(const KernelSpec& spec, const Layout& layout);
};

// Every GPU from sm_50 to sm_90 has this many 32-bit registers an SM.
inline constexpr long long kRegistersPerSm = 65536;

// The blocks of `block_threads` an SM holds where each thread has `registers` (at least one): the
// launch bound's minimum blocks (KernelSpec::min_blocks_per_sm) that keeps a thread to those registers.
inline long long blocks_at_registers(long long registers, int block_threads) {
    const long long blocks = kRegistersPerSm / (registers * block_threads);
    return blocks > 1 ? blocks : 1;
}

// Rows per block from which a rows-loop kernel with gradients summed along rows lets each block take
// whole rows (LaunchGrid::whole_rows): the last rows then leave at most 1/32 of the blocks idle.
inline constexpr long long kWholeRowsPerBlock = 32;

// How many blocks of one kernel run at once. The only place this is worked out: the grid (a
// reduction keeps its whole grid resident) and KernelInfo's blocks per SM and occupancy both come
// from here.
struct Occupancy {
    int fits_per_sm = 0;        // what one SM holds (cuOccupancyMaxActiveBlocksPerMultiprocessor)
    int max_blocks_per_sm = 0;  // the knob; 0: no cap
    int multiprocessors = 1;

    int per_sm() const;                   // fits_per_sm under the cap
    long long resident_blocks() const;    // the whole GPU at once: at least 1, at most kMaxBlocksPerSm per SM
    // A launch of `grid` blocks: the blocks per SM it uses (fewer when the grid is small), and the
    // SM's threads they occupy (0 when the SM's maximum is not known).
    int blocks_per_sm(unsigned grid) const;
    double fraction(unsigned grid, int block_threads, int max_threads_per_sm) const;
};

// The grid of one launch, and the scratch its summed gradients need (KernelSpec::sums()).
struct LaunchGrid {
    unsigned blocks = 1;
    // Columns loop: batches of `batch_rows` rows, each cut into `chunks` chunks of `chunk_rows` rows,
    // times `strip_blocks` column strips. Rows loop: `batch_rows` rows per element of a gradient
    // summed along rows.
    long long chunk_rows = 0;
    long long batch_rows = 0;
    int chunks = 0;
    int strip_blocks = 0;
    // Rows loop with gradients summed along rows: blocks take whole rows in turn (enough rows for
    // every block: kWholeRowsPerBlock), not single tiles.
    bool whole_rows = false;
    // lj::SumScratch: `sum_partials` doubles of partial sums and `sum_arrivals` arrival counters.
    std::size_t sum_partials = 0;
    std::size_t sum_arrivals = 0;
    // ByRow with scattered gradients (KernelSpec::scatters): what the scatter kernels
    // (templates/scatter.cuh) are launched with after the fused kernel. Their scratch is part of
    // `sum_partials` (no counters): gradient k's rows (lj::ScatteredRow each) at rows_at + k *
    // row_doubles doubles, then the chunks' sums ([chunks][classes] doubles, which the gradients take
    // in turn) at sums_at.
    struct Scatter {
        long long rows = 0, classes = 0;
        long long chunk_rows = 0, chunks = 0;  // lossjit_scatter_chunks: chunks of rows ...
        unsigned class_blocks = 0;             // ... times ranges of lj::kScatterClasses classes
        unsigned finish_blocks = 0;            // lossjit_scatter_finish
        std::size_t rows_at = 0, row_doubles = 0;
        std::size_t sums_at = 0;
    } scatter;
};

// Reductions keep the grid resident (their partials are sized for it), and so does the columns
// loop (its partial sums grow with the grid). Maps launch one block per tile unless capped: many
// short-lived blocks keep more writes in flight.
// How many leading dimensions of `layout` the inputs summed over or along rows walk: the columns
// loop's batches (0: one row for all rows; 1 for [N, 1, C] against [N, M, C]), the rows loop's
// elements summed along rows (1 for [N, 1] against [N, C]).
int summed_batch_dims(const ir::Program& program, const KernelSpec& spec, const Layout& layout);

// The grid of `spec`'s kind (kinds/kinds.cpp dispatches).
LaunchGrid plan_grid(const ir::Program& program, const KernelSpec& spec, const Layout& layout,
                     const Occupancy& occupancy);

}  // namespace lossjit
