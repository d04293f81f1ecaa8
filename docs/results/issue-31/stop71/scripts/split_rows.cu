// Round 230: cross-entropy's value + gradient over rows too long for one SM, split among S blocks
// that merge their partial logsumexps through global memory instead of a cluster's barrier.
//
// A group of S blocks takes a row; block k of the group keeps segment k of it in shared memory.
// SKEW rows are kept per block (slots): the walk that writes row i's gradient (read from slot i % SKEW)
// loads row i + SKEW into the same slot and reduces it, then publishes that row's partial (m, s) and
// bumps the row's arrival count. With SKEW = 2 a block waits for its peers' partials of row i that
// they published a whole walk before; with SKEW = 1 it waits for the walk its peers just finished
// (the cluster's schedule, without the cluster). The grid is resident (the blocks spin on the counts).
//
// Usage: split_rows N C [reps]   (prints the copy floor, a copy kernel, the reference and each variant)
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                   \
    do {                                                                        \
        cudaError_t e_ = (x);                                                   \
        if (e_ != cudaSuccess) {                                                \
            printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

struct Args {
    const float4* x;
    const long long* y;
    float4* g;
    float2* partials;  // [N][S]
    unsigned* counts;  // [N], S arrivals per launch
    double* loss;      // sum over rows of lse - x[y]
    long long N, C4;   // rows, float4s per row
    int S;
    unsigned epoch;    // launches so far, this one included
    float scale;       // 1 / N
};

struct MS {
    float m, s;
};

__device__ __forceinline__ MS combine(MS a, MS b) {
    if (a.m == -INFINITY) return b;
    if (b.m == -INFINITY) return a;
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ void add4(MS& a, float4 v) {
    const float mx = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
    if (mx > a.m) {
        a.s = (a.m == -INFINITY) ? 0.0f : a.s * expf(a.m - mx);
        a.m = mx;
    }
    a.s += expf(v.x - a.m) + expf(v.y - a.m) + expf(v.z - a.m) + expf(v.w - a.m);
}

__device__ __forceinline__ MS warp_combine(MS a) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        MS b{__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)};
        a = combine(a, b);
    }
    return a;
}

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

template <int T>
__device__ __forceinline__ void publish(const Args& a, MS part, long long row, int k, MS* warp_parts) {
    part = warp_combine(part);
    if ((threadIdx.x & 31) == 0) warp_parts[threadIdx.x >> 5] = part;
    __syncthreads();
    if (threadIdx.x < 32) {
        MS p = threadIdx.x < T / 32 ? warp_parts[threadIdx.x] : MS{-INFINITY, 0.0f};
        p = warp_combine(p);
        if (threadIdx.x == 0) {
            a.partials[row * a.S + k] = make_float2(p.m, p.s);
            __threadfence();
            atomicAdd(&a.counts[row], 1u);
        }
    }
}

