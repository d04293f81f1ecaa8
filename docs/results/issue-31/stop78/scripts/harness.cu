// Stop 78 (issue 31, H200): lossjit's printed cross-entropy value + gradient kernel at 16384 x 32768
// as main prints it for an H200 ("N", ce_now.cuh: `lossjit emit examples/cross_entropy.loss -i
// x=16384x32768:normal -i y=16384:integers[0,32767]:i64 --grad x --gpu h200`, made nvcc device code)
// beside stop 59's hand-written C (the same schedule: the next row walked ahead, its first tile in
// flight across the merges), in turn, each against cudaMemcpy's rate for the same bytes; LJ_PROFILE
// set: two launches of each, untimed (for ncu). Rounds 270-271 added N's variants (make_variants.py):
// Nb, Ns, Nq (round 271's form, this file; round 269's timed N and C alone, round 270's N, Nb, C);
// built with -DROUND274, N, Nc, Ne and C (prepared for a later round, r274.sh).
#include "ce_now.cuh"
#include <cstdio>
#include <vector>
#include <cstdlib>
#include <algorithm>
#include <cmath>

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

#ifdef ROUND274  // r274.sh: N, Nc, Ne, C (make_variants.py)
void launch_nc(int grid, int block, size_t smem, const lj::Extents& ex, const lj::Inputs<2>& in, const lj::RowsOut& out,
               const lj::Grads<1>& gr);
void launch_ne(int grid, int block, size_t smem, const lj::Extents& ex, const lj::Inputs<2>& in, const lj::RowsOut& out,
               const lj::Grads<1>& gr);
#else
void launch_ns(int grid, int block, size_t smem, const lj::Extents& ex, const lj::Inputs<2>& in, const lj::RowsOut& out,
               const lj::Grads<1>& gr);
void launch_nq(int grid, int block, size_t smem, const lj::Extents& ex, const lj::Inputs<2>& in, const lj::RowsOut& out,
               const lj::Grads<1>& gr);
void launch_nb(int grid, int block, size_t smem, const lj::Extents& ex, const lj::Inputs<2>& in, const lj::RowsOut& out,
               const lj::Grads<1>& gr);
#endif

// Median of `reps` timed launches after two untimed (LJ_PROFILE: the two launches alone).
template <class Launch>
float time_launches(Launch launch, int reps) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<float> all;
    for (int r = 0; r < reps + 2; ++r) {
        cudaEventRecord(a);
        launch();
        cudaEventRecord(b);
        CK(cudaEventSynchronize(b));
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (r >= 2) all.push_back(ms);
    }
    std::sort(all.begin(), all.end());
    return all.empty() ? 0.f : all[all.size() / 2];
}

int main(int argc, char** argv) {
    long long N = argc > 1 ? atoll(argv[1]) : 16384, C = argc > 2 ? atoll(argv[2]) : 32768;
    const bool profile = getenv("LJ_PROFILE") != nullptr;
    int reps = profile ? 0 : 20;
    size_t elems = (size_t)N * C;
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
    CK(cudaFuncSetAttribute(lossjit_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CK(cudaFuncSetAttribute(early_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    for (int round = 0; round < (profile ? 1 : 3); ++round) {
        std::vector<float> cps;
        for (int r = 0; r < reps + 2; ++r) {
            cudaEvent_t e0, e1;
            cudaEventCreate(&e0);
            cudaEventCreate(&e1);
            cudaEventRecord(e0);
            cudaMemcpyAsync(ca, cb, elems * 4, cudaMemcpyDeviceToDevice);
            cudaEventRecord(e1);
            cudaEventSynchronize(e1);
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            if (r >= 2) cps.push_back(ms);
        }
        std::sort(cps.begin(), cps.end());
        const float copy = cps.empty() ? 0.f : cps[cps.size() / 2];
        struct Variant { const char* name; void (*launch)(int, size_t, const lj::Extents&, const lj::Inputs<2>&, const lj::RowsOut&, const lj::Grads<1>&); };
        const Variant variants[] = {
            {"N printed", [](int g, size_t sm, const lj::Extents& e, const lj::Inputs<2>& i, const lj::RowsOut& o, const lj::Grads<1>& d) { lossjit_kernel<<<g, 1024, sm>>>(e, i, o, d); }},
#ifdef ROUND274
            {"Nc index late, seed shared", [](int g, size_t sm, const lj::Extents& e, const lj::Inputs<2>& i, const lj::RowsOut& o, const lj::Grads<1>& d) { launch_nc(g, 1024, sm, e, i, o, d); }},
            {"Ne index late, seed member", [](int g, size_t sm, const lj::Extents& e, const lj::Inputs<2>& i, const lj::RowsOut& o, const lj::Grads<1>& d) { launch_ne(g, 1024, sm, e, i, o, d); }},
#else
            {"Nb index after merges", [](int g, size_t sm, const lj::Extents& e, const lj::Inputs<2>& i, const lj::RowsOut& o, const lj::Grads<1>& d) { launch_nb(g, 1024, sm, e, i, o, d); }},
            {"Ns seed a member", [](int g, size_t sm, const lj::Extents& e, const lj::Inputs<2>& i, const lj::RowsOut& o, const lj::Grads<1>& d) { launch_ns(g, 1024, sm, e, i, o, d); }},
            {"Nq seed in shared", [](int g, size_t sm, const lj::Extents& e, const lj::Inputs<2>& i, const lj::RowsOut& o, const lj::Grads<1>& d) { launch_nq(g, 1024, sm, e, i, o, d); }},
#endif
            {"C hand-written", [](int g, size_t sm, const lj::Extents& e, const lj::Inputs<2>& i, const lj::RowsOut& o, const lj::Grads<1>& d) { early_kernel<4><<<g, 1024, sm>>>(e, i, o, d); }},
        };
        std::vector<float> href(profile ? 0 : elems), h(profile ? 0 : elems);
        printf("N=%lld C=%lld round %d copy %.3f ms\n", N, C, round, copy);
        for (int v = 0; v < (int)(sizeof(variants) / sizeof(variants[0])); ++v) {
            gr.ptr[0] = v == 0 ? ga : gb;
            if (v > 0) CK(cudaMemset(gb, 0, elems * 4));
            const float t = time_launches([&] { variants[v].launch(sms, smem, ex, in, out, gr); }, reps);
            CK(cudaGetLastError());
            float loss;
            CK(cudaMemcpy(&loss, res, 4, cudaMemcpyDeviceToHost));
            if (profile) continue;
            double maxd = 0;
            if (v == 0) {
                CK(cudaMemcpy(href.data(), ga, elems * 4, cudaMemcpyDeviceToHost));
            } else {
                CK(cudaMemcpy(h.data(), gb, elems * 4, cudaMemcpyDeviceToHost));
                for (size_t e = 0; e < elems; ++e) maxd = std::max(maxd, (double)std::fabs(href[e] - h[e]));
            }
            printf("   %-24s %.3f ms %.1f%% of the copy rate (loss %.6f) grad max abs diff vs N %.3e\n", variants[v].name, t,
                   100 * copy / t, loss, maxd);
            fflush(stdout);
        }
    }
    return 0;
}
