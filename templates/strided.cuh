// ---- the strided loop -----------------------------------------------------------------------
namespace lj {

// Any strides: coordinates per element. Used only when some operand is not contiguous along the
// innermost dimension (a transposed view, say).
template <int BLOCK, int R, class F, class Sink>
__device__ __forceinline__ void for_each_strided(const Extents& e, const Inputs<F::kInputs>& in, const F& f,
                                                 Sink& sink) {
    using T = typename F::Value;
    constexpr int N = F::kInputs;
    constexpr int S = N > 0 ? N : 1;
    const long long step = (long long)gridDim.x * BLOCK;
    for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < e.count; i += step) {
        long long c[kMaxRank];
        coords<R>(e, i, c);
        T x[S];
#pragma unroll
        for (int k = 0; k < N; ++k) x[k] = load1<T>(F::dtype(k), in.ptr[k], offset<R>(c, in.strides[k]));
        sink.template put_at<R>(f(x), c);
    }
}

}  // namespace lj
