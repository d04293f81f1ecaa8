// ---- lossjit prelude: the fixed part of every generated kernel --------------------------------
// NVRTC compiles this with no system or CUDA headers: only builtins are used.
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

// ---- where results go: a sum for reductions, the output tensor for maps ----
struct SumSink {
    double acc = 0.0;  // float64 per thread: the result does not lose digits as the input grows
    template <int R>
    __device__ __forceinline__ void begin_row(const long long (&)[kMaxRank]) {}
    template <int VW>
    __device__ __forceinline__ void put(const float (&r)[VW], long long) {
        if (VW == 4) {
            // One float64 conversion per four elements: conversions run at 1/8 of the FP32 rate on
            // sm_90, and a float sum of four terms loses nothing the float64 total would keep.
            acc += (double)((r[0] + r[1]) + (r[2] + r[3]));
        } else {
#pragma unroll
            for (int j = 0; j < VW; ++j) acc += (double)r[j];
        }
    }
    template <int R>
    __device__ __forceinline__ void put_at(float r, const long long (&)[kMaxRank]) { acc += (double)r; }
};

// A reduction that also writes d value / d input for G inputs, scaled, where each element lives.
template <int G>
struct GradSink {
    Grads<G> grads;
    float scale;
    double acc = 0.0;
    long long row = 0;
    __device__ __forceinline__ explicit GradSink(const Grads<G>& g) : grads(g), scale(g.total_scale()) {}
    template <int R>
    __device__ __forceinline__ void begin_row(const long long (&c)[kMaxRank]) {
        row = offset<R - 1>(c, grads.strides);
    }
    template <int VW, class Result>
    __device__ __forceinline__ void put(const Result (&r)[VW], long long col) {
        if (VW == 4) {
            acc += (double)((r[0].value + r[1].value) + (r[2].value + r[3].value));
        } else {
#pragma unroll
            for (int j = 0; j < VW; ++j) acc += (double)r[j].value;
        }
#pragma unroll
        for (int g = 0; g < G; ++g) {
            float* at = grads.ptr[g] + row + col;
            if (VW == 4) {
                *reinterpret_cast<float4*>(at) = make_float4(scale * r[0].grad[g], scale * r[1].grad[g],
                                                             scale * r[2].grad[g], scale * r[3].grad[g]);
            } else {
#pragma unroll
                for (int j = 0; j < VW; ++j) at[j] = scale * r[j].grad[g];
            }
        }
    }
    template <int R, class Result>
    __device__ __forceinline__ void put_at(const Result& r, const long long (&c)[kMaxRank]) {
        acc += (double)r.value;
        const long long o = offset<R>(c, grads.strides);
#pragma unroll
        for (int g = 0; g < G; ++g) grads.ptr[g][o] = scale * r.grad[g];
    }
};

struct StoreSink {
    Output out;
    float* row = nullptr;
    template <int R>
    __device__ __forceinline__ void begin_row(const long long (&c)[kMaxRank]) {
        row = out.ptr + offset<R - 1>(c, out.strides);
    }
    template <int VW>
    __device__ __forceinline__ void put(const float (&r)[VW], long long col) {
        if (VW == 4) {
            *reinterpret_cast<float4*>(row + col) = make_float4(r[0], r[1], r[2], r[3]);
        } else {
#pragma unroll
            for (int j = 0; j < VW; ++j) row[col + j] = r[j];
        }
    }
    template <int R>
    __device__ __forceinline__ void put_at(float r, const long long (&c)[kMaxRank]) {
        out.ptr[offset<R>(c, out.strides)] = r;
    }
};

