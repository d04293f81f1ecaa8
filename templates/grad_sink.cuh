// ---- the fused gradient kernel's sink: the sum, and each gradient stored --------------------
namespace lj {

// A reduction that also writes d value / d input for each of F's gradients (each already scaled:
// the derivatives start from the element's seed_, upstream / divisor), in the gradient's type (F::grad_dtype): where each element lives, or summed where the input is broadcast
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
    __host__ __device__ static constexpr int summed_count(int kind) {
        int n = 0;
        for (int g = 0; g < G; ++g) n += F::summed(g) == kind;
        return n;
    }
    static constexpr bool kAlongRows = summed_count(kSummedAlongRows) > 0;
    static constexpr bool kOverAll = summed_count(kSummedOverAll) > 0;
    Grads<G> grads;
    SumScratch sums;
    double acc = 0.0;
    long long row = 0;
    double tile_sum[G];  // kSummedAlongRows: this thread's share of the run (a tile, or a whole row)
    double all_sum[G];   // kSummedOverAll: this thread's share of everything
    int parity = 0;      // kSummedAlongRows: which of end_tile's two buffers this run writes
    __device__ __forceinline__ explicit GradSink(const Grads<G>& g, const SumScratch& s = SumScratch{})
        : grads(g), sums(s) {
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
            T grad[VW];
#pragma unroll
            for (int j = 0; j < VW; ++j) grad[j] = r[j].grad[g];
            store_row<VW>(F::grad_dtype(g), grads.ptr[g], row + col, grad);
        }
    }
    template <int R, class Result>
    __device__ __forceinline__ void put_at(const Result& r, const long long (&c)[kMaxRank]) {
        acc += (double)r.value;
        const long long o = offset<R>(c, grads.strides);
#pragma unroll
        for (int g = 0; g < G; ++g) store1<T>(F::grad_dtype(g), grads.ptr[g], o, r.grad[g]);
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

    // The loop's order (rows.cuh): whole rows per block where the grid planned it.
    __device__ __forceinline__ bool whole_rows() const { return kAlongRows && sums.whole_rows != 0; }

    // After each tile, by every thread of the block: tile `tile` of `tiles_per_row`, in row `row_index`.
    // Gradients summed along rows are added per run: a whole row where the block takes whole rows
    // (its threads keep adding until the row's last tile), else a tile. One barrier per run: each
    // warp leaves its sums in shared memory (two buffers, by run parity) and only the first warp goes
    // on to add them, store the partial and count the arrival, so the other warps start the next
    // tile at once and the atomic's latency hides behind their loads. A buffer is written again two
    // runs later, after the next barrier, which the first warp reaches only once it has read it. (A
    // block barrier, a partial and an atomic per tile for every warp ran 44% of the floor on an
    // H200, squared hinge [32768, 32768] with t [32768, 1].)
    template <int BLOCK>
    __device__ __forceinline__ void end_tile(long long tile, long long row_index, long long tiles_per_row,
                                             long long tiles) {
        if constexpr (kAlongRows) {
            const bool whole = sums.whole_rows != 0;
            if (whole && tile != (row_index + 1) * tiles_per_row - 1) return;  // not the row's last tile
            constexpr int kWarps = BLOCK / 32;
            constexpr int kSummed = summed_count(kSummedAlongRows);
            __shared__ double warp_sums[2][kSummed][kWarps];
            const int lane = threadIdx.x & 31;
            const int warp = threadIdx.x >> 5;
            {
                int i = 0;
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    if (F::summed(g) != kSummedAlongRows) continue;
                    const double v = warp_sum(tile_sum[g]);
                    if (lane == 0) warp_sums[parity][i][warp] = v;
                    tile_sum[g] = 0.0;
                    ++i;
                }
            }
            __syncthreads();
            const int buffer = parity;
            parity ^= 1;
            if (warp != 0) return;
            double sum[kSummed];
#pragma unroll
            for (int i = 0; i < kSummed; ++i) {
                sum[i] = warp_sum(lane < kWarps ? warp_sums[buffer][i][lane] : 0.0);  // valid in lane 0
            }
            const long long element = row_index / sums.batch_rows;
            // Runs per element (rows or tiles), from element * per_element on; this run's index.
            const long long per_element = whole ? sums.batch_rows : sums.batch_rows * tiles_per_row;
            const long long runs = whole ? tiles / tiles_per_row : tiles;
            const long long this_run = whole ? row_index : tile;
            if (per_element == 1) {
                if (lane == 0) store_along_rows(element, sum);
                return;
            }
            // The partials after those of the gradients summed over everything.
            double* partials = sums.partials + (long long)gridDim.x * summed_count(kSummedOverAll);
            unsigned last = 0;
            if (lane == 0) {
#pragma unroll
                for (int i = 0; i < kSummed; ++i) partials[(long long)i * runs + this_run] = sum[i];
                last = arrive_last(sums.arrivals + 1 + element, (unsigned)per_element);
            }
            if (!__shfl_sync(0xffffffffu, last, 0)) return;
            see_partials();
            // The last of the element's runs: its partials in order, lanes striding, then a fixed
            // shuffle tree.
#pragma unroll
            for (int i = 0; i < kSummed; ++i) {
                const double* p = partials + (long long)i * runs + element * per_element;
                double total = 0.0;
                for (long long j = lane; j < per_element; j += 32) total += __ldcg(p + j);
                total = warp_sum(total);
                sum[i] = total;
            }
            if (lane == 0) {
                store_along_rows(element, sum);
                leave_arrivals_at_zero(sums.arrivals + 1 + element);
            }
        }
    }

    // Lane 0 of the first warp: the sums of the gradients summed along rows, at `element`.
    template <int N>
    __device__ __forceinline__ void store_along_rows(long long element, const double (&sum)[N]) const {
        int i = 0;
#pragma unroll
        for (int g = 0; g < G; ++g)
            if (F::summed(g) == kSummedAlongRows) store1<double>(F::grad_dtype(g), grads.ptr[g], element, sum[i++]);
    }

    // After the loop, by every thread: the gradients summed over everything.
    template <int BLOCK>
    __device__ __forceinline__ void finish_sums() {
        if constexpr (kOverAll) {
            __shared__ double scratch[32];
            __shared__ bool is_last;
            double block_total[G];
            block_sums<BLOCK>(kSummedOverAll, all_sum, block_total, scratch);
            if (gridDim.x == 1) {
                if (threadIdx.x == 0) {
#pragma unroll
                    for (int g = 0; g < G; ++g)
                        if (F::summed(g) == kSummedOverAll)
                            store1<double>(F::grad_dtype(g), grads.ptr[g], 0, block_total[g]);
                }
                return;
            }
            if (threadIdx.x == 0) {
                int i = 0;
#pragma unroll
                for (int g = 0; g < G; ++g)
                    if (F::summed(g) == kSummedOverAll) sums.partials[(long long)i++ * gridDim.x + blockIdx.x] = block_total[g];
                is_last = arrive_last(sums.arrivals, gridDim.x);
            }
            __syncthreads();
            if (!is_last || threadIdx.x >= 32) return;
            see_partials();
            int i = 0;
#pragma unroll
            for (int g = 0; g < G; ++g) {
                if (F::summed(g) != kSummedOverAll) continue;
                const double* p = sums.partials + (long long)i++ * gridDim.x;
                double total = 0.0;
                for (unsigned int b = threadIdx.x; b < gridDim.x; b += 32) total += __ldcg(p + b);
                total = warp_sum(total);
                if (threadIdx.x == 0) store1<double>(F::grad_dtype(g), grads.ptr[g], 0, total);
            }
            if (threadIdx.x == 0) leave_arrivals_at_zero(sums.arrivals);
        }
    }
};

}  // namespace lj
