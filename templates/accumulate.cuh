// ---- accumulators other than float64 (Options::accumulator; docs/tuning.md) -----------------------
// Appended to the prelude only for kernels that use one, so float64 kernels are unchanged.
namespace lj {

// float32: no conversions at all; the error grows with the elements each thread adds.
struct AccFloat32 {
    float sum = 0.0f;
    __device__ __forceinline__ void add(float x) { sum += x; }
    __device__ __forceinline__ operator double() const { return (double)sum; }
};

// float32 with Neumaier's compensation: the rounding error of every addition is kept in `c` and
// added back at the end. NVRTC does not reassociate float additions (not even with fast math), so
// the compensation survives optimisation.
struct AccCompensated {
    float sum = 0.0f;
    float c = 0.0f;
    __device__ __forceinline__ void add(float x) {
        const float t = sum + x;
        c += fabsf(sum) >= fabsf(x) ? (sum - t) + x : (x - t) + sum;
        sum = t;
    }
    __device__ __forceinline__ operator double() const { return (double)sum + (double)c; }
};

// float64 programs always accumulate in float64 (KernelSpec::choose), so values here are floats.
__device__ __forceinline__ float value_of(float r) { return r; }
template <class Result>
__device__ __forceinline__ float value_of(const Result& r) { return r.value; }

// A sink (SumSink, GradSink) whose values are summed in Acc instead of its own float64 `acc`: that
// one is never read, so the compiler drops it. `Accumulating<A, GradSink<G>> s{grads}` initialises
// the wrapped sink. finish_reduction takes `s.acc`, converted to double.
template <class Acc, class Sink>
struct Accumulating {
    Sink sink;
    Acc acc;
    template <class... Args>  // what the wrapped sink is made from (GradSink: the Grads)
    __device__ __forceinline__ explicit Accumulating(const Args&... args) : sink(args...) {}
    template <int R>
    __device__ __forceinline__ void begin_row(const long long (&c)[kMaxRank]) {
        sink.template begin_row<R>(c);
    }
    template <int VW, class Result>
    __device__ __forceinline__ void put(const Result (&r)[VW], long long col) {
        if (VW % 4 == 0) {
            // As the float64 path does: each four lanes of a vector load are added first.
#pragma unroll
            for (int q = 0; q < VW; q += 4)
                acc.add((value_of(r[q]) + value_of(r[q + 1])) + (value_of(r[q + 2]) + value_of(r[q + 3])));
        } else {
#pragma unroll
            for (int j = 0; j < VW; ++j) acc.add(value_of(r[j]));
        }
        sink.template put<VW>(r, col);
    }
    __device__ __forceinline__ bool whole_rows() const { return sink.whole_rows(); }
    template <int BLOCK>
    __device__ __forceinline__ void end_tile(long long tile, long long row, long long tiles_per_row, long long tiles) {
        sink.template end_tile<BLOCK>(tile, row, tiles_per_row, tiles);
    }
    template <int BLOCK>
    __device__ __forceinline__ void finish_sums() {
        sink.template finish_sums<BLOCK>();  // (value_and_grad.cu: Sink is a GradSink)
    }
    template <int R, class Result>
    __device__ __forceinline__ void put_at(const Result& r, const long long (&c)[kMaxRank]) {
        acc.add(value_of(r));
        sink.template put_at<R>(r, c);
    }
};

}  // namespace lj
