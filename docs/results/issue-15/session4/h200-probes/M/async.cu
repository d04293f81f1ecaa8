// Throwaway: do per-thread asynchronous copies into shared memory (cp.async, no registers for the
// loads in flight) beat register tiles for (a) squared hinge value + d/dp + d/dt (read 1, write 1,
// a sum per row) and (b) KL (read 2, two logs per element, a sum) on this GPU?
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include "../templates/lj_log.cuh"
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ double warp_sum(double v) { for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(~0u, v, o); return v; }
__device__ __forceinline__ void cp16(void* smem, const void* g) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(g));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void wait_groups() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void block_row_sum(double rs, float* dt, long long row, float scale, double (*ws)[32], int& parity, int BT) {
    rs = warp_sum(rs);
    if ((threadIdx.x & 31) == 0) ws[parity][threadIdx.x >> 5] = rs;
    __syncthreads();
    if (threadIdx.x < 32) {
        double s = warp_sum(threadIdx.x < BT / 32 ? ws[parity][threadIdx.x] : 0.0);
        if (threadIdx.x == 0) dt[row] = (float)(s * scale);
    }
    parity ^= 1;
}
__device__ __forceinline__ void finish(double acc, double* part, int BT) {
    acc = warp_sum(acc);
    __shared__ double w[32];
    __syncthreads();
    if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) { double s = 0; for (int i = 0; i < BT / 32; ++i) s += w[i]; part[blockIdx.x] = s; }
}
__device__ __forceinline__ void sqh(float4 a, float tv, float scale, double& acc, double& rs, float4* out) {
    float m0 = fmaxf(1.f - a.x * tv, 0.f), m1 = fmaxf(1.f - a.y * tv, 0.f), m2 = fmaxf(1.f - a.z * tv, 0.f), m3 = fmaxf(1.f - a.w * tv, 0.f);
    acc += (double)((m0 * m0 + m1 * m1) + (m2 * m2 + m3 * m3));
    float4 o; o.x = -2.f * m0 * tv * scale; o.y = -2.f * m1 * tv * scale; o.z = -2.f * m2 * tv * scale; o.w = -2.f * m3 * tv * scale;
    rs += (double)((-2.f * m0 * a.x + -2.f * m1 * a.y) + (-2.f * m2 * a.z + -2.f * m3 * a.w));
    *out = o;
}

// Register tiles: a resident grid taking whole rows.
template <int BT, int U>
__global__ void __launch_bounds__(BT) sq_reg(const float4* __restrict__ p, const float* __restrict__ t, float4* __restrict__ g,
                                             float* __restrict__ dt, long long rows, long long cols4, double* part, float scale) {
    double acc = 0.0; __shared__ double ws[2][32]; int parity = 0;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const float tv = __ldg(t + row); double rs = 0.0;
        for (long long c0 = 0; c0 < cols4; c0 += (long long)BT * U) {
            float4 a[U];
#pragma unroll
            for (int u = 0; u < U; ++u) a[u] = __ldg(p + row * cols4 + c0 + u * BT + threadIdx.x);
#pragma unroll
            for (int u = 0; u < U; ++u) sqh(a[u], tv, scale, acc, rs, g + row * cols4 + c0 + u * BT + threadIdx.x);
        }
        block_row_sum(rs, dt, row, scale, ws, parity, BT);
    }
    finish(acc, part, BT);
}

