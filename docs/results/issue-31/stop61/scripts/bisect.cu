// Round 187's bisection (prepared at stop 61, for the next H200): stop 60's (../../stop60/scripts/
// bisect.cu, round 182) with its output line-buffered, the gradient compared with A's in the first of
// the three rounds only (round 182's 16384 x 32768 outlived its limit copying 4 GB a variant), and the
// variants stop 61 asks about: bit 1 (the row's index and take at its start) is what stop 61's
// printer fixed (the take by its lane: P6), so every other bit on top of 4 (a partial last tile's
// branch, which the printed kernel needs), and all of them but bit 1.
// Stop 60's header follows.
//'s harness (prepared at stop 60, for the next H200): where the printed walk ahead (P0,
// 84-85% of the copy rate for the fused cross-entropy 16384 x 32768) loses to the hand-written
// schedule C (93-95%). Round 180 ruled out registers (the printed kernel without its last-tile path
// needs 64, as C does, and is slower: 81-82%), round 181 the run-time strides and the cache's column
// checks (removing them from P0: 83-84%, 82%). Here C is the base and each bit of F adds one thing
// the printed kernel does and C does not:
//   1  the row's index loaded at its own start, its take x[row, y] loaded from memory then
//      (C: the index a row ahead, the take picked out of the walk into shared memory)
//   2  the gradient walk loads the tile's U vectors from the cache first, then works (C: per vector)
//   4  the loop takes every tile, a partial last one in a branch of its own (C: whole tiles only)
//   8  addresses through run-time strides (x's inner stride, the gradient's along_row)
//   16 the row's total added by lane 0 into a team slot in shared memory (C: thread 0's register)
//   32 each tile checks that the cache holds it, else loads from memory (C: the whole row cached)
//   64 the row after next's base computed at the row's start and held (C: at the walk's end)
// Build: nvcc -O3 -arch=sm_90 -std=c++17 -DLJ_NVCC_DEVICE -Xcompiler -fpermissive -o bisect bisect.cu
// with ce_emitted.cuh (the printed copies kernel, `lossjit emit ... --gpu h200`, as build_harness.sh
// prints it) beside it. Run: ./bisect N C (C a multiple of 16384 for the variants without bit 4).
#include "ce_emitted.cuh"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

