// Round 188 (stop 62): stop 61's harness (../../stop61/scripts/harness.cu) with a profiling mode:
// LJ_PROFILE set launches each kernel once (no warm-up, one round, no gradient comparison) so that
// ncu profiles one launch of each; and P7: P6 with the row's index loaded by the row before into
// Ahead (k_p7.cuh, P6's printed source so edited by hand). Round 189: P0 and P5 left out; P9: stop
// 62's printer (the take's slot parity carried in Ahead, no 64-bit division a row), P10: P9 with
// the index a row ahead (p10 as P7 of P6). Round 190: P7 left out; P12: P10 with the take picked
// out of the walk ahead, as C does (p12_edit.py). Stop 61's header follows.
// Round 183 (stop 61): the printed copies kernel of the fused cross-entropy (A, ce_emitted.cuh) beside
// the printed walk ahead at 1024 threads as stop 60 printed it (P0) and as stop 61 prints it (P5: the
// row's index loaded by the row before, into Ahead; round 186's P6: the take x[y] read from the cache
// by the lane whose columns hold it), and stop 59's hand-written B and C. Stop 60's
// harness (../../stop60/scripts/harness.cu) with P1-P4, Q1-Q2 left out; output line-buffered (round
// 182 lost a shape's lines to its time limit).
#include "ce_emitted.cuh"
using Launch = void (*)(int grid, int block, size_t smem, const lj::Extents& ex, const lj::Inputs<2>& in, const lj::RowsOut& out, const lj::Grads<1>& gr);
#define DECL(n) void launch_##n(int, int, size_t, const lj::Extents&, const lj::Inputs<2>&, const lj::RowsOut&, const lj::Grads<1>&);
DECL(p6) DECL(p9) DECL(p10) DECL(p12)
struct AheadLauncher {};
#include <cstdio>
#include <vector>
#include <cstdlib>
#include <algorithm>
#include <cmath>

template <int U, int MODE = 0>
__global__ void __launch_bounds__(1024) fused_kernel(const lj::Extents extents, const lj::Inputs<2> in, const lj::RowsOut out,
                                                     const lj::Grads<1> grads) {
    using Team = lj::Team<1024, 1024>;
    using Value = float;
    constexpr int VW = 4;
    const long long C = extents.dims[1], rows = extents.dims[0];
    const float* x = static_cast<const float*>(in.ptr[0]);
    const long long* y = static_cast<const long long*>(in.ptr[1]);
    float* g = static_cast<float*>(grads.ptr[0]);
    const Value seed = (Value)grads.total_scale(0);
    Value* cache = lj::row_cache<Value>();
    __shared__ float takes[2];
    double totals[1] = {0.0};
    long long row = blockIdx.x;
    lj::LogSumExpAcc<Value> a;
    long long iy = 0;
    if (row < rows) {
        iy = y[row];
        const float* xr = x + row * C;
        for (long long j0 = threadIdx.x * VW; j0 < C; j0 += 1024LL * VW * U) {
            Value v[U][VW];
            const int ty = lj::offset_in_tile(iy, j0, (long long)U * 1024 * VW);
#pragma unroll
            for (int u = 0; u < U; ++u) lj::load_row<VW>(lj::kFloat32, xr, j0 + u * 1024LL * VW, v[u]);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                lj::cache_store<VW>(cache + j0 + u * 1024LL * VW, v[u]);
#pragma unroll
                for (int q = 0; q < VW; ++q)
                    if (ty == u * 1024 * VW + q) takes[0] = v[u][q];
            }
            lj::add_tile<(long long)1024 * VW>(a, v, j0);
        }
    }
    int parity = 0;
    for (; row < rows; row += gridDim.x) {
        if (!(MODE & 2)) a = Team::all_reduce(a);  // its barriers also publish takes[parity]
        else __syncthreads();
        const Value lse = (MODE & 2) ? 3.0f : a.value();
        const float take = takes[parity];
        const long long next = row + gridDim.x;
        const bool refill = next < rows;
        long long iy_next = refill ? y[next] : -1;
        lj::LogSumExpAcc<Value> b;
        const float* xn = x + next * C;
        float* gr = g + row * C;
        for (long long j0 = threadIdx.x * VW; j0 < C; j0 += 1024LL * VW * U) {
            Value w[U][VW];
            if (refill) {
#pragma unroll
                for (int u = 0; u < U; ++u) lj::load_row<VW>(lj::kFloat32, xn, j0 + u * 1024LL * VW, w[u]);
            }
            const int ty = lj::offset_in_tile(iy, j0, (long long)U * 1024 * VW);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                Value v[VW], rg[VW];
                if (MODE & 4) { for (int q = 0; q < VW; ++q) v[q] = w[u][q]; } else lj::cache_load<VW>(cache + j0 + u * 1024LL * VW, v);
#pragma unroll
                for (int q = 0; q < VW; ++q) rg[q] = (ty == u * 1024 * VW + q ? -seed : 0.0f) + seed * ((MODE & 1) ? (v[q] - lse) : exp(v[q] - lse));
                lj::store_row<VW>(lj::kFloat32, gr, j0 + u * 1024LL * VW, rg);
            }
            if (refill) {
                const int tn = lj::offset_in_tile(iy_next, j0, (long long)U * 1024 * VW);
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    lj::cache_store<VW>(cache + j0 + u * 1024LL * VW, w[u]);
#pragma unroll
                    for (int q = 0; q < VW; ++q)
                        if (tn == u * 1024 * VW + q) takes[parity ^ 1] = w[u][q];
                }
                if (!(MODE & 8)) lj::add_tile<(long long)1024 * VW>(b, w, j0);
            }
        }
        if (threadIdx.x == 0) totals[0] += (double)(lse - take);
        a = b;
        iy = iy_next;
        parity ^= 1;
    }
    lj::finish_totals<1024, 1, 1, false, lj::kFloat32>(totals, out, [&](const double (&t)[1], double (&r)[1]) { r[0] = t[0]; });
}