// ---- the loops -------------------------------------------------------------------------------
// Rows: every operand walks the innermost dimension with stride 1 (or 0: one value per row), so a
// tile of the row is read with VW-wide loads and index arithmetic happens once per tile, not per
// element. All UNROLL loads of a tile are issued before any arithmetic, to keep several in flight.
template <int BLOCK, int UNROLL, int VW, int R, class F, class Sink>
__device__ __forceinline__ void for_rows(const Extents& e, const Inputs<F::kInputs>& in, const F& f, Sink& sink) {
    constexpr int N = F::kInputs;
    constexpr int S = N > 0 ? N : 1;
    constexpr long long kTile = (long long)BLOCK * UNROLL * VW;
    const long long inner = e.dims[R - 1];
    if (inner == 0) return;
    const long long tiles_per_row = (inner + kTile - 1) / kTile;
    const long long tiles = (e.count / inner) * tiles_per_row;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        long long row = 0, col0 = t * kTile;
        if (R > 1) {
            row = t / tiles_per_row;
            col0 = (t - row * tiles_per_row) * kTile;
        }
        long long c[kMaxRank];
#pragma unroll
        for (int d = R - 2; d > 0; --d) {
            c[d] = row % e.dims[d];
            row /= e.dims[d];
        }
        c[0] = row;
        const float* base[S];
        float fixed[S];
#pragma unroll
        for (int k = 0; k < N; ++k) {
            base[k] = in.ptr[k] + offset<R - 1>(c, in.strides[k]);
            fixed[k] = F::inner_stride(k) == 0 ? __ldg(base[k]) : 0.0f;
        }
        sink.template begin_row<R>(c);

        float v[UNROLL][S][VW];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long col = col0 + ((long long)u * BLOCK + threadIdx.x) * VW;
            if (col < inner) {  // VW == 4 only when inner % 4 == 0
#pragma unroll
                for (int k = 0; k < N; ++k) {
                    if (F::inner_stride(k) == 0) {
#pragma unroll
                        for (int j = 0; j < VW; ++j) v[u][k][j] = fixed[k];
                    } else if (VW == 4) {
                        const float4 q = __ldg(reinterpret_cast<const float4*>(base[k] + col));
                        v[u][k][0] = q.x;
                        v[u][k][1] = q.y;
                        v[u][k][2] = q.z;
                        v[u][k][3] = q.w;
                    } else {
#pragma unroll
                        for (int j = 0; j < VW; ++j) v[u][k][j] = __ldg(base[k] + col + j);
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const long long col = col0 + ((long long)u * BLOCK + threadIdx.x) * VW;
            if (col < inner) {
                typename F::Result r[VW];
#pragma unroll
                for (int j = 0; j < VW; ++j) {
                    float x[S];
#pragma unroll
                    for (int k = 0; k < N; ++k) x[k] = v[u][k][j];
                    r[j] = f(x);
                }
                sink.template put<VW>(r, col);
            }
        }
    }
}

// Any strides: coordinates per element. Used only when some operand is not contiguous along the
// innermost dimension (a transposed view, say).
template <int BLOCK, int R, class F, class Sink>
__device__ __forceinline__ void for_each_strided(const Extents& e, const Inputs<F::kInputs>& in, const F& f,
                                                 Sink& sink) {
    constexpr int N = F::kInputs;
    constexpr int S = N > 0 ? N : 1;
    const long long step = (long long)gridDim.x * BLOCK;
    for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < e.count; i += step) {
        long long c[kMaxRank];
        coords<R>(e, i, c);
        float x[S];
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = __ldg(in.ptr[k] + offset<R>(c, in.strides[k]));
        sink.template put_at<R>(f(x), c);
    }
}

