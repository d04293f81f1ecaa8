// Copy-structure bounds on this GPU: what a persistent grid of B threads x U vectors in flight can copy.
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)

template <int U>
__global__ void copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, long long n4) {
    const long long step = (long long)gridDim.x * blockDim.x * U;
    for (long long i0 = (long long)blockIdx.x * blockDim.x * U + threadIdx.x; i0 < n4; i0 += step) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldg(in + i0 + (long long)u * blockDim.x);
#pragma unroll
        for (int u = 0; u < U; ++u) out[i0 + (long long)u * blockDim.x] = v[u];
    }
}
// Rows: each block takes whole rows of C floats; loads row into regs tile by tile, stores. Barrier per row.
template <int U>
__global__ void row_copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, long long rows, long long C4) {
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        for (long long j0 = threadIdx.x; j0 < C4; j0 += (long long)blockDim.x * U) {
            float4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = __ldg(in + r * C4 + j0 + (long long)u * blockDim.x);
#pragma unroll
            for (int u = 0; u < U; ++u) out[r * C4 + j0 + (long long)u * blockDim.x] = v[u];
        }
        __syncthreads();
    }
}

template <int U>
__global__ void copy_cs_kernel(const float4* __restrict__ in, float4* __restrict__ out, long long n4) {
    const long long step = (long long)gridDim.x * blockDim.x * U;
    for (long long i0 = (long long)blockIdx.x * blockDim.x * U + threadIdx.x; i0 < n4; i0 += step) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldcs(in + i0 + (long long)u * blockDim.x);
#pragma unroll
        for (int u = 0; u < U; ++u) __stcs(out + i0 + (long long)u * blockDim.x, v[u]);
    }
}
template <int U>
__global__ void copy_stcs_kernel(const float4* __restrict__ in, float4* __restrict__ out, long long n4) {
    const long long step = (long long)gridDim.x * blockDim.x * U;
    for (long long i0 = (long long)blockIdx.x * blockDim.x * U + threadIdx.x; i0 < n4; i0 += step) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldg(in + i0 + (long long)u * blockDim.x);
#pragma unroll
        for (int u = 0; u < U; ++u) __stcs(out + i0 + (long long)u * blockDim.x, v[u]);
    }
}
__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
// TMA bulk copy: one thread a block moves CHUNK-byte chunks global -> shared -> global through S stages.
template <int S, int CHUNK>
__global__ void tma_copy_kernel(const char* __restrict__ in, char* __restrict__ out, long long chunks) {
    extern __shared__ __align__(128) unsigned char ring[];
    __shared__ __align__(8) unsigned long long bars[S];
    if (threadIdx.x != 0) return;
    for (int s = 0; s < S; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bars[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    long long mine = (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x;
    auto issue = [&](long long k) {
        const int s = (int)(k % S);
        const long long c = blockIdx.x + k * gridDim.x;
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(&bars[s])), "r"(CHUNK) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     ::"r"(smem_u32(ring + s * CHUNK)), "l"(in + c * CHUNK), "r"(CHUNK), "r"(smem_u32(&bars[s])) : "memory");
    };
    for (long long k = 0; k < S && k < mine; ++k) issue(k);
    for (long long k = 0; k < mine; ++k) {
        const int s = (int)(k % S);
        const unsigned parity = (unsigned)((k / S) & 1);
        asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}\n" ::"r"(smem_u32(&bars[s])), "r"(parity) : "memory");
        const long long c = blockIdx.x + k * gridDim.x;
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(out + c * CHUNK), "r"(smem_u32(ring + s * CHUNK)), "r"(CHUNK) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        if (k >= 1 && k - 1 + S < mine) {
            asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
            issue(k - 1 + S);
        }
    }
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// Rows: block b takes a contiguous range of rows (not every gridDim-th row).
template <int U>
__global__ void row_range_copy_kernel(const float4* __restrict__ in, float4* __restrict__ out, long long rows, long long C4) {
    const long long per = (rows + gridDim.x - 1) / gridDim.x;
    const long long r0 = blockIdx.x * per, r1 = min(rows, r0 + per);
    for (long long r = r0; r < r1; ++r) {
        for (long long j0 = threadIdx.x; j0 < C4; j0 += (long long)blockDim.x * U) {
            float4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) v[u] = __ldg(in + r * C4 + j0 + (long long)u * blockDim.x);
#pragma unroll
            for (int u = 0; u < U; ++u) out[r * C4 + j0 + (long long)u * blockDim.x] = v[u];
        }
        __syncthreads();
    }
}
template <class F>
float timeit(F f) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    std::vector<float> t;
    for (int r = 0; r < 22; ++r) {
        cudaEventRecord(a);
        f();
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        if (r >= 2) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}
int main() {
    const long long N = 16384, C = 32768, n = N * C, n4 = n / 4;
    float *x, *y;
    CK(cudaMalloc(&x, n * 4));
    CK(cudaMalloc(&y, n * 4));
    { std::vector<float> h(n); for (long long i = 0; i < n; ++i) h[i] = (float)(i % 1000); cudaMemcpy(x, h.data(), n * 4, cudaMemcpyHostToDevice); }
    int sms;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    for (int round = 0; round < 2; ++round) {
        const float memcpy_ms = timeit([&] { cudaMemcpyAsync(y, x, n * 4, cudaMemcpyDeviceToDevice); });
        printf("memcpy %.3f ms (%.0f GB/s both ways)\n", memcpy_ms, 2.0 * n * 4 / memcpy_ms / 1e6);
        auto report = [&](const char* name, float ms) { printf("%-44s %.3f ms %.1f%%\n", name, ms, 100 * memcpy_ms / ms); };
        const float4* i4 = reinterpret_cast<const float4*>(x);
        float4* o4 = reinterpret_cast<float4*>(y);
        report("grid-stride 1x1024 thr/SM U4", timeit([&] { copy_kernel<4><<<sms, 1024>>>(i4, o4, n4); }));
        report("grid-stride 1x1024 thr/SM U8", timeit([&] { copy_kernel<8><<<sms, 1024>>>(i4, o4, n4); }));
        report("grid-stride 2x1024 thr/SM U4", timeit([&] { copy_kernel<4><<<2 * sms, 1024>>>(i4, o4, n4); }));
        report("grid-stride 4x512 thr/SM U8", timeit([&] { copy_kernel<8><<<4 * sms, 512>>>(i4, o4, n4); }));
        report("grid-stride 1x512 thr/SM U8", timeit([&] { copy_kernel<8><<<sms, 512>>>(i4, o4, n4); }));
        report("grid-stride 1x1024 U4 ldcs/stcs", timeit([&] { copy_cs_kernel<4><<<sms, 1024>>>(i4, o4, n4); }));
        report("grid-stride 1x1024 U4 ldg/stcs", timeit([&] { copy_stcs_kernel<4><<<sms, 1024>>>(i4, o4, n4); }));
        report("grid-stride 2x1024 U4 ldcs/stcs", timeit([&] { copy_cs_kernel<4><<<2 * sms, 1024>>>(i4, o4, n4); }));
        {
            auto tma = [&](auto kernel, int per_sm, int chunk, int stages, const char* name) {
                const int smem = chunk * stages;
                cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
                const long long chunks = n * 4 / chunk;
                report(name, timeit([&] { kernel<<<per_sm * sms, 32, smem>>>((const char*)x, (char*)y, chunks); }));
                cudaError_t e = cudaGetLastError();
                if (e != cudaSuccess) printf("  %s\n", cudaGetErrorString(e));
            };
            tma(tma_copy_kernel<4, 32768>, 1, 32768, 4, "tma 1/SM 4 x 32 KB");
            tma(tma_copy_kernel<6, 32768>, 1, 32768, 6, "tma 1/SM 6 x 32 KB");
            tma(tma_copy_kernel<8, 16384>, 1, 16384, 8, "tma 1/SM 8 x 16 KB");
            tma(tma_copy_kernel<4, 16384>, 2, 16384, 4, "tma 2/SM 4 x 16 KB");
            tma(tma_copy_kernel<4, 8192>, 4, 8192, 4, "tma 4/SM 4 x 8 KB");
        }
        // check the last copy
        {
            std::vector<float> h(1 << 20);
            cudaMemcpy(h.data(), y + n - (1 << 20), 4 << 20, cudaMemcpyDeviceToHost);
            std::vector<float> g(1 << 20);
            cudaMemcpy(g.data(), x + n - (1 << 20), 4 << 20, cudaMemcpyDeviceToHost);
            printf("tail equal: %d\n", (int)(h == g));
        }
        report("row ranges 1x1024 U4", timeit([&] { row_range_copy_kernel<4><<<sms, 1024>>>(i4, o4, N, C / 4); }));
        report("row ranges 1x1024 U8", timeit([&] { row_range_copy_kernel<8><<<sms, 1024>>>(i4, o4, N, C / 4); }));
        report("row ranges 2x1024 U4", timeit([&] { row_range_copy_kernel<4><<<2 * sms, 1024>>>(i4, o4, N, C / 4); }));
        report("row ranges 1x1024 U4, 4096-col rows", timeit([&] { row_range_copy_kernel<4><<<sms, 1024>>>(i4, o4, N * 8, C / 32); }));
        report("memcpy 1 GiB x2", timeit([&] { cudaMemcpyAsync(y, x, n * 2, cudaMemcpyDeviceToDevice); cudaMemcpyAsync(y + n / 2, x + n / 2, n * 2, cudaMemcpyDeviceToDevice); }));
        report("rows 1x1024 U4 (sync a row)", timeit([&] { row_copy_kernel<4><<<sms, 1024>>>(i4, o4, N, C / 4); }));
        report("rows 1x1024 U8 (sync a row)", timeit([&] { row_copy_kernel<8><<<sms, 1024>>>(i4, o4, N, C / 4); }));
        report("rows 2x1024 U4 (sync a row)", timeit([&] { row_copy_kernel<4><<<2 * sms, 1024>>>(i4, o4, N, C / 4); }));
    }
    return 0;
}
