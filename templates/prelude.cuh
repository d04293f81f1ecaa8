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
struct Inputs {                 // the inputs the program reads, in program order
    const float* ptr[N > 0 ? N : 1];
    long long strides[N > 0 ? N : 1][kMaxRank];
};
struct Output {                 // where a map writes
    float* ptr;
    long long strides[kMaxRank];
};
template <int G>
struct Grads {                  // where the gradients go; those of full-shape inputs all laid out alike
    float* ptr[G];
    long long strides[kMaxRank];
    const float* upstream;      // a device scalar the gradients are also multiplied by; may be null
    float scale;                // upstream gradient / (N for mean, dim 0 for batchmean, 1 for sum)
    __device__ __forceinline__ float total_scale() const { return upstream ? scale * *upstream : scale; }
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
    float* result;
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

// Functions whose CUDA counterpart differs from PyTorch's definition.
// As torch.maximum / torch.minimum: a nan argument wins (fmaxf alone would drop it); otherwise
// fmaxf / fminf, which order -0 below +0 (max(-0, 0) is +0 in either order, min gives -0).
__device__ __forceinline__ float lj_max(float a, float b) { return a != a ? a : (b != b ? b : fmaxf(a, b)); }
__device__ __forceinline__ float lj_min(float a, float b) { return a != a ? a : (b != b ? b : fminf(a, b)); }
__device__ __forceinline__ float lj_clamp(float x, float lo, float hi) { return lj_min(lj_max(x, lo), hi); }
__device__ __forceinline__ float lj_relu(float x) { return x != x ? x : (x > 0.0f ? x : 0.0f); }
__device__ __forceinline__ float lj_sign(float x) { return (float)((0.0f < x) - (x < 0.0f)); }
__device__ __forceinline__ float lj_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float lj_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
__device__ __forceinline__ float lj_xlogy(float x, float y) {
    if (y != y) return y;
    return x == 0.0f ? 0.0f : x * logf(y);
}
__device__ __forceinline__ float lj_mod(float a, float b) {  // Python / torch.remainder semantics
    float r = fmodf(a, b);
    if (r != 0.0f && ((b < 0.0f) != (r < 0.0f))) r += b;
    return r;
}
__device__ __forceinline__ float lj_square(float x) { return x * x; }
__device__ __forceinline__ float lj_cube(float x) { return x * x * x; }
// ---- end of prelude -----------------------------------------------------------------------------
