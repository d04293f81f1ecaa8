// Throwaway: which shapes of a fused value + gradient kernel reach the add rate on this GPU.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
enum { LDG = 0, LDCS = 1 };
template <int M> __device__ __forceinline__ float4 ld(const float4* p) { return M == LDG ? __ldg(p) : __ldcs(p); }
template <int M> __device__ __forceinline__ void st(float4* p, float4 v) { if (M == 1) __stcs(p, v); else *p = v; }
__device__ __forceinline__ float sl1(float d, float& g) { float a = fabsf(d); g = a < 1.f ? d : copysignf(1.f, d); return a < 1.f ? 0.5f * d * d : a - 0.5f; }

// RED: 0 none, 1 double acc per 4 + block reduction into part[blockIdx]
template <int U, int LM, int SM, bool ONESHOT, int RED>
__global__ void vg2(const float4* __restrict__ p, const float4* __restrict__ t, float4* __restrict__ g, long long n, double* part, float scale) {
    const long long tile = (long long)blockDim.x * U;
    double acc = 0.0;
    for (long long base = (long long)blockIdx.x * tile; base < n; base += ONESHOT ? n : (long long)gridDim.x * tile) {
        float4 a[U], b[U];
#pragma unroll
        for (int u = 0; u < U; ++u) { long long i = base + (long long)u * blockDim.x + threadIdx.x; if (i < n) { a[u] = ld<LM>(p + i); b[u] = ld<LM>(t + i); } }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            long long i = base + (long long)u * blockDim.x + threadIdx.x;
            if (i < n) {
                float4 o; float v0 = sl1(a[u].x - b[u].x, o.x), v1 = sl1(a[u].y - b[u].y, o.y), v2 = sl1(a[u].z - b[u].z, o.z), v3 = sl1(a[u].w - b[u].w, o.w);
                if (RED) acc += (double)((v0 + v1) + (v2 + v3));
                o.x *= scale; o.y *= scale; o.z *= scale; o.w *= scale;
                st<SM>(g + i, o);
            }
        }
    }
    if (RED) {
        for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(~0u, acc, o);
        __shared__ double w[32];
        if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = acc;
        __syncthreads();
        if (threadIdx.x == 0) { double s = 0; for (int i = 0; i < blockDim.x / 32; ++i) s += w[i]; part[blockIdx.x] = s; }
    }
}
// hinge-like: read p, write dp; t per column (kept in a register across rows would need same columns; here re-read via ldg, cached)
template <int U, int LM, int SM, bool ONESHOT>
__global__ void vg1(const float4* __restrict__ p, const float4* __restrict__ t, float4* __restrict__ g, long long n, long long cols4, double* part, float scale) {
    const long long tile = (long long)blockDim.x * U;
    double acc = 0.0;
    for (long long base = (long long)blockIdx.x * tile; base < n; base += ONESHOT ? n : (long long)gridDim.x * tile) {
        float4 a[U];
#pragma unroll
        for (int u = 0; u < U; ++u) { long long i = base + (long long)u * blockDim.x + threadIdx.x; if (i < n) a[u] = ld<LM>(p + i); }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            long long i = base + (long long)u * blockDim.x + threadIdx.x;
            if (i < n) {
                float4 b = __ldg(t + i % cols4);
                float4 o; float s = 0.f;
                float m0 = 1.f - a[u].x * b.x, m1 = 1.f - a[u].y * b.y, m2 = 1.f - a[u].z * b.z, m3 = 1.f - a[u].w * b.w;
                s = (fmaxf(m0, 0.f) + fmaxf(m1, 0.f)) + (fmaxf(m2, 0.f) + fmaxf(m3, 0.f));
                o.x = m0 > 0.f ? -b.x * scale : 0.f; o.y = m1 > 0.f ? -b.y * scale : 0.f; o.z = m2 > 0.f ? -b.z * scale : 0.f; o.w = m3 > 0.f ? -b.w * scale : 0.f;
                acc += (double)s;
                st<SM>(g + i, o);
            }
        }
    }
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(~0u, acc, o);
    __shared__ double w[32];
    if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) { double s = 0; for (int i = 0; i < blockDim.x / 32; ++i) s += w[i]; part[blockIdx.x] = s; }
}

