// ---- the fused gradient kernel's sink: the sum, and each gradient stored --------------------
namespace lj {

// A reduction that also writes d value / d input for each of F's gradients, scaled, in the
// gradient's type (F::grad_dtype): where each element lives, or summed where the input is broadcast
// (F::summed(g)). kSummedAlongRows (an input of one value per row, [N, 1], or per batch of
// sums.batch_rows rows): each tile's derivatives are added by the block; an element of one tile
// stores its sum at once, a larger one leaves one partial per tile and the last of its tiles to
// arrive adds them in tile order (its tiles lie together: the layout walks its rows in a row).
// kSummedOverAll (a scalar):
// each thread adds across its tiles and finish_sums() adds the blocks' sums in block order.
// No float atomics: the same bits every run.
template <class F>
struct GradSink {
    using T = typename F::Value;
    static constexpr int G = F::kGrads;
    __host__ __device__ static constexpr bool any(int kind) {
        for (int g = 0; g < G; ++g)
            if (F::summed(g) == kind) return true;
        return false;
    }
    static constexpr bool kAlongRows = any(kSummedAlongRows);
    static constexpr bool kOverAll = any(kSummedOverAll);
    Grads<G> grads;
    SumScratch sums;
    T scale;
    double acc = 0.0;
    long long row = 0;
    double tile_sum[G];  // kSummedAlongRows: this thread's share of the tile
    double all_sum[G];   // kSummedOverAll: this thread's share of everything
    __device__ __forceinline__ explicit GradSink(const Grads<G>& g, const SumScratch& s = SumScratch{})
        : grads(g), sums(s), scale((T)g.total_scale()) {
#pragma unroll
        for (int k = 0; k < G; ++k) tile_sum[k] = all_sum[k] = 0.0;
    }
    template <int R>
    __device__ __forceinline__ void begin_row(const long long (&c)[kMaxRank]) {
        row = offset<R - 1>(c, grads.strides);
    }
    template <int VW, class Result>
    __device__ __forceinline__ void put(const Result (&r)[VW], long long col) {
        if (VW % 4 == 0) {
#pragma unroll
            for (int q = 0; q < VW; q += 4)
                acc += (double)((r[q].value + r[q + 1].value) + (r[q + 2].value + r[q + 3].value));
        } else {
#pragma unroll
            for (int j = 0; j < VW; ++j) acc += (double)r[j].value;
        }
#pragma unroll
        for (int g = 0; g < G; ++g) {
            if (F::summed(g) == kSummedAlongRows || F::summed(g) == kSummedOverAll) {
                // As the value: one float64 conversion per four lanes (conversions run at 1/8 of
                // the FP32 rate on sm_90).
                double s = 0.0;
                if (VW % 4 == 0) {
#pragma unroll
                    for (int q = 0; q < VW; q += 4)
                        s += (double)((r[q].grad[g] + r[q + 1].grad[g]) + (r[q + 2].grad[g] + r[q + 3].grad[g]));
                } else {
#pragma unroll
                    for (int j = 0; j < VW; ++j) s += (double)r[j].grad[g];
                }
                if (F::summed(g) == kSummedAlongRows) tile_sum[g] += s;
                else all_sum[g] += s;
                continue;
            }
            T scaled[VW];
#pragma unroll
            for (int j = 0; j < VW; ++j) scaled[j] = scale * r[j].grad[g];
            store_row<VW>(F::grad_dtype(g), grads.ptr[g], row + col, scaled);
        }
    }
    template <int R, class Result>
    __device__ __forceinline__ void put_at(const Result& r, const long long (&c)[kMaxRank]) {
        acc += (double)r.value;
        const long long o = offset<R>(c, grads.strides);
#pragma unroll
        for (int g = 0; g < G; ++g) store1<T>(F::grad_dtype(g), grads.ptr[g], o, scale * r.grad[g]);
    }

