// ---- lossjit prelude: the fixed part of every generated kernel --------------------------------
// NVRTC compiles this with no system or CUDA headers: only builtins are used. After it come the
// loop, the sink and the finish this kernel uses (templates/*.cuh), then the program.
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
    double scale;               // upstream gradient / (N for mean, dim 0 for batchmean, 1 for sum)
    __device__ __forceinline__ double total_scale() const { return upstream ? scale * (double)*upstream : scale; }
};
// Gradients summed over rows (inputs broadcast along every dimension but the innermost): each block
// sums its chunk of rows per column, the last block of a column strip adds the chunks in order.
struct ColumnScratch {
    double* partials;           // [summed gradient][chunk][column]
    unsigned int* arrivals;     // per column strip: blocks finished; the last one resets it to 0
    long long chunk_rows;       // rows per chunk
    int chunks;
    int strip_blocks;           // blocks sharing one chunk, each taking every strip_blocks-th strip
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
