// ---- a map's sink: the output tensor --------------------------------------------------------
namespace lj {

// Stores each value into the output, of type DT (rounded there: dtype.cuh).
template <int DT>
struct StoreSink {
    Output out;
    long long row = 0;
    template <int R>
    __device__ __forceinline__ void begin_row(const long long (&c)[kMaxRank]) {
        row = offset<R - 1>(c, out.strides);
    }
    template <int VW, class T>
    __device__ __forceinline__ void put(const T (&r)[VW], long long col) {
        store_row<VW>(DT, out.ptr, row + col, r);
    }
    __device__ __forceinline__ bool whole_rows() const { return false; }
    template <int BLOCK>
    __device__ __forceinline__ void end_tile(long long, long long, long long, long long) {}
    template <int R, class T>
    __device__ __forceinline__ void put_at(T r, const long long (&c)[kMaxRank]) {
        store1<T>(DT, out.ptr, offset<R>(c, out.strides), r);
    }
};

}  // namespace lj
