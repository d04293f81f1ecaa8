// Throwaway: which grid shape of a squared hinge value + d/dp + d/dt (t [N, 1], summed per row)
// reaches the add rate. p [N, C] read, dp written, t read per row, dt per row, value summed.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ double warp_sum(double v) { for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(~0u, v, o); return v; }

// PERROW: grid = rows, one row per block; else a resident grid taking whole rows in turn.
template <int BT, int U, bool PERROW>
__global__ void __launch_bounds__(BT) sq(const float4* __restrict__ p, const float* __restrict__ t, float4* __restrict__ g,
                                         float* __restrict__ dt, long long rows, long long cols4, double* part, float scale) {
    double acc = 0.0;
    __shared__ double ws[2][BT / 32];
    int parity = 0;
    for (long long row = blockIdx.x; row < rows; row += PERROW ? rows : gridDim.x) {
        const float tv = __ldg(t + row);
        double rs = 0.0;
        const float4* pr = p + row * cols4;
        float4* gr = g + row * cols4;
        for (long long c0 = 0; c0 < cols4; c0 += (long long)BT * U) {
            float4 a[U];
#pragma unroll
            for (int u = 0; u < U; ++u) { long long i = c0 + u * BT + threadIdx.x; if (i < cols4) a[u] = __ldg(pr + i); }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                long long i = c0 + u * BT + threadIdx.x;
                if (i < cols4) {
                    float m0 = fmaxf(1.f - a[u].x * tv, 0.f), m1 = fmaxf(1.f - a[u].y * tv, 0.f), m2 = fmaxf(1.f - a[u].z * tv, 0.f), m3 = fmaxf(1.f - a[u].w * tv, 0.f);
                    acc += (double)((m0 * m0 + m1 * m1) + (m2 * m2 + m3 * m3));
                    float4 o; o.x = -2.f * m0 * tv; o.y = -2.f * m1 * tv; o.z = -2.f * m2 * tv; o.w = -2.f * m3 * tv;
                    rs += (double)((-2.f * m0 * a[u].x + -2.f * m1 * a[u].y) + (-2.f * m2 * a[u].z + -2.f * m3 * a[u].w));
                    o.x *= scale; o.y *= scale; o.z *= scale; o.w *= scale;
                    gr[i] = o;
                }
            }
        }
        rs = warp_sum(rs);
        if ((threadIdx.x & 31) == 0) ws[parity][threadIdx.x >> 5] = rs;
        __syncthreads();
        if (threadIdx.x < 32) {
            double s = warp_sum(threadIdx.x < BT / 32 ? ws[parity][threadIdx.x] : 0.0);
            if (threadIdx.x == 0) dt[row] = (float)(s * scale);
        }
        parity ^= 1;
    }
    acc = warp_sum(acc);
    __shared__ double w[32];
    __syncthreads();
    if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) { double s = 0; for (int i = 0; i < BT / 32; ++i) s += w[i]; part[blockIdx.x] = s; }
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
    const long long R = 32768, C = 32768, nf = R * C;
    float4 *p, *g; float *t, *dt; double* part;
    CK(cudaMalloc(&p, nf * 4)); CK(cudaMalloc(&g, nf * 4)); CK(cudaMalloc(&t, R * 4)); CK(cudaMalloc(&dt, R * 4)); CK(cudaMalloc(&part, R * 8));
    CK(cudaMemset(p, 0x3e, nf * 4)); CK(cudaMemset(t, 0x3f, R * 4)); CK(cudaMemset(g, 0, nf * 4));
    const double bytes = 2.0 * nf * 4;
#define SQ(BT, U, PR) { \
    int fits = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits, sq<BT, U, PR>, BT, 0)); \
    for (int per : {1, 2, 4}) { if (PR && per > 1) break; if (!PR && per > fits) break; \
        long long grid = PR ? R : (long long)sms * per; \
        float ms = time_ms([&] { sq<BT, U, PR><<<(unsigned)grid, BT>>>(p, t, g, dt, R, C / 4, part, 1e-9f); }); \
        printf("sq bt%-4d U%d %s fits%d grid%-6lld %.4f ms %5.0f GB/s\n", BT, U, PR ? "per_row " : "resident", fits, grid, ms, bytes / ms / 1e6); } }
    SQ(1024, 2, false) SQ(1024, 2, true) SQ(1024, 4, false) SQ(1024, 4, true) SQ(1024, 8, true)
    SQ(512, 2, false) SQ(512, 2, true) SQ(512, 4, false) SQ(512, 4, true) SQ(512, 8, true)
    SQ(256, 4, false) SQ(256, 4, true) SQ(256, 8, true)
    float cm = time_ms([&] { cudaMemcpyAsync(g, p, nf * 4, cudaMemcpyDeviceToDevice); });
    printf("memcpy %.4f ms %.0f GB/s\n", cm, bytes / cm / 1e6);
    return 0;
}
