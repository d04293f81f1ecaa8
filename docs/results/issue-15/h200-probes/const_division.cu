// Throwaway: is hardsigmoid's IEEE division the map's limit on random data?
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
__global__ void fill(float* x, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u; h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
        unsigned g = (unsigned)(i >> 7) * 3266489917u + h; g ^= g >> 16;
        float u1 = (h & 0xffffff) / 16777216.0f, u2 = (g & 0xffffff) / 16777216.0f;
        x[i] = 3.0f * (u1 + u2 + (u1 * u2) - 1.25f) * 2.0f;  // roughly N(0,3)-ish spread, ~16% below -3
    }
}
template <int MODE> __device__ __forceinline__ float hs(float x) {
    float c = fminf(fmaxf(x + 3.f, 0.f), 6.f);
    if (MODE == 0) return c / 6.f;
    if (MODE == 1) return __fdividef(c, 6.f);
    float q = c * (1.f / 6.f); float r = fmaf(-q, 6.f, c); return fmaf(r, 1.f / 6.f, q);
}
template <int U, int MODE>
__global__ void map_k(const float4* __restrict__ in, float4* __restrict__ out, long long n) {
    const long long base = (long long)blockIdx.x * blockDim.x * U + threadIdx.x;
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) if (base + u * blockDim.x < n) v[u] = __ldg(in + base + u * blockDim.x);
#pragma unroll
    for (int u = 0; u < U; ++u) if (base + u * blockDim.x < n) {
        float4 w = v[u]; out[base + u * blockDim.x] = make_float4(hs<MODE>(w.x), hs<MODE>(w.y), hs<MODE>(w.z), hs<MODE>(w.w)); }
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
    const long long nf = 4096LL * 393216, n4 = nf / 4;
    float *x, *y; CK(cudaMalloc(&x, nf * 4)); CK(cudaMalloc(&y, nf * 4));
    const double bytes = 2.0 * nf * 4;
    for (int data = 0; data < 2; ++data) {
        if (data == 0) CK(cudaMemset(x, 0x3f, nf * 4)); else { fill<<<4096, 256>>>(x, nf); CK(cudaDeviceSynchronize()); }
        float cm = time_ms([&] { cudaMemcpyAsync(y, x, nf * 4, cudaMemcpyDeviceToDevice); });
        printf("%s data: memcpy %.4f ms %.0f GB/s\n", data ? "random" : "constant", cm, bytes / cm / 1e6);
        for (int bt : {128, 256}) {
#define V(U, M) { long long g = (n4 + (long long)bt * U - 1) / (bt * U); float ms = time_ms([&] { map_k<U, M><<<(unsigned)g, bt>>>((const float4*)x, (float4*)y, n4); }); \
            printf("  U%d bt%d %s %.4f ms %5.1f%% of memcpy\n", U, bt, M == 0 ? "div.rn " : M == 1 ? "fdividef" : "fma-rcp ", ms, 100 * cm / ms); }
            V(1, 0) V(1, 1) V(1, 2) V(2, 0) V(2, 1) V(2, 2) V(4, 0) V(4, 2)
        }
    }
}
