// ---- lj_div_by: x / c for a constant c, correctly rounded, without the division's slow path -----
// IEEE division (div.rn) checks its operands and branches to a slow path that zeros take too: on
// an H200 the hardsigmoid map clamp(x + 3, 0, 6) / 6 over normal data (16% zeros) ran at 92% of
// the copy rate against 100% with this. The printer (ir/print.cpp) calls it for a float32
// division by a constant c with 2^-40 <= |c| <= 2^40, passing rc = 1 / c rounded to nearest.
//
// q = x rc, then one FMA correction (Markstein): RN(q + (x - q c) rc) is the correctly rounded
// x / c when nothing underflows or overflows, which |x| in [2^-80, 2^80] ensures for such c
// (checked: every float x for c = 6 and c = 0x1.fffffep0, a dense sample for others in
// tests/test_lj_div.cpp, which compiles this same text on the host). Zeros give x rc, the signed
// zero the division gives; the rest (tiny, huge, inf, nan) divide.
__device__ __forceinline__ float lj_div_by(float x, float c, float rc) {
    const float q = x * rc;
    const float ax = fabsf(x);
    if (ax >= 0x1p-80f && ax <= 0x1p80f) return fmaf(fmaf(-q, c, x), rc, q);
    return ax == 0.0f ? q : x / c;
}
__device__ __forceinline__ double lj_div_by(double x, double c, double) { return x / c; }

// For a c known only at launch (a parameter, as smooth L1's beta): rc = lj_div_reciprocal(c) is
// computed once per thread (a member of the kernel's Element, ir/print.cpp: param_reciprocals), 1 / c
// where lj_div_by may use it, else 0, and each element then takes lj_div_by or, for rc = 0, divides.
__device__ __forceinline__ float lj_div_reciprocal(float c) {
    const float ac = fabsf(c);
    return ac >= 0x1p-40f && ac <= 0x1p40f ? 1.0f / c : 0.0f;
}
__device__ __forceinline__ double lj_div_reciprocal(double) { return 0.0; }
__device__ __forceinline__ float lj_div_by_param(float x, float c, float rc) {
    return rc != 0.0f ? lj_div_by(x, c, rc) : x / c;
}
__device__ __forceinline__ double lj_div_by_param(double x, double c, double) { return x / c; }
