// ---- the fused gradient kernel's sink: the sum, and each gradient stored --------------------
namespace lj {

// A reduction that also writes d value / d input for G inputs, scaled, where each element lives.
template <int G>
struct GradSink {
    Grads<G> grads;
    float scale;
    double acc = 0.0;
    long long row = 0;
    __device__ __forceinline__ explicit GradSink(const Grads<G>& g) : grads(g), scale(g.total_scale()) {}
    template <int R>
    __device__ __forceinline__ void begin_row(const long long (&c)[kMaxRank]) {
        row = offset<R - 1>(c, grads.strides);
    }
    template <int VW, class Result>
    __device__ __forceinline__ void put(const Result (&r)[VW], long long col) {
        if (VW == 4) {
            acc += (double)((r[0].value + r[1].value) + (r[2].value + r[3].value));
        } else {
#pragma unroll
            for (int j = 0; j < VW; ++j) acc += (double)r[j].value;
        }
#pragma unroll
        for (int g = 0; g < G; ++g) {
            float* at = grads.ptr[g] + row + col;
            if (VW == 4) {
                *reinterpret_cast<float4*>(at) = make_float4(scale * r[0].grad[g], scale * r[1].grad[g],
                                                             scale * r[2].grad[g], scale * r[3].grad[g]);
            } else {
#pragma unroll
                for (int j = 0; j < VW; ++j) at[j] = scale * r[j].grad[g];
            }
        }
    }
    template <int R, class Result>
    __device__ __forceinline__ void put_at(const Result& r, const long long (&c)[kMaxRank]) {
        acc += (double)r.value;
        const long long o = offset<R>(c, grads.strides);
#pragma unroll
        for (int g = 0; g < G; ++g) grads.ptr[g][o] = scale * r.grad[g];
    }
};

}  // namespace lj