    // By every thread: the block's sums of `of` for the gradients summed `how` (valid in thread 0).
    template <int BLOCK>
    __device__ __forceinline__ static void block_sums(int how, const double (&of)[G], double (&sums_out)[G],
                                                      double* scratch) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
            if (F::summed(g) != how) continue;
            sums_out[g] = block_sum<BLOCK>(of[g], scratch);
            __syncthreads();  // scratch is reused
        }
    }

    // After each tile, by every thread of the block: tile `tile` of `tiles_per_row`, in row `row_index`.
    template <int BLOCK>
    __device__ __forceinline__ void end_tile(long long tile, long long row_index, long long tiles_per_row,
                                             long long tiles) {
        if constexpr (kAlongRows) {
            __shared__ double scratch[32];
            __shared__ bool is_last;
            double sum[G];
            block_sums<BLOCK>(kSummedAlongRows, tile_sum, sum, scratch);
#pragma unroll
            for (int g = 0; g < G; ++g) tile_sum[g] = 0.0;
            const double scale64 = grads.total_scale();
            const long long element = row_index / sums.batch_rows;
            const long long per_element = sums.batch_rows * tiles_per_row;  // tiles, from element * per_element on
            if (per_element == 1) {
                if (threadIdx.x == 0) {
#pragma unroll
                    for (int g = 0; g < G; ++g)
                        if (F::summed(g) == kSummedAlongRows)
                            store1<double>(F::grad_dtype(g), grads.ptr[g], element, sum[g] * scale64);
                }
                return;
            }
            // The partials after those of the gradients summed over everything.
            double* partials = sums.partials + (long long)gridDim.x * over_all_count();
            if (threadIdx.x == 0) {
                int i = 0;
#pragma unroll
                for (int g = 0; g < G; ++g)
                    if (F::summed(g) == kSummedAlongRows) partials[(long long)i++ * tiles + tile] = sum[g];
                __threadfence();
                is_last = atomicAdd(sums.arrivals + 1 + element, 1u) == (unsigned)(per_element - 1);
            }
            __syncthreads();
            if (is_last) {
                __threadfence();
                int i = 0;
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    if (F::summed(g) != kSummedAlongRows) continue;
                    const double* p = partials + (long long)i++ * tiles + element * per_element;
                    double total = 0.0;
                    for (long long j = threadIdx.x; j < per_element; j += BLOCK) total += __ldcg(p + j);
                    total = block_sum<BLOCK>(total, scratch);
                    if (threadIdx.x == 0) store1<double>(F::grad_dtype(g), grads.ptr[g], element, total * scale64);
                    __syncthreads();
                }
                if (threadIdx.x == 0) sums.arrivals[1 + element] = 0u;
            }
            __syncthreads();  // is_last is rewritten by the next tile
        }
    }

    __host__ __device__ static constexpr int over_all_count() {
        int n = 0;
        for (int g = 0; g < G; ++g) n += F::summed(g) == kSummedOverAll;
        return n;
    }

    // After the loop, by every thread: the gradients summed over everything.
    template <int BLOCK>
    __device__ __forceinline__ void finish_sums() {
        if constexpr (kOverAll) {
            __shared__ double scratch[32];
            __shared__ bool is_last;
            double block_total[G];
            block_sums<BLOCK>(kSummedOverAll, all_sum, block_total, scratch);
            const double scale64 = grads.total_scale();
            if (gridDim.x == 1) {
                if (threadIdx.x == 0) {
#pragma unroll
                    for (int g = 0; g < G; ++g)
                        if (F::summed(g) == kSummedOverAll)
                            store1<double>(F::grad_dtype(g), grads.ptr[g], 0, block_total[g] * scale64);
                }
                return;
            }
            if (threadIdx.x == 0) {
                int i = 0;
#pragma unroll
                for (int g = 0; g < G; ++g)
                    if (F::summed(g) == kSummedOverAll) sums.partials[(long long)i++ * gridDim.x + blockIdx.x] = block_total[g];
                __threadfence();
                is_last = atomicAdd(sums.arrivals, 1u) == gridDim.x - 1;
            }
            __syncthreads();
            if (!is_last || threadIdx.x >= 32) return;
            __threadfence();
            int i = 0;
#pragma unroll
            for (int g = 0; g < G; ++g) {
                if (F::summed(g) != kSummedOverAll) continue;
                const double* p = sums.partials + (long long)i++ * gridDim.x;
                double total = 0.0;
                for (unsigned int b = threadIdx.x; b < gridDim.x; b += 32) total += __ldcg(p + b);
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) total += __shfl_down_sync(0xffffffffu, total, o);
                if (threadIdx.x == 0) store1<double>(F::grad_dtype(g), grads.ptr[g], 0, total * scale64);
            }
            if (threadIdx.x == 0) *sums.arrivals = 0u;
        }
    }
};

}  // namespace lj
