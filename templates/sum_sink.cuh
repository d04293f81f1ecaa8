// ---- a reduction's sink: the sum of the values ----------------------------------------------
namespace lj {

struct SumSink {
    double acc = 0.0;  // float64 per thread: the result does not lose digits as the input grows
    template <int R>
    __device__ __forceinline__ void begin_row(const long long (&)[kMaxRank]) {}
    template <int VW, class T>
    __device__ __forceinline__ void put(const T (&r)[VW], long long) {
        if (VW % 4 == 0) {
            // One float64 conversion per four elements: conversions run at 1/8 of the FP32 rate on
            // sm_90, and a float sum of four terms loses nothing the float64 total would keep.
#pragma unroll
            for (int q = 0; q < VW; q += 4) acc += (double)((r[q] + r[q + 1]) + (r[q + 2] + r[q + 3]));
        } else {
#pragma unroll
            for (int j = 0; j < VW; ++j) acc += (double)r[j];
        }
    }
    __device__ __forceinline__ bool whole_rows() const { return false; }
    template <int BLOCK>
    __device__ __forceinline__ void end_tile(long long, long long, long long, long long) {}
    template <int R, class T>
    __device__ __forceinline__ void put_at(T r, const long long (&)[kMaxRank]) { acc += (double)r; }
};

}  // namespace lj