// Asynchronous copies, D stages of U vectors per thread; each thread reads back only what it copied.
template <int BT, int U, int D>
__global__ void __launch_bounds__(BT) sq_async(const float4* __restrict__ p, const float* __restrict__ t, float4* __restrict__ g,
                                               float* __restrict__ dt, long long rows, long long cols4, double* part, float scale) {
    extern __shared__ float4 stage[];  // [D][U][BT]
    double acc = 0.0; __shared__ double ws[2][32]; int parity = 0;
    const long long tpr = cols4 / (BT * U);
    const long long mine = rows > blockIdx.x ? ((rows - blockIdx.x + gridDim.x - 1) / gridDim.x) * tpr : 0;
    auto issue = [&](long long k) {
        if (k < mine) {
            const long long row = blockIdx.x + (k / tpr) * gridDim.x, c0 = (k % tpr) * BT * U;
#pragma unroll
            for (int u = 0; u < U; ++u) cp16(&stage[((k % D) * U + u) * BT + threadIdx.x], p + row * cols4 + c0 + u * BT + threadIdx.x);
        }
        commit();
    };
#pragma unroll
    for (int s = 0; s < D - 1; ++s) issue(s);
    double rs = 0.0;
    for (long long k = 0; k < mine; ++k) {
        issue(k + D - 1);
        wait_groups<D - 1>();
        const long long row = blockIdx.x + (k / tpr) * gridDim.x, in_row = k % tpr, c0 = in_row * BT * U;
        const float tv = __ldg(t + row);
#pragma unroll
        for (int u = 0; u < U; ++u) sqh(stage[((k % D) * U + u) * BT + threadIdx.x], tv, scale, acc, rs, g + row * cols4 + c0 + u * BT + threadIdx.x);
        if (in_row == tpr - 1) { block_row_sum(rs, dt, row, scale, ws, parity, BT); rs = 0.0; }
    }
    finish(acc, part, BT);
}

__device__ __forceinline__ float kl1(float pv, float tv) { return tv == 0.f ? 0.f : tv * (lj_log(tv) - lj_log(pv)); }
__device__ __forceinline__ void kl4(float4 a, float4 b, double& acc) {
    acc += (double)((kl1(a.x, b.x) + kl1(a.y, b.y)) + (kl1(a.z, b.z) + kl1(a.w, b.w)));
}
// KL: a grid-stride loop over tiles, register tiles.
template <int BT, int U>
__global__ void __launch_bounds__(BT) kl_reg(const float4* __restrict__ p, const float4* __restrict__ t, long long n4, double* part) {
    double acc = 0.0;
    for (long long base = (long long)blockIdx.x * BT * U; base < n4; base += (long long)gridDim.x * BT * U) {
        float4 a[U], b[U];
#pragma unroll
        for (int u = 0; u < U; ++u) { a[u] = __ldg(p + base + u * BT + threadIdx.x); b[u] = __ldg(t + base + u * BT + threadIdx.x); }
#pragma unroll
        for (int u = 0; u < U; ++u) kl4(a[u], b[u], acc);
    }
    finish(acc, part, BT);
}
template <int BT, int U, int D>
__global__ void __launch_bounds__(BT) kl_async(const float4* __restrict__ p, const float4* __restrict__ t, long long n4, double* part) {
    extern __shared__ float4 stage[];  // [D][2][U][BT]
    double acc = 0.0;
    const long long tile = (long long)BT * U, step = (long long)gridDim.x * tile;
    const long long mine = n4 > (long long)blockIdx.x * tile ? (n4 - (long long)blockIdx.x * tile + step - 1) / step : 0;
    auto issue = [&](long long k) {
        if (k < mine) {
            const long long base = (long long)blockIdx.x * tile + k * step;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                cp16(&stage[(((k % D) * 2 + 0) * U + u) * BT + threadIdx.x], p + base + u * BT + threadIdx.x);
                cp16(&stage[(((k % D) * 2 + 1) * U + u) * BT + threadIdx.x], t + base + u * BT + threadIdx.x);
            }
        }
        commit();
    };
#pragma unroll
    for (int s = 0; s < D - 1; ++s) issue(s);
    for (long long k = 0; k < mine; ++k) {
        issue(k + D - 1);
        wait_groups<D - 1>();
#pragma unroll
        for (int u = 0; u < U; ++u) kl4(stage[(((k % D) * 2 + 0) * U + u) * BT + threadIdx.x], stage[(((k % D) * 2 + 1) * U + u) * BT + threadIdx.x], acc);
    }
    finish(acc, part, BT);
}

template <class F> float time_ms(F f, int reps = 15) {
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    f(); f(); CK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int r = 0; r < reps; ++r) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms); }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end()); return t[t.size() / 2];
}

