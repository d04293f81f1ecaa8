// ---- programs that reduce along rows: teams and the finish of several totals -------------------
namespace lj {

// An index (x[y]'s y) exactly, as an integer.
__device__ __forceinline__ long long load_index(int dt, const void* p, long long i) {
    switch (dt) {
        case kInt32: return __ldg(static_cast<const int*>(p) + i);
        case kInt64: return __ldg(static_cast<const long long*>(p) + i);
        case kUInt8: return __ldg(static_cast<const unsigned char*>(p) + i);
        default: return __ldg(static_cast<const unsigned char*>(p) + i) != 0 ? 1 : 0;
    }
}

__device__ __forceinline__ float shuffle_xor(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ double shuffle_xor(double v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }

// The row accumulators (sum, amax, logsumexp, argmax, ...) are rows of the language table
// (src/lang/builtins.cpp, kRowReductions): a kernel carries those its program uses, after this file.

// A team of TEAM threads (a warp, or the whole block) takes one row at a time.
template <int BLOCK, int TEAM>
struct Team {
    static_assert(TEAM == 32 || TEAM == BLOCK, "a team is a warp or the whole block");
    static constexpr int kTeam = TEAM;
    static constexpr int kPerBlock = BLOCK / TEAM;
    __device__ __forceinline__ static int lane() { return TEAM == 32 ? (int)(threadIdx.x & 31) : (int)threadIdx.x; }
    __device__ __forceinline__ static long long first_row() {
        return (long long)blockIdx.x * kPerBlock + (TEAM == 32 ? (long long)(threadIdx.x >> 5) : 0);
    }
    __device__ __forceinline__ static long long row_step() { return (long long)gridDim.x * kPerBlock; }

    // Every thread of the team gets the combination of the team's accumulators, in a fixed order.
    template <class Acc>
    __device__ __forceinline__ static Acc all_reduce(Acc a) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) a.combine(a.shuffle_xor(o));
        if constexpr (TEAM != 32) {
            __shared__ Acc warps[BLOCK / 32];
            __syncthreads();  // the previous use of `warps` is over
            if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = a;
            __syncthreads();
            a = warps[0];
#pragma unroll
            for (int w = 1; w < BLOCK / 32; ++w) a.combine(warps[w]);
        }
        return a;
    }
};

// The end of a program's whole-tensor reductions: each block's partial sum of each total, then the
// last block adds them in block order, scales them, computes the final value (Final, from the
// totals) and stores it. Deterministic, as finish_reduction.
template <int BLOCK, int K, bool kOneBlock, int kResultDType, class Final>
__device__ __forceinline__ void finish_totals(const double (&acc)[K], const RowsOut& out, const Final& final) {
    __shared__ double scratch[32];
    __shared__ bool is_last;
    double block_total[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        block_total[k] = block_sum<BLOCK>(acc[k], scratch);
        __syncthreads();  // scratch is reused by the next total
    }
    if (kOneBlock) {
        if (threadIdx.x == 0) {
            double t[K];
#pragma unroll
            for (int k = 0; k < K; ++k) t[k] = block_total[k] * out.scale[k];
            store1<double>(kResultDType, out.result, 0, final(t));
        }
        return;
    }
    if (threadIdx.x == 0) {
#pragma unroll
        for (int k = 0; k < K; ++k) out.partials[(long long)k * gridDim.x + blockIdx.x] = block_total[k];
        is_last = arrive_last(out.arrivals, gridDim.x);
    }
    __syncthreads();
    if (!is_last || threadIdx.x >= 32) return;
    see_partials();
    double t[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        double total = 0.0;
        for (unsigned int b = threadIdx.x; b < gridDim.x; b += 32) total += __ldcg(out.partials + (long long)k * gridDim.x + b);
        total = warp_sum(total);
        t[k] = total * out.scale[k];
    }
    if (threadIdx.x == 0) {
        store1<double>(kResultDType, out.result, 0, final(t));
        leave_arrivals_at_zero(out.arrivals);
    }
}

}  // namespace lj