// C: as B, but the next row's first tile is loaded into registers before the merge (memory busy across it).
template <int U>
__global__ void __launch_bounds__(1024) early_kernel(const lj::Extents extents, const lj::Inputs<2> in, const lj::RowsOut out,
                                                     const lj::Grads<1> grads) {
    using Team = lj::Team<1024, 1024>;
    using Value = float;
    constexpr int VW = 4;
    const long long C = extents.dims[1], rows = extents.dims[0];
    const float* x = static_cast<const float*>(in.ptr[0]);
    const long long* y = static_cast<const long long*>(in.ptr[1]);
    float* g = static_cast<float*>(grads.ptr[0]);
    const Value seed = (Value)grads.total_scale(0);
    Value* cache = lj::row_cache<Value>();
    __shared__ float takes[2];
    double totals[1] = {0.0};
    long long row = blockIdx.x;
    const long long G = gridDim.x;
    lj::LogSumExpAcc<Value> a;
    long long iy = 0;
    Value w[U][VW];
    if (row < rows) {
        iy = y[row];
        const float* xr = x + row * C;
        for (long long j0 = threadIdx.x * VW; j0 < C; j0 += 1024LL * VW * U) {
            Value v[U][VW];
            const int ty = lj::offset_in_tile(iy, j0, (long long)U * 1024 * VW);
#pragma unroll
            for (int u = 0; u < U; ++u) lj::load_row<VW>(lj::kFloat32, xr, j0 + u * 1024LL * VW, v[u]);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                lj::cache_store<VW>(cache + j0 + u * 1024LL * VW, v[u]);
#pragma unroll
                for (int q = 0; q < VW; ++q)
                    if (ty == u * 1024 * VW + q) takes[0] = v[u][q];
            }
            lj::add_tile<(long long)1024 * VW>(a, v, j0);
        }
        if (row + G < rows) {
#pragma unroll
            for (int u = 0; u < U; ++u) lj::load_row<VW>(lj::kFloat32, x + (row + G) * C, threadIdx.x * VW + u * 1024LL * VW, w[u]);
        }
    }
    int parity = 0;
    for (; row < rows; row += G) {
        a = Team::all_reduce(a);
        const Value lse = a.value();
        const float take = takes[parity];
        const long long next = row + G;
        const bool refill = next < rows;
        long long iy_next = refill ? y[next] : -1;
        lj::LogSumExpAcc<Value> b;
        const float* xn = x + next * C;
        float* gr = g + row * C;
        for (long long j0 = threadIdx.x * VW; j0 < C; j0 += 1024LL * VW * U) {
            if (refill && j0 != threadIdx.x * VW) {
#pragma unroll
                for (int u = 0; u < U; ++u) lj::load_row<VW>(lj::kFloat32, xn, j0 + u * 1024LL * VW, w[u]);
            }
            const int ty = lj::offset_in_tile(iy, j0, (long long)U * 1024 * VW);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                Value v[VW], rg[VW];
                lj::cache_load<VW>(cache + j0 + u * 1024LL * VW, v);
#pragma unroll
                for (int q = 0; q < VW; ++q) rg[q] = (ty == u * 1024 * VW + q ? -seed : 0.0f) + seed * exp(v[q] - lse);
                lj::store_row<VW>(lj::kFloat32, gr, j0 + u * 1024LL * VW, rg);
            }
            if (refill) {
                const int tn = lj::offset_in_tile(iy_next, j0, (long long)U * 1024 * VW);
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    lj::cache_store<VW>(cache + j0 + u * 1024LL * VW, w[u]);
#pragma unroll
                    for (int q = 0; q < VW; ++q)
                        if (tn == u * 1024 * VW + q) takes[parity ^ 1] = w[u][q];
                }
                lj::add_tile<(long long)1024 * VW>(b, w, j0);
            }
        }
        if (next + G < rows) {  // the row after next: its first tile in flight across the next merge
#pragma unroll
            for (int u = 0; u < U; ++u) lj::load_row<VW>(lj::kFloat32, x + (next + G) * C, threadIdx.x * VW + u * 1024LL * VW, w[u]);
        }
        if (threadIdx.x == 0) totals[0] += (double)(lse - take);
        a = b;
        iy = iy_next;
        parity ^= 1;
    }
    lj::finish_totals<1024, 1, 1, false, lj::kFloat32>(totals, out, [&](const double (&t)[1], double (&r)[1]) { r[0] = t[0]; });
}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