int main() {
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    printf("%s, %d SMs\n", prop.name, sms);
    const long long R = 32768, C = 32768, nf = R * C;
    float4 *p, *g; float *t, *dt; double* part;
    CK(cudaMalloc(&p, nf * 4)); CK(cudaMalloc(&g, nf * 4)); CK(cudaMalloc(&t, R * 4)); CK(cudaMalloc(&dt, R * 4)); CK(cudaMalloc(&part, 1 << 20));
    CK(cudaMemset(p, 0x3e, nf * 4)); CK(cudaMemset(t, 0x3f, R * 4)); CK(cudaMemset(g, 0, nf * 4));
    const double bytes = 2.0 * nf * 4;
#define REG(BT, U) { int fits = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, sq_reg<BT, U>, BT, 0)); \
    float ms = time_ms([&] { sq_reg<BT, U><<<sms * fits, BT>>>(p, t, g, dt, R, C / 4, part, 1e-9f); }); \
    printf("sq reg   bt%-4d U%d    fits%d %.4f ms %5.0f GB/s\n", BT, U, fits, ms, bytes / ms / 1e6); }
#define ASY(BT, U, D) { const int sm = D * U * BT * 16; CK(cudaFuncSetAttribute(sq_async<BT, U, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, sm)); \
    int fits = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, sq_async<BT, U, D>, BT, sm)); \
    float ms = time_ms([&] { sq_async<BT, U, D><<<sms * fits, BT, sm>>>(p, t, g, dt, R, C / 4, part, 1e-9f); }); \
    printf("sq async bt%-4d U%d D%d fits%d %.4f ms %5.0f GB/s\n", BT, U, D, fits, ms, bytes / ms / 1e6); }
    REG(1024, 2) REG(512, 2) REG(512, 4)
    ASY(512, 1, 2) ASY(512, 1, 4) ASY(512, 2, 2) ASY(512, 2, 3) ASY(512, 2, 4) ASY(256, 2, 4) ASY(256, 4, 3) ASY(1024, 1, 4) ASY(1024, 2, 3)
    {
        const long long KR = 16384, kn = KR * KR, kn4 = kn / 4; const double kb = 2.0 * kn * 4;
        float4 *kp = p, *kt = g;  // reuse: softmax-like positive values
        CK(cudaMemset(kp, 0x33, kn * 4)); CK(cudaMemset(kt, 0x34, kn * 4));
#define KREG(BT, U) { int fits = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, kl_reg<BT, U>, BT, 0)); \
        float ms = time_ms([&] { kl_reg<BT, U><<<sms * fits, BT>>>(kp, kt, kn4, part); }); \
        printf("kl reg   bt%-4d U%d    fits%d %.4f ms %5.0f GB/s\n", BT, U, fits, ms, kb / ms / 1e6); }
#define KASY(BT, U, D) { const int sm = D * 2 * U * BT * 16; CK(cudaFuncSetAttribute(kl_async<BT, U, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, sm)); \
        int fits = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, kl_async<BT, U, D>, BT, sm)); \
        float ms = time_ms([&] { kl_async<BT, U, D><<<sms * fits, BT, sm>>>(kp, kt, kn4, part); }); \
        printf("kl async bt%-4d U%d D%d fits%d %.4f ms %5.0f GB/s\n", BT, U, D, fits, ms, kb / ms / 1e6); }
        KREG(256, 4) KREG(512, 4) KREG(512, 2)
        KASY(256, 1, 4) KASY(256, 2, 3) KASY(256, 2, 4) KASY(512, 1, 3) KASY(512, 1, 4) KASY(512, 2, 2) KASY(512, 2, 3)
        float rm = time_ms([&] { cudaMemcpyAsync(kt, kp, kn * 4, cudaMemcpyDeviceToDevice); });
        printf("memcpy kl size %.4f ms (copy %.0f GB/s)\n", rm, kb / rm / 1e6);
    }
    float cm = time_ms([&] { cudaMemcpyAsync(g, p, nf * 4, cudaMemcpyDeviceToDevice); });
    printf("memcpy %.4f ms %.0f GB/s\n", cm, bytes / cm / 1e6);
    return 0;
}
