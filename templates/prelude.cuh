// ---- lossjit prelude: the fixed part of every generated kernel --------------------------------
// NVRTC compiles this with no system or CUDA headers: only builtins are used.
namespace lj {

constexpr int kMaxRank = 8;  // must match kMaxRank in src/pipeline.hpp

// Kernel parameters. The host mirrors these structs field for field (src/kernel_abi.hpp).
struct Extents {
    long long count;            // elements in the broadcast shape
    long long dims[kMaxRank];   // collapsed extents, outermost first
};
struct Strided {                // an input that is broadcast or not contiguous
    const float* ptr;
    long long strides[kMaxRank];
};
struct StridedOut {             // a map output that is not contiguous
    float* ptr;
    long long strides[kMaxRank];
};
struct ReduceOut {
    double* partials;           // one slot per block
    unsigned int* arrivals;     // blocks finished so far; the last block resets it to 0
    float* result;
    double divisor;             // N for mean, size of dim 0 for batchmean, 1 for sum
};

// Coordinates of linear element i over the collapsed dims (innermost dim varies fastest).
template <int R>
__device__ __forceinline__ void coords(const Extents& e, long long i, long long (&c)[R]) {
#pragma unroll
    for (int d = R - 1; d > 0; --d) {
        c[d] = i % e.dims[d];
        i /= e.dims[d];
    }
    c[0] = i;
}

template <int R>
__device__ __forceinline__ long long offset(const long long (&c)[R], const long long* strides) {
    long long o = 0;
#pragma unroll
    for (int d = 0; d < R; ++d) o += c[d] * strides[d];
    return o;
}

// Sum over the block; the result is valid in thread 0. Fixed shuffle order: deterministic.
template <int kThreads>
__device__ __forceinline__ double block_sum(double v, double* scratch) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = threadIdx.x < kThreads / 32 ? scratch[threadIdx.x] : 0.0;
    if (warp == 0) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    }
    return v;
}

// Each block stores its partial sum; the last block to arrive adds the partials in block order and
// applies the divisor. One launch, no float atomics, the same bits every run.
template <int kThreads>
__device__ __forceinline__ void finish_reduction(double acc, const ReduceOut& out) {
    __shared__ double scratch[32];
    __shared__ bool is_last;
    const double block_total = block_sum<kThreads>(acc, scratch);
    if (threadIdx.x == 0) {
        out.partials[blockIdx.x] = block_total;
        __threadfence();
        const unsigned int arrived = atomicAdd(out.arrivals, 1u);
        is_last = arrived == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    double total = 0.0;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += kThreads) total += __ldcg(out.partials + b);
    __syncthreads();  // scratch is reused
    total = block_sum<kThreads>(total, scratch);
    if (threadIdx.x == 0) {
        *out.result = (float)(total / out.divisor);
        *out.arrivals = 0u;
    }
}

}  // namespace lj

// Functions whose CUDA counterpart differs from PyTorch's definition.
__device__ __forceinline__ float lj_max(float a, float b) { return (a > b || a != a) ? a : b; }  // fmaxf drops nan
__device__ __forceinline__ float lj_min(float a, float b) { return (a < b || a != a) ? a : b; }
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
