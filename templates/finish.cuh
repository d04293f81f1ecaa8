// ---- the end of a reduction: block sums, the last block adds them ---------------------------
namespace lj {

// Sum over the warp (all 32 lanes taking part); the result is valid in lane 0. Fixed shuffle
// order: deterministic.
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// Sum over the block; the result is valid in thread 0. Fixed shuffle order: deterministic.
template <int kThreads>
__device__ __forceinline__ double block_sum(double v, double* scratch) {
    v = warp_sum(v);
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = threadIdx.x < kThreads / 32 ? scratch[threadIdx.x] : 0.0;
    if (warp == 0) v = warp_sum(v);
    return v;
}

// Each block stores its partial sum; the last block to arrive adds the partials in block order
// (its first warp, lanes striding, then a fixed shuffle tree), applies the scale and stores the
// result in its type (kResultDType). One launch,
// no float atomics, the same bits every run. A grid of one block (small inputs) skips all that.
// The scale is 1 / divisor, multiplied: a float64 division costs NVRTC more time than the rest of
// the finish, and the product differs from the quotient by at most an ulp of a double.
template <int kThreads, bool kOneBlock, int kResultDType>
__device__ __forceinline__ void finish_reduction(double acc, const ReduceOut& out) {
    __shared__ double scratch[32];
    __shared__ bool is_last;
    const double block_total = block_sum<kThreads>(acc, scratch);
    if (kOneBlock) {
        if (threadIdx.x == 0) store1<double>(kResultDType, out.result, 0, block_total * out.scale);
        return;
    }
    if (threadIdx.x == 0) {
        out.partials[blockIdx.x] = block_total;
        is_last = arrive_last(out.arrivals, gridDim.x);
    }
    __syncthreads();
    if (!is_last || threadIdx.x >= 32) return;
    see_partials();
    double total = 0.0;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += 32) total += __ldcg(out.partials + b);
    total = warp_sum(total);
    if (threadIdx.x == 0) {
        store1<double>(kResultDType, out.result, 0, total * out.scale);
        leave_arrivals_at_zero(out.arrivals);
    }
}

}  // namespace lj
