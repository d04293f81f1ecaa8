// ---- lossjit prelude: the fixed part of every generated kernel --------------------------------
// NVRTC compiles this with no system or CUDA headers: only builtins are used. After it come the
// finish, the sink and the loop this kernel uses (templates/*.cuh), then the program.
namespace lj {

constexpr int kMaxRank = 8;  // must match kMaxRank in src/pipeline.hpp

// Kernel parameters. The host mirrors these structs field for field (src/kernel_abi.hpp).
struct Extents {
    long long count;            // elements in the broadcast shape
    long long dims[kMaxRank];   // collapsed extents, outermost first
};
template <int N>
struct Inputs {                 // the inputs the program reads, in program order (Element::dtype(k) says of what)
    const void* ptr[N > 0 ? N : 1];
    long long strides[N > 0 ? N : 1][kMaxRank];
};
struct Output {                 // where a map writes (Element::kResultDType)
    void* ptr;
    long long strides[kMaxRank];
};
template <int G>
struct Grads {                  // where the gradients go (Element::grad_dtype(g)); full-shape ones all laid out alike
    void* ptr[G];
    long long strides[kMaxRank];
    const float* upstream;      // a device scalar the gradients are also multiplied by; may be null
    const double* factor;       // a Composite program's gradient factor (float64, its own kernel's); may be null
    double scale;               // upstream gradient / (N for mean, dim 0 for batchmean, 1 for sum)
    __device__ __forceinline__ double total_scale() const {
        return (upstream ? scale * (double)*upstream : scale) * (factor ? *factor : 1.0);
    }
};
// Gradients summed over the dimensions their input is broadcast along (Element::summed(g)), without
// float atomics. The columns loop: each block sums its chunk of rows per column, the last block of a
// column strip adds the chunks in order. The rows loop: a gradient summed along rows stores one
// partial per tile where an element has several, the last tile of an element adds them in order; a gradient
// summed over everything keeps one partial per block, the last block adds them in block order.
// The host's KernelSpec::Summed says the same.
enum Summed { kNotSummed = 0, kSummedOverRows = 1, kSummedAlongRows = 2, kSummedOverAll = 3 };
struct SumScratch {
    double* partials;           // columns: [summed gradient][chunk][column]; rows: [summed over all][block],
                                // then [summed along rows][tile] ([..][row] with whole_rows)
    unsigned int* arrivals;     // columns: per batch and strip; rows: [0] blocks, [1 + element] tiles (rows
                                // with whole_rows); the last resets it
    long long chunk_rows;       // columns: rows per chunk
    long long batch_rows;       // columns: rows per batch (the summed input holds one row per batch);
                                // rows: rows per element of a gradient summed along rows
    int chunks;                 // columns: chunks per batch
    int strip_blocks;           // columns: blocks sharing one chunk, each taking every strip_blocks-th strip
    int whole_rows;             // rows: 1 where each block takes whole rows in turn (rows.cuh), so a
                                // gradient summed along rows is added once per row, not per tile
};
struct ReduceOut {
    double* partials;           // one slot per block
    unsigned int* arrivals;     // blocks finished so far; the last block resets it to 0
    void* result;               // one element of Element::kResultDType
    double scale;               // 1 / (N for mean, size of dim 0 for batchmean, 1 for sum)
};

// Coordinates of linear element i over the collapsed dims (innermost dim varies fastest).
template <int R>
__device__ __forceinline__ void coords(const Extents& e, long long i, long long (&c)[kMaxRank]) {
#pragma unroll
    for (int d = R - 1; d > 0; --d) {
        c[d] = i % e.dims[d];
        i /= e.dims[d];
    }
    c[0] = i;
}

template <int R>
__device__ __forceinline__ long long offset(const long long (&c)[kMaxRank], const long long* strides) {
    long long o = 0;
#pragma unroll
    for (int d = 0; d < R; ++d) o += c[d] * strides[d];
    return o;
}

}  // namespace lj

// ---- end of prelude -----------------------------------------------------------------------------
