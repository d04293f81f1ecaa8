// ---- lossjit prelude: the fixed part of every generated kernel --------------------------------
// NVRTC compiles this with no system or CUDA headers: only builtins are used. Before it comes the
// ABI (templates/abi.cuh); after it the finish, the sink and the loop this kernel uses
// (templates/*.cuh), then the program.
namespace lj {

// Coordinates of linear element i over the collapsed dims (innermost dim varies fastest).
template <int R>
__device__ __forceinline__ void coords(const Extents& e, long long i, long long (&c)[kMaxRank]) {
#pragma unroll
    for (int d = R - 1; d > 0; --d) {
        c[d] = i % e.dims[d];
        i /= e.dims[d];
    }
    c[0] = i;
}

template <int R>
__device__ __forceinline__ long long offset(const long long (&c)[kMaxRank], const long long* strides) {
    long long o = 0;
#pragma unroll
    for (int d = 0; d < R; ++d) o += c[d] * strides[d];
    return o;
}

}  // namespace lj

// ---- end of prelude -----------------------------------------------------------------------------