template <int T, int U, int SKEW>
__global__ void __launch_bounds__(T) split_ce(Args a) {
    extern __shared__ float4 cache[];
    __shared__ MS warp_parts[T / 32];
    const int S = a.S;
    const int k = blockIdx.x % S;
    const long long group = blockIdx.x / S, groups = gridDim.x / S;
    const long long per = (a.C4 + S - 1) / S;  // float4s a segment (the last may be shorter)
    const long long begin = k * per, len = max(0LL, min(per, a.C4 - begin));
    const unsigned target = a.epoch * S;
    auto row_of = [&](long long i) { return group + i * groups; };

    // Prologue: the first SKEW rows into their slots.
    for (int p = 0; p < SKEW; ++p) {
        const long long r = row_of(p);
        if (r >= a.N) break;
        MS part{-INFINITY, 0.0f};
        const float4* xr = a.x + r * a.C4 + begin;
        float4* slot = cache + p * per;
        for (long long j = threadIdx.x; j < len; j += T * U) {
            float4 w[U];
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (j + u * T < len) w[u] = __ldg(xr + j + u * T);
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (j + u * T < len) {
                    slot[j + u * T] = w[u];
                    add4(part, w[u]);
                }
        }
        publish<T>(a, part, r, k, warp_parts);
        __syncthreads();  // warp 0 has read warp_parts before the next row's publish writes them
    }
    double loss = 0.0;
    for (long long i = 0;; ++i) {
        const long long r = row_of(i);
        if (r >= a.N) break;
        const long long y = a.y[r];
        if (threadIdx.x == 0)
            while (load_acquire(&a.counts[r]) < target) {
            }
        __syncthreads();
        MS total{-INFINITY, 0.0f};
        {
            const int lane = threadIdx.x & 31;
            MS mine{-INFINITY, 0.0f};
            for (int q = lane; q < S; q += 32) {
                const float2 p = __ldcg(a.partials + r * S + q);
                mine = combine(mine, MS{p.x, p.y});
            }
            total = warp_combine(mine);
        }
        const float lse = total.m + logf(total.s);
        const long long rn = row_of(i + SKEW);
        const bool refill = rn < a.N;
        float4* slot = cache + (i % SKEW) * per;
        const float4* xn = a.x + rn * a.C4 + begin;
        float4* gr = a.g + r * a.C4 + begin;
        const long long ycol = y - begin * 4;  // y's column in this segment, if it is here
        MS part{-INFINITY, 0.0f};
        const float sc = a.scale;
        for (long long j = threadIdx.x; j < len; j += T * U) {
            float4 w[U];
            if (refill) {
#pragma unroll
                for (int u = 0; u < U; ++u)
                    if (j + u * T < len) w[u] = __ldg(xn + j + u * T);
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const long long jj = j + u * T;
                if (jj < len) {
                    const float4 v = slot[jj];
                    float4 d;
                    d.x = sc * expf(v.x - lse);
                    d.y = sc * expf(v.y - lse);
                    d.z = sc * expf(v.z - lse);
                    d.w = sc * expf(v.w - lse);
                    const long long o = ycol - jj * 4;
                    if (o >= 0 && o < 4) {
                        const float xv = o == 0 ? v.x : o == 1 ? v.y : o == 2 ? v.z : v.w;
                        loss += (double)(lse - xv);
                        if (o == 0) d.x -= sc;
                        else if (o == 1) d.y -= sc;
                        else if (o == 2) d.z -= sc;
                        else d.w -= sc;
                    }
                    __stcs(gr + jj, d);
                }
            }
            if (refill) {
#pragma unroll
                for (int u = 0; u < U; ++u)
                    if (j + u * T < len) {
                        slot[j + u * T] = w[u];
                        add4(part, w[u]);
                    }
            }
        }
        if (refill) publish<T>(a, part, rn, k, warp_parts);
    }
    if (loss != 0.0) atomicAdd(a.loss, loss);
}