template <class K>
float time_kernel(K kernel, int grid, int block, size_t smem, const lj::Extents& ex, const lj::Inputs<2>& in,
                  const lj::RowsOut& out, const lj::Grads<1>& gr, int reps, std::vector<float>& all) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    all.clear();
    const int warm = getenv("LJ_PROFILE") ? 0 : 2;
    for (int r = 0; r < reps + warm; ++r) {
        cudaEventRecord(a);
        kernel<<<grid, block, smem>>>(ex, in, out, gr);
        cudaEventRecord(b);
        CK(cudaEventSynchronize(b));
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (r >= warm) all.push_back(ms);
    }
    std::sort(all.begin(), all.end());
    return all[all.size() / 2];
}

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    long long N = argc > 1 ? atoll(argv[1]) : 16384, C = argc > 2 ? atoll(argv[2]) : 32768;
    const bool profile = getenv("LJ_PROFILE") != nullptr;
    int reps = profile ? 1 : 20;
    size_t elems = (size_t)N * C;
    std::vector<float> hx(elems);
    std::vector<long long> hy(N);
    srand(1);
    for (size_t i = 0; i < elems; ++i) hx[i] = (float)rand() / RAND_MAX * 8.0f - 4.0f;
    for (long long i = 0; i < N; ++i) hy[i] = rand() % C;
    float *x, *ga, *gb, *ca, *cb;
    long long* y;
    double* partials;
    unsigned* arrivals;
    float *res;
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
    CK(cudaFuncSetAttribute(lossjit_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<float> all;
    for (int round = 0; round < (profile ? 1 : 3); ++round) {
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
        const float ta = time_kernel(lossjit_kernel, sms, 1024, smem, ex, in, out, gr, reps, all);
        float resa;
        CK(cudaMemcpy(&resa, res, 4, cudaMemcpyDeviceToHost));
        printf("N=%lld C=%lld copy %.3f ms | A emitted, copies %.3f ms %.1f%% (loss %.6f)\n", N, C, copy, ta, 100 * copy / ta, resa);
        gr.ptr[0] = gb;
        auto mode = [&](auto kernel, const char* name) {
            CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            const float t = time_kernel(kernel, sms, 1024, smem, ex, in, out, gr, reps, all);
            float r;
            CK(cudaMemcpy(&r, res, 4, cudaMemcpyDeviceToHost));
            printf("   %-40s %.3f ms %.1f%% (loss %.6f)\n", name, t, 100 * copy / t, r);
        };
        struct Variant { const char* name; Launch launch; int block; };
        for (const Variant& var : {Variant{"P6 walk ahead, take by its lane", launch_p6, 1024},
                                   Variant{"P9 P6, take parity in Ahead", launch_p9, 1024},
                                   Variant{"P10 P9 + the index a row ahead", launch_p10, 1024},
                                   Variant{"P12 P10 + the take picked in the walk", launch_p12, 1024}}) {
            cudaEvent_t a0, b0;
            cudaEventCreate(&a0);
            cudaEventCreate(&b0);
            std::vector<float> ts;
            CK(cudaMemset(gb, 0, elems * 4));
            for (int r = 0; r < reps + (profile ? 0 : 2); ++r) {
                cudaEventRecord(a0);
                var.launch(sms, var.block, smem, ex, in, out, gr);
                cudaEventRecord(b0);
                CK(cudaEventSynchronize(b0));
                float ms;
                cudaEventElapsedTime(&ms, a0, b0);
                if (r >= (profile ? 0 : 2)) ts.push_back(ms);
            }
            std::sort(ts.begin(), ts.end());
            float r;
            CK(cudaMemcpy(&r, res, 4, cudaMemcpyDeviceToHost));
            double maxd = -1;  // (not compared when profiling)
            if (!profile) {
                std::vector<float> h1(elems), h2(elems);
                CK(cudaMemcpy(h1.data(), ga, elems * 4, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(h2.data(), gb, elems * 4, cudaMemcpyDeviceToHost));
                maxd = 0;
                for (size_t i = 0; i < elems; ++i) maxd = std::max(maxd, (double)std::fabs(h1[i] - h2[i]));
            }
            printf("   %-40s %.3f ms %.1f%% (loss %.6f) grad max abs diff vs A %.3e\n", var.name, ts[ts.size() / 2], 100 * copy / ts[ts.size() / 2], r, maxd);
        }
        if (C % 16384 != 0) continue;  // (B and C take whole tiles only)
        mode(fused_kernel<4, 0>, "B fused");
        mode(early_kernel<4>, "C early loads U4");
        mode(early_kernel<2>, "C early loads U2");
    }
    return 0;
}
