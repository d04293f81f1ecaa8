// ---- lj::CenteredAcc: a row's mean and squared deviations from it in one walk (var, std, and the
// mean beside them: the builtins table's centered accumulator, src/lang/builtins.cpp) ------------
// The mean exactly as SumAcc's (the same sum, in column order per thread), and the squared
// deviations from it as each thread's sums of (v - shift) and (v - shift)^2, shifted by the thread's
// first element (close to the mean, so that the difference s2 - s1^2 / n keeps its digits in float64),
// merged by Chan et al.'s pairwise update in the team's fixed order (the same bits every run; the
// update is symmetric, so the two lanes of a butterfly step agree to the bit).
// Non-finite elements make the squares nan, as the two passes' (e - mean) does.
//
// The same text is compiled on the host by the tests (tests/test_lj_centered.cpp: a block team's
// merges, butterfly and warp by warp, against a float64 two-pass variance), so it uses nothing but
// lj::shuffle_xor, which the host stands in for.
namespace lj {
struct CenteredAcc {  // one pass: the row's sum, and its squared deviations from the mean
    double s = 0.0;      // the plain sum (the mean: s / C)
    double n = 0.0;      // elements added
    double shift = 0.0;  // the first element added here, then the merged mean
    double s1 = 0.0, s2 = 0.0;  // sums of (v - shift) and (v - shift)^2
    template <class T> __device__ __forceinline__ void add(T v, long long) {
        const double x = (double)v;
        if (n == 0.0) shift = x;
        const double d = x - shift;
        s += x;
        n += 1.0;
        s1 += d;
        s2 = fma(d, d, s2);
    }
    // A merged side's s1 is 0 and its mean its shift: no division.
    __device__ __forceinline__ double mean() const { return s1 == 0.0 ? shift : shift + s1 / n; }
    __device__ __forceinline__ double m2() const { return s1 == 0.0 ? s2 : s2 - s1 * (s1 / n); }
    __device__ __forceinline__ void combine(const CenteredAcc& o) {
        s += o.s;
        if (o.n == 0.0) return;
        if (n == 0.0) {
            n = o.n, shift = o.shift, s1 = o.s1, s2 = o.s2;
            return;
        }
        // Symmetric in the two sides: a butterfly's partners, combining each other, get the same bits.
        // One division (a block team's every thread merges log2 of its threads times a row, 9 at 512;
        // six float64 divisions each, merged warp after warp, made layer norm's kernels latency-bound).
        // Equal means stay exact (a row of one repeated value: variance 0, not a rounding of 1 / total).
        const double ma = mean(), mb = o.mean(), total = n + o.n, delta = mb - ma, inverse = 1.0 / total;
        const double squares = (m2() + o.m2()) + delta * delta * ((n * o.n) * inverse);
        shift = ma == mb ? ma : (n * ma + o.n * mb) * inverse;
        n = total, s1 = 0.0, s2 = squares;
    }
    __device__ __forceinline__ CenteredAcc shuffle_xor(int o) const {
        CenteredAcc r;
        r.s = lj::shuffle_xor(s, o), r.n = lj::shuffle_xor(n, o), r.shift = lj::shuffle_xor(shift, o);
        r.s1 = lj::shuffle_xor(s1, o), r.s2 = lj::shuffle_xor(s2, o);
        return r;
    }
};
}  // namespace lj