template <int U, int F>
__global__ void __launch_bounds__(1024) bisect_kernel(const lj::Extents extents, const lj::Inputs<2> in, const lj::RowsOut out,
                                                      const lj::Grads<1> grads) {
    constexpr bool kTakeAtRow = F & 1, kTwoLoops = F & 2, kPartial = F & 4, kStrides = F & 8, kSharedTotals = F & 16,
                   kCacheChecks = F & 32, kAfterNextAtStart = F & 64;
    using Team = lj::Team<1024, 1024>;
    using Value = float;
    constexpr int VW = 4;
    constexpr long long kTile = (long long)U * 1024 * VW;
    const long long C = extents.dims[1], rows = extents.dims[0];
    const float* x = static_cast<const float*>(in.ptr[0]);
    const long long* y = static_cast<const long long*>(in.ptr[1]);
    float* g = static_cast<float*>(grads.ptr[0]);
    const long long xs = kStrides ? in.strides[0][1] : 1, gs = kStrides ? grads.strides[1] : 1;
    const long long cache_columns = C;  // what the cache holds (bit 32 checks against it)
    const Value seed = (Value)grads.total_scale(0);
    Value* cache = lj::row_cache<Value>();
    __shared__ float takes[2];
    __shared__ double team_total[1];
    if (kSharedTotals) {
        if (threadIdx.x == 0) team_total[0] = 0.0;
        __syncthreads();
    }
    double totals[1] = {0.0};
    long long row = blockIdx.x;
    const long long G = gridDim.x;
    lj::LogSumExpAcc<Value> a;
    long long iy = 0;
    Value w[U][VW];
    // A row's walk that reads the cache, writes the gradient and, where `refill`, reads the next row
    // from memory into the cache and its accumulator b.
    if (row < rows) {
        if (!kTakeAtRow) iy = y[row];
        const float* xr = x + row * C;
        for (long long j0 = threadIdx.x * VW; j0 < C; j0 += kTile) {
            Value v[U][VW];
            const int ty = lj::offset_in_tile(iy, j0, kTile);
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (!kPartial || j0 + u * 1024LL * VW < C) lj::load_row<VW>(lj::kFloat32, xr, (j0 + u * 1024LL * VW) * xs, v[u]);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (kPartial && j0 + u * 1024LL * VW >= C) continue;
                lj::cache_store<VW>(cache + j0 + u * 1024LL * VW, v[u]);
                if (!kTakeAtRow)
#pragma unroll
                    for (int q = 0; q < VW; ++q)
                        if (ty == u * 1024 * VW + q) takes[0] = v[u][q];
            }
            if (!kPartial || j0 + kTile - 1024LL * VW < C) lj::add_tile<(long long)1024 * VW>(a, v, j0);
            else
#pragma unroll
                for (int u = 0; u < U; ++u)
                    if (j0 + u * 1024LL * VW < C) lj::add_group(a, v[u], j0 + u * 1024LL * VW, 0);
        }
        if (row + G < rows && threadIdx.x * VW + kTile - 1024LL * VW < C) {
#pragma unroll
            for (int u = 0; u < U; ++u) lj::load_row<VW>(lj::kFloat32, x + (row + G) * C, (threadIdx.x * VW + u * 1024LL * VW) * xs, w[u]);
        }
    }
    int parity = 0;
    for (; row < rows; row += G) {
        const long long next = row + G;
        const bool refill = next < rows;
        long long after_base = 0;
        if (kAfterNextAtStart) after_base = (next + G) * C;
        float take_mem = 0.0f;
        if (kTakeAtRow) {
            iy = y[row];
            if (iy >= 0 && iy < C) take_mem = x[row * C + iy * xs];
        }
        a = Team::all_reduce(a);
        const Value lse = a.value();
        const float take = kTakeAtRow ? take_mem : takes[parity];
        long long iy_next = (!kTakeAtRow && refill) ? y[next] : -1;
        lj::LogSumExpAcc<Value> b;
        const float* xn = x + next * C;
        float* gr = g + row * C * gs;
        for (long long j0 = threadIdx.x * VW; j0 < C; j0 += kTile) {
            const int ty = lj::offset_in_tile(iy, j0, kTile);
            if (!kPartial || j0 + kTile - 1024LL * VW < C) {  // a whole tile
                if (refill && j0 != threadIdx.x * VW) {
#pragma unroll
                    for (int u = 0; u < U; ++u) lj::load_row<VW>(lj::kFloat32, xn, (j0 + u * 1024LL * VW) * xs, w[u]);
                }
                Value vs[U][VW];
                if (kTwoLoops) {
                    if (!kCacheChecks || j0 + kTile - 1024LL * VW < cache_columns) {
#pragma unroll
                        for (int u = 0; u < U; ++u) lj::cache_load<VW>(cache + j0 + u * 1024LL * VW, vs[u]);
                    } else {
#pragma unroll
                        for (int u = 0; u < U; ++u) {
                            const long long j = j0 + u * 1024LL * VW;
                            if (j < cache_columns) lj::cache_load<VW>(cache + j, vs[u]);
                            else lj::load_row<VW>(lj::kFloat32, x + row * C, j * xs, vs[u]);
                        }
                    }
                }
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    Value v[VW], rg[VW];
                    if (kTwoLoops) {
#pragma unroll
                        for (int q = 0; q < VW; ++q) v[q] = vs[u][q];
                    } else if (kCacheChecks && j0 + u * 1024LL * VW >= cache_columns) {
                        lj::load_row<VW>(lj::kFloat32, x + row * C, (j0 + u * 1024LL * VW) * xs, v);
                    } else {
                        lj::cache_load<VW>(cache + j0 + u * 1024LL * VW, v);
                    }
#pragma unroll
                    for (int q = 0; q < VW; ++q) rg[q] = (ty == u * 1024 * VW + q ? -seed : 0.0f) + seed * exp(v[q] - lse);
                    lj::store_row<VW>(lj::kFloat32, gr, (j0 + u * 1024LL * VW) * gs, rg);
                }
                if (refill) {
                    const int tn = lj::offset_in_tile(iy_next, j0, kTile);
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        if (!kCacheChecks || j0 + u * 1024LL * VW < cache_columns) lj::cache_store<VW>(cache + j0 + u * 1024LL * VW, w[u]);
                        if (!kTakeAtRow)
#pragma unroll
                            for (int q = 0; q < VW; ++q)
                                if (tn == u * 1024 * VW + q) takes[parity ^ 1] = w[u][q];
                    }
                    lj::add_tile<(long long)1024 * VW>(b, w, j0);
                }
            } else if (kPartial) {  // the last tile, in part (as printed: per-vector guards)
                Value v[U][VW];
#pragma unroll
                for (int u = 0; u < U; ++u)
                    if (j0 + u * 1024LL * VW < C) lj::cache_load<VW>(cache + j0 + u * 1024LL * VW, v[u]);
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const long long j = j0 + u * 1024LL * VW;
                    if (j >= C) continue;
                    Value rg[VW];
#pragma unroll
                    for (int q = 0; q < VW; ++q) rg[q] = (ty == u * 1024 * VW + q ? -seed : 0.0f) + seed * exp(v[u][q] - lse);
                    lj::store_row<VW>(lj::kFloat32, gr, j * gs, rg);
                }
                if (refill) {
#pragma unroll
                    for (int u = 0; u < U; ++u)
                        if (j0 + u * 1024LL * VW < C) lj::load_row<VW>(lj::kFloat32, xn, (j0 + u * 1024LL * VW) * xs, w[u]);
                    const int tn = lj::offset_in_tile(iy_next, j0, kTile);
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        const long long j = j0 + u * 1024LL * VW;
                        if (j >= C) continue;
                        lj::cache_store<VW>(cache + j, w[u]);
                        if (!kTakeAtRow)
#pragma unroll
                            for (int q = 0; q < VW; ++q)
                                if (tn == u * 1024 * VW + q) takes[parity ^ 1] = w[u][q];
                        lj::add_group(b, w[u], j, 0);
                    }
                }
            }
        }
        if (next + G < rows && threadIdx.x * VW + kTile - 1024LL * VW < C) {  // the row after next's first tile
            const float* xa = x + (kAfterNextAtStart ? after_base : (next + G) * C);
#pragma unroll
            for (int u = 0; u < U; ++u) lj::load_row<VW>(lj::kFloat32, xa, (threadIdx.x * VW + u * 1024LL * VW) * xs, w[u]);
        }
        if (kSharedTotals) {
            if (threadIdx.x == 0) team_total[0] += (double)(lse - take);
        } else if (threadIdx.x == 0) {
            totals[0] += (double)(lse - take);
        }
        a = b;
        iy = iy_next;
        parity ^= 1;
    }
    if (kSharedTotals) {
        __syncthreads();
        if (threadIdx.x == 0) totals[0] += team_total[0];
    }
    lj::finish_totals<1024, 1, 1, false, lj::kFloat32>(totals, out, [&](const double (&t)[1], double (&r)[1]) { r[0] = t[0]; });
}

