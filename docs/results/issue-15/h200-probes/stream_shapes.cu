// Throwaway: which map / reduction shapes reach the roofline on this GPU.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

enum { LDG = 0, LDCS = 1, PLAIN = 2 };
template <int M> __device__ __forceinline__ float4 ld(const float4* p) {
    if (M == LDG) return __ldg(p);
    if (M == LDCS) return __ldcs(p);
    return *p;
}
template <int M> __device__ __forceinline__ void st(float4* p, float4 v) {
    if (M == 1) __stcs(p, v); else if (M == 2) __stwt(p, v); else *p = v;
}
__device__ __forceinline__ float hs(float x) { return fminf(fmaxf(x + 3.f, 0.f), 6.f) / 6.f; }
__device__ __forceinline__ float4 hs4(float4 v) { return make_float4(hs(v.x), hs(v.y), hs(v.z), hs(v.w)); }

template <int U, int LM, int SM, bool ONESHOT>
__global__ void map_k(const float4* __restrict__ in, float4* __restrict__ out, long long n) {
    const long long tile = (long long)blockDim.x * U;
    for (long long base = (long long)blockIdx.x * tile; base < n; base += ONESHOT ? n : (long long)gridDim.x * tile) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) { long long i = base + (long long)u * blockDim.x + threadIdx.x; if (i < n) v[u] = ld<LM>(in + i); }
#pragma unroll
        for (int u = 0; u < U; ++u) { long long i = base + (long long)u * blockDim.x + threadIdx.x; if (i < n) st<SM>(out + i, hs4(v[u])); }
    }
}
// hinge-like: sum max(0, 1 - p*t[col]) over rows of `cols` float4
template <int U, int LM>
__global__ void red_k(const float4* __restrict__ p, const float4* __restrict__ t, long long n, long long cols4, double* part) {
    const long long tile = (long long)blockDim.x * U;
    float acc[4] = {0, 0, 0, 0};
    for (long long base = (long long)blockIdx.x * tile; base < n; base += (long long)gridDim.x * tile) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) { long long i = base + (long long)u * blockDim.x + threadIdx.x; v[u] = i < n ? ld<LM>(p + i) : make_float4(1, 1, 1, 1); }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            long long i = base + (long long)u * blockDim.x + threadIdx.x;
            float4 tt = __ldg(t + (i % cols4));
            acc[0] += fmaxf(0.f, 1.f - v[u].x * tt.x); acc[1] += fmaxf(0.f, 1.f - v[u].y * tt.y);
            acc[2] += fmaxf(0.f, 1.f - v[u].z * tt.z); acc[3] += fmaxf(0.f, 1.f - v[u].w * tt.w);
        }
    }
    double s = (double)acc[0] + acc[1] + acc[2] + acc[3];
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
    __shared__ double w[32];
    if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) { double a = 0; for (int i = 0; i < blockDim.x / 32; ++i) a += w[i]; part[blockIdx.x] = a; }
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
    int sms = prop.multiProcessorCount;
    printf("%s, %d SMs\n", prop.name, sms);
    const long long nf = 4096LL * 393216;  // the hardsigmoid seed shape
    const long long n4 = nf / 4;
    float4 *x, *y; CK(cudaMalloc(&x, nf * 4)); CK(cudaMalloc(&y, nf * 4));
    CK(cudaMemset(x, 0x3f, nf * 4)); CK(cudaMemset(y, 0, nf * 4));
    const double bytes = 2.0 * nf * 4;
    float cm = time_ms([&] { cudaMemcpyAsync(y, x, nf * 4, cudaMemcpyDeviceToDevice); });
    printf("memcpy DtoD %.4f ms %.0f GB/s\n", cm, bytes / cm / 1e6);
    double copy = bytes / cm / 1e6;
#define MAPV(U, LM, SM, OS) \
    for (int bt : {128, 256, 512}) { \
        long long tiles = (n4 + (long long)bt * U - 1) / (bt * U); \
        for (int g : {0, 4, 8, 16}) { \
            if (OS && g) continue; if (!OS && !g) continue; \
            long long grid = OS ? tiles : (long long)sms * g * (512 / bt); \
            float ms = time_ms([&] { map_k<U, LM, SM, OS><<<(unsigned)grid, bt>>>(x, y, n4); }); \
            printf("map U%-2d ld%d st%d %s bt%-3d grid%-8lld %.4f ms %5.0f GB/s %5.1f%%\n", U, LM, SM, OS ? "oneshot" : "stride ", bt, grid, ms, bytes / ms / 1e6, 100 * bytes / ms / 1e6 / copy); \
        } }
    MAPV(1, LDG, 0, true) MAPV(2, LDG, 0, true) MAPV(4, LDG, 0, true) MAPV(8, LDG, 0, true)
    MAPV(1, LDCS, 1, true) MAPV(2, LDCS, 1, true) MAPV(4, LDCS, 1, true) MAPV(8, LDCS, 1, true)
    MAPV(2, LDG, 1, true) MAPV(4, LDG, 1, true) MAPV(2, LDCS, 0, true) MAPV(4, LDCS, 0, true)
    MAPV(2, PLAIN, 0, true) MAPV(4, PLAIN, 0, true)
    MAPV(2, LDG, 0, false) MAPV(4, LDG, 0, false) MAPV(8, LDG, 0, false)
    MAPV(2, LDCS, 1, false) MAPV(4, LDCS, 1, false) MAPV(8, LDCS, 1, false)
    // hinge: p 32768 x 32768, t [32768]
    const long long pn = 32768LL * 32768 / 4, cols4 = 32768 / 4;
    double* part; CK(cudaMalloc(&part, 1 << 20));
    const double rbytes = pn * 16.0;
#define REDV(U, LM) \
    for (int bt : {256, 512}) for (int g : {4, 8, 16, 32}) { \
        long long grid = (long long)sms * g * 256 / bt; if (grid > 100000) continue; \
        float ms = time_ms([&] { red_k<U, LM><<<(unsigned)grid, bt>>>(x, y, pn, cols4, part); }); \
        printf("red U%-2d ld%d bt%-3d grid%-6lld %.4f ms %5.0f GB/s\n", U, LM, bt, grid, ms, rbytes / ms / 1e6); }
    REDV(4, LDG) REDV(8, LDG) REDV(16, LDG) REDV(4, LDCS) REDV(8, LDCS) REDV(16, LDCS) REDV(8, PLAIN)
    return 0;
}
