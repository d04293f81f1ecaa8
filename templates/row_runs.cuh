// ---- rows of two strides (KernelSpec::row_split): where column j of a row lies ---------------------
// The row is runs of `inner` columns (Layout::row_inner; the launch gives it in extents.dims[R]), an
// operand's strides[R] apart, strides[R - 1] within one. Which run a column is in: j / inner by a
// multiply-high and a shift instead of a division (Granlund and Montgomery, "Division by invariant
// integers using multiplication", 1994, Theorem 4.2 with N = 31: for 0 <= j < 2^31 and
// 2^(l-1) < d <= 2^l, m = ceil(2^(31+l) / d) < 2^32 gives j / d = (j m) >> (31 + l)). The host keeps
// such rows under 2^31 columns. Checked against division on the host: tests/test_row_runs.cpp
// compiles this same text there.
namespace lj {

struct RunDivider {
    unsigned d = 1, m = 0, s = 0;  // d < 2: the quotient is j itself
    __device__ __forceinline__ explicit RunDivider(unsigned divisor) : d(divisor) {
        if (d < 2u) return;
        const unsigned l = 32u - (unsigned)__clz((int)(d - 1u));  // ceil(log2 d), at least 1
        m = (unsigned)(((1ull << (31u + l)) + d - 1u) / d);
        s = l - 1u;
    }
    __device__ __forceinline__ unsigned quotient(unsigned j) const { return d < 2u ? j : __umulhi(j, m) >> s; }
};

// Column j's offset from the row's first element along `strides` (an operand's, of rank R).
template <int R>
__device__ __forceinline__ long long column_offset(long long j, const RunDivider& runs, const long long* strides) {
    const unsigned run = runs.quotient((unsigned)j);
    return (long long)run * strides[R] + (long long)((unsigned)j - run * runs.d) * strides[R - 1];
}

// An input the same along each run (stride 0 within it: group norm's per-channel weight beside the
// plane): one load for a vector's VW columns, which lie in one run (the runs are whole vectors).
template <int VW, class T>
__device__ __forceinline__ void load_run_constant(int dt, const void* p, long long at, T (&v)[VW]) {
    const T x = load1<T>(dt, p, at);
#pragma unroll
    for (int q = 0; q < VW; ++q) v[q] = x;
}

}  // namespace lj