// L2: no row cache: the gradient's walk reads its row again from memory, two walks after the first
// read, while the last walks' reads and writes (the group's rows, about 4 x S x the segment x the
// groups bytes) have passed through L2.
// The same schedule (SKEW 2), with the merge looked up ahead: warp 0 reads the next row's partials in
// the middle of this row's walk (its peers published them a walk before), so that no block waits on
// global memory between walks; the next row's index is loaded a walk early too, and the block's
// combination of its partial takes one barrier a row (two buffers for the warps' parts, by parity).
template <int T, int U, bool L2 = false>
__global__ void __launch_bounds__(T) split_ce2(Args a) {
    extern __shared__ float4 cache[];
    __shared__ MS warp_parts[2][T / 32];
    __shared__ float lses[2];
    const int S = a.S;
    const int k = blockIdx.x % S;
    const long long group = blockIdx.x / S, groups = gridDim.x / S;
    const long long per = (a.C4 + S - 1) / S;
    const long long begin = k * per, len = max(0LL, min(per, a.C4 - begin));
    const unsigned target = a.epoch * S;
    auto row_of = [&](long long i) { return group + i * groups; };
    auto publish2 = [&](MS part, long long row, int parity) {
        part = warp_combine(part);
        if ((threadIdx.x & 31) == 0) warp_parts[parity][threadIdx.x >> 5] = part;
        __syncthreads();
        if (threadIdx.x < 32) {
            MS p = threadIdx.x < T / 32 ? warp_parts[parity][threadIdx.x] : MS{-INFINITY, 0.0f};
            p = warp_combine(p);
            if (threadIdx.x == 0 && row >= 0) {
                a.partials[row * a.S + k] = make_float2(p.m, p.s);
                __threadfence();
                atomicAdd(&a.counts[row], 1u);
            }
        }
    };
    // Warp 0: row's logsumexp from its S partials, into lses[parity].
    auto merge = [&](long long row, int parity) {
        if (threadIdx.x == 0)
            while (load_acquire(&a.counts[row]) < target) {
            }
        __syncwarp();
        MS mine{-INFINITY, 0.0f};
        for (int q = threadIdx.x; q < S; q += 32) {
            const float2 p = __ldcg(a.partials + row * S + q);
            mine = combine(mine, MS{p.x, p.y});
        }
        const MS total = warp_combine(mine);
        if (threadIdx.x == 0) lses[parity] = total.m + logf(total.s);
    };
    for (int p = 0; p < 2; ++p) {
        const long long r = row_of(p);
        if (r >= a.N) break;
        MS part{-INFINITY, 0.0f};
        const float4* xr = a.x + r * a.C4 + begin;
        float4* slot = cache + p * per;
        for (long long j = threadIdx.x; j < len; j += T * U) {
            float4 w[U];
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (j + u * T < len) w[u] = __ldg(xr + j + u * T);
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (j + u * T < len) {
                    if (!L2) slot[j + u * T] = w[u];
                    add4(part, w[u]);
                }
        }
        publish2(part, r, p);
    }
    if (threadIdx.x < 32 && row_of(0) < a.N) merge(row_of(0), 0);
    __syncthreads();
    double loss = 0.0;
    long long y = row_of(0) < a.N ? a.y[row_of(0)] : 0;
    for (long long i = 0;; ++i) {
        const long long r = row_of(i);
        if (r >= a.N) break;
        const int parity = (int)(i & 1);
        const float lse = lses[parity];
        const long long r1 = row_of(i + 1);
        const long long y_next = r1 < a.N ? a.y[r1] : 0;
        const long long rn = row_of(i + 2);
        const bool refill = rn < a.N;
        float4* slot = cache + parity * per;
        const float4* xn = a.x + rn * a.C4 + begin;
        const float4* xr = a.x + r * a.C4 + begin;
        float4* gr = a.g + r * a.C4 + begin;
        const long long ycol = y - begin * 4;
        MS part{-INFINITY, 0.0f};
        const float sc = a.scale;
        bool merged = false;
        for (long long j = threadIdx.x; j < len; j += T * U) {
            float4 w[U];
            if (refill) {
#pragma unroll
                for (int u = 0; u < U; ++u)
                    if (j + u * T < len) w[u] = __ldg(xn + j + u * T);
            }
            if (!merged && threadIdx.x < 32) {
                merged = true;
                if (r1 < a.N) merge(r1, parity ^ 1);
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const long long jj = j + u * T;
                if (jj < len) {
                    const float4 v = L2 ? __ldcg(xr + jj) : slot[jj];
                    float4 d;
                    d.x = sc * expf(v.x - lse);
                    d.y = sc * expf(v.y - lse);
                    d.z = sc * expf(v.z - lse);
                    d.w = sc * expf(v.w - lse);
                    const long long o = ycol - jj * 4;
                    if (o >= 0 && o < 4) {
                        const float xv = o == 0 ? v.x : o == 1 ? v.y : o == 2 ? v.z : v.w;
                        loss += (double)(lse - xv);
                        if (o == 0) d.x -= sc;
                        else if (o == 1) d.y -= sc;
                        else if (o == 2) d.z -= sc;
                        else d.w -= sc;
                    }
                    __stcs(gr + jj, d);
                }
            }
            if (refill) {
#pragma unroll
                for (int u = 0; u < U; ++u)
                    if (j + u * T < len) {
                        if (!L2) slot[j + u * T] = w[u];
                        add4(part, w[u]);
                    }
            }
        }
        if (!merged && threadIdx.x < 32 && r1 < a.N) merge(r1, parity ^ 1);  // (a segment shorter than the block)
        publish2(part, refill ? rn : -1, parity);  // its barrier also shows lses[parity ^ 1]
        y = y_next;
    }
    if (loss != 0.0) atomicAdd(a.loss, loss);
}

