// ---- the columns loop (gradients summed over rows) ------------------------------------------
namespace lj {

// Value and gradients where some gradients are summed over rows (F::summed(g): the input is one row
// broadcast over all the others, like a target vector or per-class weights, or one row per batch of
// rows, [N, 1, C] against [N, M, C]). Each block takes a chunk of one batch's rows and walks it down
// one column strip at a time, BLOCK * VW columns wide, so a thread keeps its columns' sums in
// registers; UNROLL rows are loaded before any arithmetic. Full-shape gradients are stored as they
// are computed. Returns the thread's share of the value.
template <int BLOCK, int UNROLL, int VW, int R, class F>
__device__ __forceinline__ double for_columns(const Extents& e, const Inputs<F::kInputs>& in, const F& f,
                                              const Grads<F::kGrads>& grads, const SumScratch& s) {
    using T = typename F::Value;
    constexpr int N = F::kInputs;
    constexpr int S = N > 0 ? N : 1;
    constexpr int G = F::kGrads;
    constexpr long long kStrip = (long long)BLOCK * VW;
    __shared__ bool is_last;
    const long long inner = e.dims[R - 1];
    const long long strips = (inner + kStrip - 1) / kStrip;
    const long long batches = s.batch_rows > 0 && inner > 0 ? e.count / inner / s.batch_rows : 1;
    const long long all_chunks = (long long)s.chunks * batches;
    // Work items: a chunk of one batch's rows and the first of its strips; the grid (at most one
    // resident grid: the value's partials are one per block) takes them in turn.
    const long long items = all_chunks * s.strip_blocks;
    double acc = 0.0;
    for (long long item = blockIdx.x; item < items; item += gridDim.x) {
        const long long chunk = item / s.strip_blocks;  // of all batches: batch * s.chunks + chunk in the batch
        const long long batch = chunk / s.chunks;
        const long long batch_end = (batch + 1) * s.batch_rows;
        const long long r0 = batch * s.batch_rows + (chunk - batch * s.chunks) * s.chunk_rows;
        const long long r1 = r0 + s.chunk_rows < batch_end ? r0 + s.chunk_rows : batch_end;
        for (long long strip = item % s.strip_blocks; strip < strips; strip += s.strip_blocks) {
            const long long col = strip * kStrip + (long long)threadIdx.x * VW;
            const bool active = col < inner && s.batch_rows > 0;  // VW > 1 only when inner % VW == 0
            double sums[G][VW];
#pragma unroll
            for (int g = 0; g < G; ++g)
#pragma unroll
                for (int j = 0; j < VW; ++j) sums[g][j] = 0.0;
            // Operands that repeat every row (F::same_every_row: t [C] against p [N, C]) are loaded
            // once per strip and kept in registers: UNROLL times fewer loads and registers for them.
            T kept[S][VW];
#pragma unroll
            for (int k = 0; k < N; ++k)
                if (F::same_every_row(k) && active) load_row<VW>(F::dtype(k), in.ptr[k], col, kept[k]);
            for (long long r = r0; active && r < r1; r += UNROLL) {
                T v[UNROLL][S][VW];
                long long grad_row[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    if (r + u >= r1) break;
                    long long c[kMaxRank], row = r + u;
#pragma unroll
                    for (int d = R - 2; d > 0; --d) {
                        c[d] = row % e.dims[d];
                        row /= e.dims[d];
                    }
                    c[0] = row;
                    grad_row[u] = offset<R - 1>(c, grads.strides);
#pragma unroll
                    for (int k = 0; k < N; ++k) {
                        if (F::same_every_row(k)) continue;
                        const long long base = offset<R - 1>(c, in.strides[k]);
                        if (F::inner_stride(k) == 0) {
                            const T x = load1<T>(F::dtype(k), in.ptr[k], base);
#pragma unroll
                            for (int j = 0; j < VW; ++j) v[u][k][j] = x;
                        } else {
                            load_row<VW>(F::dtype(k), in.ptr[k], base + col, v[u][k]);
                        }
                    }
                }
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) {
                    if (r + u >= r1) break;
                    typename F::Result res[VW];
#pragma unroll
                    for (int j = 0; j < VW; ++j) {
                        T x[S];
#pragma unroll
                        for (int k = 0; k < N; ++k) x[k] = F::same_every_row(k) ? kept[k][j] : v[u][k][j];
                        res[j] = f(x);
                    }
                    if (F::kReduces) {
                        if (VW % 4 == 0) {
#pragma unroll
                            for (int q = 0; q < VW; q += 4)
                                acc += (double)((res[q].value + res[q + 1].value) + (res[q + 2].value + res[q + 3].value));
                        } else {
                            acc += (double)res[0].value;
                        }
                    }
#pragma unroll
                    for (int g = 0; g < G; ++g) {
                        if (F::summed(g)) {
#pragma unroll
                            for (int j = 0; j < VW; ++j) sums[g][j] += (double)res[j].grad[g];
                        } else {
                            T grad[VW];
#pragma unroll
                            for (int j = 0; j < VW; ++j) grad[j] = res[j].grad[g];
                            store_row<VW>(F::grad_dtype(g), grads.ptr[g], grad_row[u] + col, grad);
                        }
                    }
                }
            }
            // This chunk's column sums, then the strip's last block adds all chunks in chunk order.
            int summed = 0;
#pragma unroll
            for (int g = 0; g < G; ++g) {
                if (!F::summed(g)) continue;
                if (active) {
#pragma unroll
                    for (int j = 0; j < VW; ++j) s.partials[((long long)summed * all_chunks + chunk) * inner + col + j] = sums[g][j];
                }
                ++summed;
            }
            __threadfence();  // every thread wrote partials of its own
            __syncthreads();
            unsigned int* arrivals = s.arrivals + batch * strips + strip;
            if (threadIdx.x == 0) is_last = arrive_last(arrivals, (unsigned)s.chunks);
            __syncthreads();
            if (is_last) {
                see_partials();
                summed = 0;
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    if (!F::summed(g)) continue;
                    if (active) {
#pragma unroll
                        for (int j = 0; j < VW; ++j) {
                            double total = 0.0;
                            const long long first = batch * s.chunks;
                            for (long long c = first; c < first + s.chunks; ++c)
                                total += __ldcg(s.partials + ((long long)summed * all_chunks + c) * inner + col + j);
                            store1<double>(F::grad_dtype(g), grads.ptr[g], batch * inner + col + j, total);
                        }
                    }
                    ++summed;
                }
                if (threadIdx.x == 0) leave_arrivals_at_zero(arrivals);
            }
            __syncthreads();  // is_last is rewritten for the next strip
        }
    }
    return acc;
}

}  // namespace lj
