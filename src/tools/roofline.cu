// Plain streaming kernels that set the roofline lossjit is compared against: the best read rate and
// copy rate this GPU reaches with simple, well-formed code. Embedded into lossjit_tools and compiled
// with NVRTC by load_roofline() (tools/roofline.hpp) for the sweep (read_u4) and bench/bench.cpp
// (every variant); one extern "C" entry per variant.
template <int U, bool STREAMING>
__device__ __forceinline__ void read_impl(const float4* __restrict__ p, long long n, float* sink) {
    float acc = 0.0f;
    const long long tile = (long long)blockDim.x * U;
    for (long long base = (long long)blockIdx.x * tile; base < n; base += (long long)gridDim.x * tile) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const long long i = base + (long long)u * blockDim.x + threadIdx.x;
            v[u] = i < n ? (STREAMING ? __ldcs(p + i) : __ldg(p + i)) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    if (acc == 1234.5678f) *sink = acc;  // never true in practice; keeps the loads alive
}

template <int U>
__device__ __forceinline__ void copy_impl(const float4* __restrict__ in, float4* __restrict__ out, long long n) {
    const long long tile = (long long)blockDim.x * U;
    for (long long base = (long long)blockIdx.x * tile; base < n; base += (long long)gridDim.x * tile) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const long long i = base + (long long)u * blockDim.x + threadIdx.x;
            if (i < n) v[u] = __ldcs(in + i);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const long long i = base + (long long)u * blockDim.x + threadIdx.x;
            if (i < n) __stcs(out + i, v[u]);
        }
    }
}

extern "C" __global__ void read_u1(const float4* p, long long n, float* s) { read_impl<1, false>(p, n, s); }
extern "C" __global__ void read_u2(const float4* p, long long n, float* s) { read_impl<2, false>(p, n, s); }
extern "C" __global__ void read_u4(const float4* p, long long n, float* s) { read_impl<4, false>(p, n, s); }
extern "C" __global__ void read_u8(const float4* p, long long n, float* s) { read_impl<8, false>(p, n, s); }
extern "C" __global__ void read_cs_u4(const float4* p, long long n, float* s) { read_impl<4, true>(p, n, s); }
extern "C" __global__ void read_cs_u8(const float4* p, long long n, float* s) { read_impl<8, true>(p, n, s); }
// One tile per block, no loop: the shape Triton-generated elementwise kernels have.
extern "C" __global__ void copy_oneshot_u2(const float4* in, float4* out, long long n) {
    const long long base = (long long)blockIdx.x * blockDim.x * 2 + threadIdx.x;
    float4 v[2];
#pragma unroll
    for (int u = 0; u < 2; ++u)
        if (base + u * blockDim.x < n) v[u] = __ldcs(in + base + u * blockDim.x);
#pragma unroll
    for (int u = 0; u < 2; ++u)
        if (base + u * blockDim.x < n) out[base + u * blockDim.x] = v[u];
}
extern "C" __global__ void copy_u1(const float4* i, float4* o, long long n) { copy_impl<1>(i, o, n); }
extern "C" __global__ void copy_u2(const float4* i, float4* o, long long n) { copy_impl<2>(i, o, n); }
extern "C" __global__ void copy_u4(const float4* i, float4* o, long long n) { copy_impl<4>(i, o, n); }

// STREAM "add", c = a + b: two reads and one write per element, the traffic of a fused loss and
// gradient (read p and t, write grad_p). The floor of value_and_grad is set by this mix.
template <int U>
__device__ __forceinline__ void add_impl(const float4* __restrict__ a, const float4* __restrict__ b,
                                         float4* __restrict__ c, long long n) {
    const long long tile = (long long)blockDim.x * U;
    for (long long base = (long long)blockIdx.x * tile; base < n; base += (long long)gridDim.x * tile) {
        float4 x[U], y[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const long long i = base + (long long)u * blockDim.x + threadIdx.x;
            if (i < n) {
                x[u] = __ldcs(a + i);
                y[u] = __ldcs(b + i);
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const long long i = base + (long long)u * blockDim.x + threadIdx.x;
            if (i < n) __stcs(c + i, make_float4(x[u].x + y[u].x, x[u].y + y[u].y, x[u].z + y[u].z, x[u].w + y[u].w));
        }
    }
}
extern "C" __global__ void add_u1(const float4* a, const float4* b, float4* c, long long n) { add_impl<1>(a, b, c, n); }
extern "C" __global__ void add_u2(const float4* a, const float4* b, float4* c, long long n) { add_impl<2>(a, b, c, n); }
extern "C" __global__ void add_u4(const float4* a, const float4* b, float4* c, long long n) { add_impl<4>(a, b, c, n); }
// One tile per block, no loop.
extern "C" __global__ void add_oneshot_u2(const float4* a, const float4* b, float4* c, long long n) {
    if ((long long)blockIdx.x * blockDim.x * 2 < n) add_impl<2>(a, b, c, min(n, ((long long)blockIdx.x + 1) * blockDim.x * 2));
}