// Warp-specialized (v4): T threads walk the rows; one more warp does the group's merges, so that no
// walking thread waits on global memory or on another block. The walkers hand the block's partial of
// row i + 2 to the merge warp through shared memory and a named barrier they only arrive at (P); the
// merge warp publishes it (its own stores only, so its release waits for nothing else), then polls the
// next row's arrivals and leaves its logsumexp in shared memory behind another barrier (L), a walk
// before the walkers need it. Barriers alternate by parity so that neither side can lap the other.
__device__ __forceinline__ void bar_sync(int id, int count) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory"); }
__device__ __forceinline__ void bar_arrive(int id, int count) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory"); }
__device__ __forceinline__ void add_release(unsigned* p, unsigned v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

template <int T, int U>
__global__ void __launch_bounds__(T + 32) split_ce4(Args a) {
    extern __shared__ float4 cache[];
    __shared__ MS warp_parts[2][T / 32];
    __shared__ float lses[2];
    constexpr int kAll = T + 32;
    const int S = a.S;
    const int k = blockIdx.x % S;
    const long long group = blockIdx.x / S, groups = gridDim.x / S;
    const long long per = (a.C4 + S - 1) / S;
    const long long begin = k * per, len = max(0LL, min(per, a.C4 - begin));
    const unsigned target = a.epoch * S;
    auto row_of = [&](long long i) { return group + i * groups; };
    const long long n = a.N > group ? (a.N - group + groups - 1) / groups : 0;  // this group's rows
    if (threadIdx.x >= T) {  // the merge warp
        const int lane = threadIdx.x - T;
        auto publish = [&](long long w) {  // walk w's partial (of row w) after the walkers' arrival
            bar_sync(1 + (int)(w & 1), kAll);
            MS p = lane < T / 32 ? warp_parts[w & 1][lane] : MS{-INFINITY, 0.0f};
            p = warp_combine(p);
            if (lane == 0 && w < n) {
                const long long row = row_of(w);
                a.partials[row * a.S + k] = make_float2(p.m, p.s);
                add_release(&a.counts[row], 1u);
            }
        };
        auto merge = [&](long long i) {
            const long long row = row_of(i);
            if (lane == 0)
                while (load_acquire(&a.counts[row]) < target) {
                }
            __syncwarp();
            MS mine{-INFINITY, 0.0f};
            for (int q = lane; q < S; q += 32) {
                const float2 p = __ldcg(a.partials + row * S + q);
                mine = combine(mine, MS{p.x, p.y});
            }
            const MS total = warp_combine(mine);
            if (lane == 0) lses[i & 1] = total.m + logf(total.s);
            __syncwarp();
            bar_arrive(3 + (int)(i & 1), kAll);
        };
        for (long long w = 0; w < 2 && w < n; ++w) publish(w);
        if (n > 0) merge(0);
        for (long long i = 0; i < n; ++i) {
            if (i + 1 < n) merge(i + 1);
            publish(i + 2);  // (the walkers arrive at every walk's P, a last walk's with nothing to publish)
        }
        return;
    }
    const int warp = threadIdx.x >> 5;
    auto hand_over = [&](MS part, long long w) {
        part = warp_combine(part);
        if ((threadIdx.x & 31) == 0) warp_parts[w & 1][warp] = part;
        bar_arrive(1 + (int)(w & 1), kAll);
    };
    for (long long w = 0; w < 2 && w < n; ++w) {
        const long long r = row_of(w);
        MS part{-INFINITY, 0.0f};
        const float4* xr = a.x + r * a.C4 + begin;
        float4* slot = cache + w * per;
        for (long long j = threadIdx.x; j < len; j += T * U) {
            float4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (j + u * T < len) v[u] = __ldg(xr + j + u * T);
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (j + u * T < len) {
                    slot[j + u * T] = v[u];
                    add4(part, v[u]);
                }
        }
        hand_over(part, w);
    }
    double loss = 0.0;
    long long y = n > 0 ? a.y[row_of(0)] : 0;
    const float sc = a.scale;
    for (long long i = 0; i < n; ++i) {
        const long long r = row_of(i);
        const long long y_next = i + 1 < n ? a.y[row_of(i + 1)] : 0;
        const long long rn = row_of(i + 2);
        const bool refill = i + 2 < n;
        float4* slot = cache + (i & 1) * per;
        const float4* xn = a.x + rn * a.C4 + begin;
        float4* gr = a.g + r * a.C4 + begin;
        const long long ycol = y - begin * 4;
        MS part{-INFINITY, 0.0f};
        float4 w0[U];
        if (refill) {  // the first tile's loads go out before the wait for the logsumexp
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (threadIdx.x + u * T < len) w0[u] = __ldg(xn + threadIdx.x + u * T);
        }
        bar_sync(3 + (int)(i & 1), kAll);
        const float lse = lses[i & 1];
        for (long long j = threadIdx.x; j < len; j += T * U) {
            float4 w[U];
            if (refill) {
                if (j == threadIdx.x) {
#pragma unroll
                    for (int u = 0; u < U; ++u) w[u] = w0[u];
                } else {
#pragma unroll
                    for (int u = 0; u < U; ++u)
                        if (j + u * T < len) w[u] = __ldg(xn + j + u * T);
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const long long jj = j + u * T;
                if (jj < len) {
                    const float4 v = slot[jj];
                    float4 d;
                    d.x = sc * expf(v.x - lse);
                    d.y = sc * expf(v.y - lse);
                    d.z = sc * expf(v.z - lse);
                    d.w = sc * expf(v.w - lse);
                    const long long o = ycol - jj * 4;
                    if (o >= 0 && o < 4) {
                        const float xv = o == 0 ? v.x : o == 1 ? v.y : o == 2 ? v.z : v.w;
                        loss += (double)(lse - xv);
                        if (o == 0) d.x -= sc;
                        else if (o == 1) d.y -= sc;
                        else if (o == 2) d.z -= sc;
                        else d.w -= sc;
                    }
                    __stcs(gr + jj, d);
                }
            }
            if (refill) {
#pragma unroll
                for (int u = 0; u < U; ++u)
                    if (j + u * T < len) {
                        slot[j + u * T] = w[u];
                        add4(part, w[u]);
                    }
            }
        }
        hand_over(part, i + 2);
        y = y_next;
    }
    if (loss != 0.0) atomicAdd(a.loss, loss);
}

// The reference: a block a row, float64 sums.
__global__ void reference_ce(const float* x, const long long* y, float* g, double* loss, long long N, long long C) {
    __shared__ double red[32];
    __shared__ double bcast;
    const long long r = blockIdx.x;
    const float* xr = x + r * C;
    double m = -INFINITY;
    for (long long j = threadIdx.x; j < C; j += blockDim.x) m = fmax(m, (double)xr[j]);
    for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = -INFINITY;
        for (int w = 0; w < (int)blockDim.x / 32; ++w) t = fmax(t, red[w]);
        bcast = t;
    }
    __syncthreads();
    m = bcast;
    __syncthreads();
    double s = 0;
    for (long long j = threadIdx.x; j < C; j += blockDim.x) s += exp((double)xr[j] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0;
        for (int w = 0; w < (int)blockDim.x / 32; ++w) t += red[w];
        bcast = m + log(t);
        atomicAdd(loss, bcast - (double)xr[y[r]]);
    }
    __syncthreads();
    const double lse = bcast;
    for (long long j = threadIdx.x; j < C; j += blockDim.x)
        g[r * C + j] = (float)((exp((double)xr[j] - lse) - (j == y[r] ? 1.0 : 0.0)) / (double)N);
}

__global__ void fill(float* x, long long* y, long long N, long long C) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < N * C; i += (long long)gridDim.x * blockDim.x) {
        unsigned long long h = (unsigned long long)i * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 32;
        x[i] = (float)(h & 0xFFFFFF) / 16777216.0f * 8.0f - 4.0f;
        if (i < N) y[i] = (long long)((h >> 24) % (unsigned long long)C);
    }
}

