// ---- the fused gradient kernel's sink: the sum, and each gradient stored --------------------
namespace lj {

// A reduction that also writes d value / d input for each of F's gradients, scaled, where each
// element lives, in the gradient's type (F::grad_dtype).
template <class F>
struct GradSink {
    using T = typename F::Value;
    static constexpr int G = F::kGrads;
    Grads<G> grads;
    T scale;
    double acc = 0.0;
    long long row = 0;
    __device__ __forceinline__ explicit GradSink(const Grads<G>& g) : grads(g), scale((T)g.total_scale()) {}
    template <int R>
    __device__ __forceinline__ void begin_row(const long long (&c)[kMaxRank]) {
        row = offset<R - 1>(c, grads.strides);
    }
    template <int VW, class Result>
    __device__ __forceinline__ void put(const Result (&r)[VW], long long col) {
        if (VW % 4 == 0) {
#pragma unroll
            for (int q = 0; q < VW; q += 4)
                acc += (double)((r[q].value + r[q + 1].value) + (r[q + 2].value + r[q + 3].value));
        } else {
#pragma unroll
            for (int j = 0; j < VW; ++j) acc += (double)r[j].value;
        }
#pragma unroll
        for (int g = 0; g < G; ++g) {
            T scaled[VW];
#pragma unroll
            for (int j = 0; j < VW; ++j) scaled[j] = scale * r[j].grad[g];
            store_row<VW>(F::grad_dtype(g), grads.ptr[g], row + col, scaled);
        }
    }
    template <int R, class Result>
    __device__ __forceinline__ void put_at(const Result& r, const long long (&c)[kMaxRank]) {
        acc += (double)r.value;
        const long long o = offset<R>(c, grads.strides);
#pragma unroll
        for (int g = 0; g < G; ++g) store1<T>(F::grad_dtype(g), grads.ptr[g], o, scale * r.grad[g]);
    }
};

}  // namespace lj