template <class F> float time_ms(F f, int reps = 11) {
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
    const long long nf = 32768LL * 32768, n4 = nf / 4;
    float4 *p, *t, *g; double* part;
    CK(cudaMalloc(&p, nf * 4)); CK(cudaMalloc(&t, nf * 4)); CK(cudaMalloc(&g, nf * 4)); CK(cudaMalloc(&part, 64 << 20));
    CK(cudaMemset(p, 0x3f, nf * 4)); CK(cudaMemset(t, 0x3e, nf * 4)); CK(cudaMemset(g, 0, nf * 4));
    const double b3 = 3.0 * nf * 4, b2 = 2.0 * nf * 4;
#define V2(U, LM, SM, OS, RED) \
    for (int bt : {256, 512, 1024}) for (int gs : {0, 1, 2, 4, 8, 16}) { \
        if (OS != (gs == 0)) continue; if (bt * gs > 2048 && gs <= 2) continue; \
        long long grid = OS ? (n4 + (long long)bt * U - 1) / (bt * U) : (long long)sms * gs * (1024 / bt); \
        if (!OS && gs > 2 && bt == 1024) continue; \
        float ms = time_ms([&] { vg2<U, LM, SM, OS, RED><<<(unsigned)grid, bt>>>(p, t, g, n4, part, 1e-9f); }); \
        printf("vg2 U%d ld%d st%d %s red%d bt%-4d grid%-8lld %.4f ms %5.0f GB/s\n", U, LM, SM, OS ? "oneshot" : "stride ", RED, bt, grid, ms, b3 / ms / 1e6); }
    V2(2, LDCS, 1, true, 0) V2(2, LDG, 0, true, 0) V2(2, LDCS, 1, false, 0) V2(2, LDG, 0, false, 0)
    V2(1, LDG, 0, true, 1) V2(2, LDG, 0, true, 1) V2(4, LDG, 0, true, 1) V2(2, LDCS, 1, true, 1) V2(2, LDG, 1, true, 1) V2(2, LDCS, 0, true, 1)
    V2(1, LDG, 0, false, 1) V2(2, LDG, 0, false, 1) V2(4, LDG, 0, false, 1)
    V2(1, LDCS, 1, false, 1) V2(2, LDCS, 1, false, 1) V2(4, LDCS, 1, false, 1) V2(2, LDG, 1, false, 1) V2(2, LDCS, 0, false, 1)
#define V1(U, LM, SM, OS) \
    for (int bt : {256, 512, 1024}) for (int gs : {0, 1, 2, 4, 8, 16}) { \
        if (OS != (gs == 0)) continue; \
        long long grid = OS ? (n4 + (long long)bt * U - 1) / (bt * U) : (long long)sms * gs * (1024 / bt); \
        if (!OS && gs > 2 && bt == 1024) continue; \
        float ms = time_ms([&] { vg1<U, LM, SM, OS><<<(unsigned)grid, bt>>>(p, t, g, n4, 32768 / 4, part, 1e-9f); }); \
        printf("vg1 U%d ld%d st%d %s bt%-4d grid%-8lld %.4f ms %5.0f GB/s\n", U, LM, SM, OS ? "oneshot" : "stride ", bt, grid, ms, b2 / ms / 1e6); }
    V1(2, LDG, 0, true) V1(4, LDG, 0, true) V1(2, LDCS, 1, true) V1(2, LDG, 0, false) V1(4, LDG, 0, false) V1(2, LDCS, 1, false) V1(4, LDCS, 1, false) V1(2, LDG, 1, false)
    float cm = time_ms([&] { cudaMemcpyAsync(g, p, nf * 4, cudaMemcpyDeviceToDevice); });
    printf("memcpy %.4f ms %.0f GB/s\n", cm, b2 / cm / 1e6);
    return 0;
}