// Value and gradients where some gradients are summed over rows (F::summed(g): the input is one row
// broadcast over all the others, like a target vector or per-class weights). Each block takes a
// chunk of rows and walks it down one column strip at a time, BLOCK * VW columns wide, so a thread
// keeps its columns' sums in registers; UNROLL rows are loaded before any arithmetic. Full-shape
// gradients are stored as they are computed. Returns the thread's share of the value.
template <int BLOCK, int UNROLL, int VW, int R, class F>
__device__ __forceinline__ double for_columns(const Extents& e, const Inputs<F::kInputs>& in, const F& f,
                                              const Grads<F::kGrads>& grads, const ColumnScratch& s) {
    constexpr int N = F::kInputs;
    constexpr int S = N > 0 ? N : 1;
    constexpr int G = F::kGrads;
    constexpr long long kStrip = (long long)BLOCK * VW;
    __shared__ bool is_last;
    const float scale = grads.total_scale();
    const long long inner = e.dims[R - 1];
    const long long rows = inner > 0 ? e.count / inner : 0;
    const long long strips = (inner + kStrip - 1) / kStrip;
    const int chunk = blockIdx.x / s.strip_blocks;
    const long long r0 = chunk * s.chunk_rows;
    const long long r1 = r0 + s.chunk_rows < rows ? r0 + s.chunk_rows : rows;
    double acc = 0.0;
    for (long long strip = blockIdx.x % s.strip_blocks; strip < strips; strip += s.strip_blocks) {
        const long long col = strip * kStrip + (long long)threadIdx.x * VW;
        const bool active = col < inner;  // VW == 4 only when inner % 4 == 0
        double sums[G][VW];
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
            for (int j = 0; j < VW; ++j) sums[g][j] = 0.0;
        for (long long r = r0; active && r < r1; r += UNROLL) {
            float v[UNROLL][S][VW];
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
                    const float* base = in.ptr[k] + offset<R - 1>(c, in.strides[k]);
                    if (F::inner_stride(k) == 0) {
                        const float x = __ldg(base);
#pragma unroll
                        for (int j = 0; j < VW; ++j) v[u][k][j] = x;
                    } else if (VW == 4) {
                        const float4 q = __ldg(reinterpret_cast<const float4*>(base + col));
                        v[u][k][0] = q.x;
                        v[u][k][1] = q.y;
                        v[u][k][2] = q.z;
                        v[u][k][3] = q.w;
                    } else {
#pragma unroll
                        for (int j = 0; j < VW; ++j) v[u][k][j] = __ldg(base + col + j);
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                if (r + u >= r1) break;
                typename F::Result res[VW];
#pragma unroll
                for (int j = 0; j < VW; ++j) {
                    float x[S];
#pragma unroll
                    for (int k = 0; k < N; ++k) x[k] = v[u][k][j];
                    res[j] = f(x);
                }
                if (F::kReduces) {
                    if (VW == 4) acc += (double)((res[0].value + res[1].value) + (res[2].value + res[3].value));
                    else acc += (double)res[0].value;
                }
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    if (F::summed(g)) {
#pragma unroll
                        for (int j = 0; j < VW; ++j) sums[g][j] += (double)res[j].grad[g];
                    } else if (VW == 4) {
                        *reinterpret_cast<float4*>(grads.ptr[g] + grad_row[u] + col) =
                            make_float4(scale * res[0].grad[g], scale * res[1].grad[g], scale * res[2].grad[g],
                                        scale * res[3].grad[g]);
                    } else {
                        grads.ptr[g][grad_row[u] + col] = scale * res[0].grad[g];
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
                for (int j = 0; j < VW; ++j) s.partials[((long long)summed * s.chunks + chunk) * inner + col + j] = sums[g][j];
            }
            ++summed;
        }
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) is_last = atomicAdd(s.arrivals + strip, 1u) == (unsigned)s.chunks - 1;
        __syncthreads();
        if (is_last) {
            __threadfence();
            summed = 0;
#pragma unroll
            for (int g = 0; g < G; ++g) {
                if (!F::summed(g)) continue;
                if (active) {
#pragma unroll
                    for (int j = 0; j < VW; ++j) {
                        double total = 0.0;
                        for (int c = 0; c < s.chunks; ++c)
                            total += __ldcg(s.partials + ((long long)summed * s.chunks + c) * inner + col + j);
                        grads.ptr[g][col + j] = (float)(total * (double)scale);
                    }
                }
                ++summed;
            }
            if (threadIdx.x == 0) s.arrivals[strip] = 0u;
        }
        __syncthreads();  // is_last is rewritten for the next strip
    }
    return acc;
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

// Each block stores its partial sum; the last block to arrive adds the partials in block order
// (its first warp, lanes striding, then a fixed shuffle tree) and applies the scale. One launch,
// no float atomics, the same bits every run. A grid of one block (small inputs) skips all that.
// The scale is 1 / divisor, multiplied: a float64 division costs NVRTC more time than the rest of
// the finish, and the product differs from the quotient by at most an ulp of a double.
template <int kThreads, bool kOneBlock>
__device__ __forceinline__ void finish_reduction(double acc, const ReduceOut& out) {
    __shared__ double scratch[32];
    __shared__ bool is_last;
    const double block_total = block_sum<kThreads>(acc, scratch);
    if (kOneBlock) {
        if (threadIdx.x == 0) *out.result = (float)(block_total * out.scale);
        return;
    }
    if (threadIdx.x == 0) {
        out.partials[blockIdx.x] = block_total;
        __threadfence();
        const unsigned int arrived = atomicAdd(out.arrivals, 1u);
        is_last = arrived == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last || threadIdx.x >= 32) return;
    __threadfence();
    double total = 0.0;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += 32) total += __ldcg(out.partials + b);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) total += __shfl_down_sync(0xffffffffu, total, o);
    if (threadIdx.x == 0) {
        *out.result = (float)(total * out.scale);
        *out.arrivals = 0u;
    }
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
