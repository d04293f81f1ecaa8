// ---- lossjit prelude: the fixed part of every generated kernel --------------------------------
// NVRTC compiles this with no system or CUDA headers: only builtins are used. Before it comes the
// ABI (templates/abi.cuh); after it the finish, the sink and the loop this kernel uses
// (templates/*.cuh), then the program.
namespace lj {

// std::conditional_t, which NVRTC's --minimal compile has no header for.
template <bool C, class A, class B> struct conditional { using type = A; };
template <class A, class B> struct conditional<false, A, B> { using type = B; };
template <bool C, class A, class B> using conditional_t = typename conditional<C, A, B>::type;

// Arithmetic the compiler may not contract into a fused multiply-add (the CUDA printer uses these
// for the elements of an amax / amin: ExpressionPrinter, uncontracted_nodes). A walk that finds a
// row's largest element and a later walk that compares each element with it evaluate the same
// expression twice; contracted in one place and not in the other, no element equals the largest
// and the gradient, g / (the count of equal elements), was nan for the whole row.
template <class T> struct is_double { static constexpr bool value = false; };
template <> struct is_double<double> { static constexpr bool value = true; };
template <class A, class B>
__device__ __forceinline__ auto add_rn(A a, B b) {
    if constexpr (is_double<decltype(a + b)>::value) return __dadd_rn(a, b);
    else return __fadd_rn(a, b);
}
template <class A, class B>
__device__ __forceinline__ auto sub_rn(A a, B b) {
    if constexpr (is_double<decltype(a - b)>::value) return __dsub_rn(a, b);
    else return __fsub_rn(a, b);
}
template <class A, class B>
__device__ __forceinline__ auto mul_rn(A a, B b) {
    if constexpr (is_double<decltype(a * b)>::value) return __dmul_rn(a, b);
    else return __fmul_rn(a, b);
}

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

// The "last one finishes" protocol of every kernel whose blocks (or warps) each leave partial
// results that the last of them combines: a whole-tensor reduction's blocks, the row kernel's
// totals, the columns loop's chunks, summed gradients per element and over everything. One thread
// of each participant, after its partials are written, calls arrive_last; it is true for the last
// of `participants` to arrive. That participant's readers call see_partials before reading the
// others' partials (with __ldcg, from L2), and it resets the counter with leave_arrivals_at_zero,
// so the next launch finds it at 0 (the host zeroes a counter only when it allocates it).
__device__ __forceinline__ bool arrive_last(unsigned int* counter, unsigned int participants) {
    __threadfence();  // this participant's partials are visible before its arrival is
    return atomicAdd(counter, 1u) == participants - 1;
}
__device__ __forceinline__ void see_partials() { __threadfence(); }
__device__ __forceinline__ void leave_arrivals_at_zero(unsigned int* counter) { *counter = 0u; }

}  // namespace lj

// ---- end of prelude -----------------------------------------------------------------------------