#define CK(x)                                                                  \
    do {                                                                       \
        cudaError_t e_ = (x);                                                  \
        if (e_ != cudaSuccess) {                                               \
            printf("%s: %s\n", #x, cudaGetErrorString(e_));                    \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

template <class K>
float time_kernel(K kernel, int grid, size_t smem, const lj::Extents& ex, const lj::Inputs<2>& in, const lj::RowsOut& out,
                  const lj::Grads<1>& gr, int reps) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<float> all;
    for (int r = 0; r < reps + 2; ++r) {
        cudaEventRecord(a);
        kernel<<<grid, 1024, smem>>>(ex, in, out, gr);
        cudaEventRecord(b);
        CK(cudaEventSynchronize(b));
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (r >= 2) all.push_back(ms);
    }
    std::sort(all.begin(), all.end());
    return all[all.size() / 2];
}

template <int F>
void run(const char* name, int sms, size_t smem, const lj::Extents& ex, const lj::Inputs<2>& in, const lj::RowsOut& out,
         lj::Grads<1> gr, float* gb, const float* ga, size_t elems, float copy, int reps) {
    if (!(F & 4) && ex.dims[1] % 16384 != 0) return;  // whole tiles only
    static int runs = 0;  // the gradient is compared with A's in the first round only
    gr.ptr[0] = gb;
    CK(cudaMemset(gb, 0, elems * 4));
    const float t = time_kernel(bisect_kernel<4, F>, sms, smem, ex, in, out, gr, reps);
    float r;
    CK(cudaMemcpy(&r, out.result, 4, cudaMemcpyDeviceToHost));
    double maxd = -1;  // (not compared)
    if (runs++ == 0) {
        std::vector<float> h1(elems), h2(elems);
        CK(cudaMemcpy(h1.data(), ga, elems * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h2.data(), gb, elems * 4, cudaMemcpyDeviceToHost));
        maxd = 0;
        for (size_t i = 0; i < elems; ++i) maxd = std::max(maxd, (double)std::fabs(h1[i] - h2[i]));
    }
    printf("   F=%-3d %-52s %.3f ms %.1f%% (loss %.6f) grad max abs diff vs A %.3e\n", F, name, t, 100 * copy / t, r, maxd);
}

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    const long long N = argc > 1 ? atoll(argv[1]) : 16384, C = argc > 2 ? atoll(argv[2]) : 32768;
    const int reps = 20;
    const size_t elems = (size_t)N * C;
    std::vector<float> hx(elems);
    std::vector<long long> hy(N);
    srand(1);
    for (size_t i = 0; i < elems; ++i) hx[i] = (float)rand() / RAND_MAX * 8.0f - 4.0f;
    for (long long i = 0; i < N; ++i) hy[i] = rand() % C;
    float *x, *ga, *gb, *ca, *cb, *res;
    long long* y;
    double* partials;
    unsigned* arrivals;
    CK(cudaMalloc(&x, elems * 4));
    CK(cudaMalloc(&ga, elems * 4));
    CK(cudaMalloc(&gb, elems * 4));
    CK(cudaMalloc(&ca, elems * 4));
    CK(cudaMalloc(&cb, elems * 4));
    CK(cudaMalloc(&y, N * 8));
    CK(cudaMalloc(&partials, 8 * 4096));
    CK(cudaMalloc(&arrivals, 64));
    CK(cudaMalloc(&res, 64));
    CK(cudaMemset(arrivals, 0, 64));
    CK(cudaMemcpy(x, hx.data(), elems * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(y, hy.data(), N * 8, cudaMemcpyHostToDevice));
    int sms;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    lj::Extents ex{};
    ex.count = N * C;
    ex.dims[0] = N;
    ex.dims[1] = C;
    lj::Inputs<2> in{};
    in.ptr[0] = x;
    in.ptr[1] = y;
    in.strides[0][0] = C;
    in.strides[0][1] = 1;
    in.strides[1][0] = 1;
    in.strides[1][1] = 0;
    lj::RowsOut out{};
    out.partials = partials;
    out.arrivals = arrivals;
    out.result = res;
    out.scale[0] = 1.0 / N;
    lj::Grads<1> gr{};
    gr.strides[0] = C;
    gr.strides[1] = 1;
    gr.scale[0] = 1.0 / N;
    const size_t smem = (size_t)C * 4;
    for (int round = 0; round < 3; ++round) {
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        std::vector<float> cps;
        for (int r = 0; r < reps + 2; ++r) {
            cudaEventRecord(e0);
            cudaMemcpyAsync(ca, cb, elems * 4, cudaMemcpyDeviceToDevice);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            if (r >= 2) cps.push_back(ms);
        }
        std::sort(cps.begin(), cps.end());
        const float copy = cps[cps.size() / 2];
        gr.ptr[0] = ga;
        const float ta = time_kernel(lossjit_kernel, sms, smem, ex, in, out, gr, reps);
        float resa;
        CK(cudaMemcpy(&resa, res, 4, cudaMemcpyDeviceToHost));
        printf("N=%lld C=%lld copy %.3f ms | A printed, copies %.3f ms %.1f%% (loss %.6f)\n", N, C, copy, ta, 100 * copy / ta, resa);
        run<0>("C as round 175-181", sms, smem, ex, in, out, gr, gb, ga, elems, copy, reps);
        run<4>("+ a partial last tile's branch", sms, smem, ex, in, out, gr, gb, ga, elems, copy, reps);
        run<4 | 2>("4 + the tile's cache loads first", sms, smem, ex, in, out, gr, gb, ga, elems, copy, reps);
        run<4 | 8>("4 + run-time strides", sms, smem, ex, in, out, gr, gb, ga, elems, copy, reps);
        run<4 | 16>("4 + the row's total in shared memory", sms, smem, ex, in, out, gr, gb, ga, elems, copy, reps);
        run<4 | 32>("4 + the cache's column checks", sms, smem, ex, in, out, gr, gb, ga, elems, copy, reps);
        run<4 | 64>("4 + the row after next's base held", sms, smem, ex, in, out, gr, gb, ga, elems, copy, reps);
        run<126>("all but bit 1 (near the printed walk, stop 61)", sms, smem, ex, in, out, gr, gb, ga, elems, copy, reps);
        run<127>("+ all of them (near stop 60's printed walk)", sms, smem, ex, in, out, gr, gb, ga, elems, copy, reps);
    }
    return 0;
}