__global__ void max_abs_diff(const float* a, const float* b, long long n, unsigned* out) {
    float m = 0.0f;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        m = fmaxf(m, fabsf(a[i] - b[i]));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) atomicMax(out, __float_as_uint(m));  // non-negative floats order as their bits
}

__global__ void copy_kernel(const float4* __restrict__ a, float4* __restrict__ b, long long n4) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x)
        __stcs(b + i, __ldg(a + i));
}

struct Timer {
    cudaEvent_t a, b;
    Timer() {
        cudaEventCreate(&a);
        cudaEventCreate(&b);
    }
    template <class F>
    float median(int reps, F f) {
        std::vector<float> ts;
        for (int r = 0; r < reps + 2; ++r) {
            cudaEventRecord(a);
            f();
            cudaEventRecord(b);
            CK(cudaEventSynchronize(b));
            float ms;
            cudaEventElapsedTime(&ms, a, b);
            if (r >= 2) ts.push_back(ms);
        }
        std::sort(ts.begin(), ts.end());
        return ts[ts.size() / 2];
    }
};

struct Variant {
    const char* name;
    void (*kernel)(Args);
    int threads, S, skew;
    bool l2 = false;  // no row cache
    int extra = 0;    // threads that do not walk (v4's merge warp)
};

int main(int argc, char** argv) {
    const long long N = argc > 1 ? atoll(argv[1]) : 4096, C = argc > 2 ? atoll(argv[2]) : 131072;
    const int reps = argc > 3 ? atoi(argv[3]) : 20;
    if (C % 4) {
        printf("C must be a multiple of 4\n");
        return 1;
    }
    const size_t elems = (size_t)N * C;
    float *x, *g, *gref;
    long long* y;
    float2* partials;
    unsigned* counts;
    double *loss, *loss_ref;
    CK(cudaMalloc(&x, elems * 4));
    CK(cudaMalloc(&g, elems * 4));
    CK(cudaMalloc(&gref, elems * 4));
    CK(cudaMalloc(&y, N * 8));
    CK(cudaMalloc(&partials, N * 64 * sizeof(float2)));
    CK(cudaMalloc(&counts, N * 4));
    CK(cudaMalloc(&loss, 8));
    CK(cudaMalloc(&loss_ref, 8));
    CK(cudaMemset(counts, 0, N * 4));
    fill<<<1024, 256>>>(x, y, N, C);
    {
        const long long last = C - 1;  // row 0 takes the last column, in the last (shorter) segment
        CK(cudaMemcpy(y, &last, 8, cudaMemcpyHostToDevice));
    }
    unsigned* diff;
    CK(cudaMalloc(&diff, 4));
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    Timer timer;
    CK(cudaMemset(loss_ref, 0, 8));
    reference_ce<<<N, 512>>>(x, y, gref, loss_ref, N, C);
    CK(cudaDeviceSynchronize());
    double ref_loss;
    CK(cudaMemcpy(&ref_loss, loss_ref, 8, cudaMemcpyDeviceToHost));
    const Variant variants[] = {
        {"1024x2 S=4 skew 1", split_ce<1024, 2, 1>, 1024, 4, 1},
        {"v2 256x4 S=16", split_ce2<256, 4>, 256, 16, 2},
        {"v2 512x4 S=4", split_ce2<512, 4>, 512, 4, 2},
        {"v2 1024x2 S=8", split_ce2<1024, 2>, 1024, 8, 2},
        {"v4 992x2 S=8", split_ce4<992, 2>, 992, 8, 2, false, 32},
        {"v4 992x2 S=4", split_ce4<992, 2>, 992, 4, 2, false, 32},
        {"v4 512x4 S=8", split_ce4<512, 4>, 512, 8, 2, false, 32},
        {"v4 512x4 S=16", split_ce4<512, 4>, 512, 16, 2, false, 32},
        {"v4 512x4 S=4", split_ce4<512, 4>, 512, 4, 2, false, 32},
        {"v4 512x4 S=2", split_ce4<512, 4>, 512, 2, 2, false, 32},
        {"v4 256x4 S=16", split_ce4<256, 4>, 256, 16, 2, false, 32},
        {"v4 256x4 S=32", split_ce4<256, 4>, 256, 32, 2, false, 32},
        {"v4 256x8 S=16", split_ce4<256, 8>, 256, 16, 2, false, 32},
        {"v4 512x2 S=8", split_ce4<512, 2>, 512, 8, 2, false, 32},
        {"v4 992x4 S=8", split_ce4<992, 4>, 992, 8, 2, false, 32},
        {"v4 512x4 S=12", split_ce4<512, 4>, 512, 12, 2, false, 32},
        {"v4 256x4 S=24", split_ce4<256, 4>, 256, 24, 2, false, 32},
    };
    unsigned epoch = 0;
    for (int round = 0; round < 1; ++round) {
        const float copy = timer.median(reps, [&] { cudaMemcpyAsync(g, x, elems * 4, cudaMemcpyDeviceToDevice); });
        const float kcopy = timer.median(reps, [&] { copy_kernel<<<sms * 4, 512>>>((const float4*)x, (float4*)g, elems / 4); });
        printf("N=%lld C=%lld round %d: cudaMemcpy %.3f ms (%.0f GB/s); copy kernel %.3f ms (%.1f%%); reference loss %.9f\n", N, C, round,
               copy, 2.0 * elems * 4 / copy / 1e6, kcopy, 100 * copy / kcopy, ref_loss / N);
        for (const Variant& v : variants) {
            const long long C4 = C / 4;
            const long long per = (C4 + v.S - 1) / v.S;
            const size_t smem = v.l2 ? 0 : (size_t)v.skew * per * 16;
            if (smem > 227 * 1024) {
                printf("  %-22s needs %zu KB of shared memory: skipped\n", v.name, smem / 1024);
                continue;
            }
            CK(cudaFuncSetAttribute(v.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            int occ = 0;
            CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, v.kernel, v.threads + v.extra, smem));
            const int grid = (occ * sms / v.S) * v.S;
            if (grid == 0) {
                printf("  %-22s no resident group: skipped\n", v.name);
                continue;
            }
            Args a{(const float4*)x, y, (float4*)g, partials, counts, loss, N, C4, v.S, 0, 1.0f / N};
            CK(cudaMemset(g, 0, elems * 4));
            auto launch = [&] {
                a.epoch = ++epoch;
                v.kernel<<<grid, v.threads + v.extra, smem>>>(a);
            };
            // The counts rise by S a launch: start them again where S changes.
            CK(cudaMemset(counts, 0, N * 4));
            CK(cudaMemset(loss, 0, 8));
            epoch = 0;
            launch();
            CK(cudaDeviceSynchronize());
            double got;
            CK(cudaMemcpy(&got, loss, 8, cudaMemcpyDeviceToHost));
            CK(cudaMemset(diff, 0, 4));
            max_abs_diff<<<1024, 256>>>(g, gref, (long long)elems, diff);
            unsigned bits;
            CK(cudaMemcpy(&bits, diff, 4, cudaMemcpyDeviceToHost));
            float maxd;
            memcpy(&maxd, &bits, 4);
            const float t = timer.median(reps, launch);
            printf("  %-22s grid %4d (%d an SM) smem %3zu KB: %.3f ms %5.1f%% of the copy; loss rel err %.1e, grad max abs err %.1e\n",
                   v.name, grid, occ, smem / 1024, t, 100 * copy / t, std::fabs(got - ref_loss) / std::fabs(ref_loss), maxd);
        }
    }
    return 0;
}
