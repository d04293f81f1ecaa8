// ---- a map's sink: the output tensor --------------------------------------------------------
namespace lj {

struct StoreSink {
    Output out;
    float* row = nullptr;
    template <int R>
    __device__ __forceinline__ void begin_row(const long long (&c)[kMaxRank]) {
        row = out.ptr + offset<R - 1>(c, out.strides);
    }
    template <int VW>
    __device__ __forceinline__ void put(const float (&r)[VW], long long col) {
        if (VW == 4) {
            *reinterpret_cast<float4*>(row + col) = make_float4(r[0], r[1], r[2], r[3]);
        } else {
#pragma unroll
            for (int j = 0; j < VW; ++j) row[col + j] = r[j];
        }
    }
    template <int R>
    __device__ __forceinline__ void put_at(float r, const long long (&c)[kMaxRank]) {
        out.ptr[offset<R>(c, out.strides)] = r;
    }
};

}  // namespace lj
