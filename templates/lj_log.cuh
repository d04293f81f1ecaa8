// ---- lj_log: lossjit's float32 natural logarithm (the builtins table's `log` and `xlogy`) -------
// Cheaper than CUDA's logf (no select chain for the special cases on the common path) with a
// measured maximum error of 0.95 ulp over every positive float, subnormals included
// (tests/test_lj_log.cpp: a sample in the emit suite, all 2^31 with LOSSJIT_EXHAUSTIVE=1).
// Exact special cases: log(+-0) = -inf, log(x < 0) = nan, log(+inf) = +inf, log(nan) = nan,
// log(1) = 0. Float64 stays CUDA's log. With --use_fast_math this is CUDA's log as before (__logf).
//
// The same text is compiled on the host by the tests, so every operation is spelled out: fmaf
// where a product is added (nothing for NVRTC to contract), no other library call. Keep it so.
//
// x = m 2^k with m in [2/3, 4/3): the bits of x less 0x3f2aaaab (2/3), masked to the exponent field,
// are k 2^23. f = m - 1 is exact, log(m) = log1p(f) = f + f^2 q(f) on f in [-1/3, 1/3], q the
// minimax polynomial of degree 8 for the relative error (2^-27.7 before rounding), and
// log(x) = k ln2 + log1p(f), with float(ln2) 2^-23 times the exponent field k 2^23 (exact in float).
__device__ __forceinline__ float lj_log_core(int bits, int exponent_bias) {
    const unsigned u = (unsigned)bits;
    const unsigned field = (u - 0x3f2aaaabu) & 0xff800000u;  // k 2^23
    const float m = __int_as_float((int)(u - field));
    const float k = (float)((int)field + exponent_bias);     // exact: a multiple of 2^23 below 2^31
    const float f = m - 1.0f;
    const float s = f * f;
    float q = -0x1.0931dap-3f;
    q = fmaf(q, f, 0x1.1ed144p-3f);
    q = fmaf(q, f, -0x1.f25ddep-4f);
    q = fmaf(q, f, 0x1.1ebe68p-3f);
    q = fmaf(q, f, -0x1.55a754p-3f);
    q = fmaf(q, f, 0x1.99d1f2p-3f);
    q = fmaf(q, f, -0x1.fffe84p-3f);
    q = fmaf(q, f, 0x1.555502p-2f);
    q = fmaf(q, f, -0x1p-1f);
    const float r = fmaf(q, s, f);
    return fmaf(k, 0x1.62e43p-24f, r);  // float(ln2) 2^-23
}

// Everything but the positive normal floats: rare, so out of the common path.
__device__ __forceinline__ float lj_log_rare(float a) {
    if (a > 0.0f && a < 0x1p-126f)  // subnormal: scaled by 2^23 into the normals, the exponent put back
        return lj_log_core(__float_as_int(a * 0x1p23f), -(23 << 23));
    if (a == 0.0f) return __int_as_float((int)0xff800000u);  // -inf, for either zero
    if (a < 0.0f) return __int_as_float(0x7fffffff);        // nan
    return a + a;                                            // +inf stays, nan stays nan
}

__device__ __forceinline__ float lj_log(float a) {
#if __USE_FAST_MATH__
    return log(a);  // __logf under --use_fast_math
#else
    const int bits = __float_as_int(a);
    float r = lj_log_core(bits, 0);
    if ((unsigned)bits - 0x00800000u >= 0x7f000000u) r = lj_log_rare(a);  // not in [2^-126, FLT_MAX]
    return r;
#endif
}
__device__ __forceinline__ double lj_log(double a) { return log(a); }

// The common path of lj_log for the rows loop (templates/rows.cuh, Element::common_path): only the
// positive normal floats are computed; any other input sets `rare`, and the loop computes the
// elements of that vector again with lj_log. Equal to lj_log wherever `rare` stays false. One range
// test folded into a flag per log, instead of a test, a branch and its reconvergence per log: KL's two
// logs per element, bound by arithmetic on the H200, went from about 49 to 42 instructions per element.
__device__ __forceinline__ float lj_log_common(float a, bool& rare) {
#if __USE_FAST_MATH__
    return log(a);
#else
    const int bits = __float_as_int(a);
    rare |= (unsigned)bits - 0x00800000u >= 0x7f000000u;  // | not ||: no branch
    return lj_log_core(bits, 0);
#endif
}
__device__ __forceinline__ double lj_log_common(double a, bool&) { return log(a); }

// ---- lj_kl_term: a log(a) - a log(b) with one logarithm (KL's term) -------------------------------
// The CUDA printer (src/ir/print.cpp) prints `xlogy(a, a) - a * log(b)` in float32 as this: the
// term a log(a / b), where the two logarithms cost about 17 instructions each and bound KL by
// arithmetic on the H200.
//
// q = a * rcp(b), rcp.approx (at most 1 ulp), so q b = a (1 + d) with |d| < 2^-22.4; the residual
// r = a - q b (one fma) is -a d, and log(a / b) = log(q) - log1p(d), so
//   a log(a / b) = a log(q) - a log1p(d) = a log(q) + r + O(a d^2 / 2),
// the last under 2^-45.8 a. The term is fma(a, lj_log(q), r): lj_log's 0.95 ulp of log(q), r's and
// the fma's roundings, and 2^-43 a; in ulp of the term (a's mantissa can halve the product's ulp) at
// most 3.5, measured 2.0 (tests/test_lj_log.cpp, on the host with rcp one ulp off; the GPU test with
// the instruction itself). No reciprocal of a (an earlier form added r / a to the log: 2.5 ulp, and
// 38 instructions an element against 32.5 on the H200, 90% of the read roofline against 96%). The two-log form rounds a log(a)
// and a log(b) apart, which cancel where a is near b: thousands of ulp of the term there.
//
// Its common path takes b a positive normal float and either a = 0 (one-hot targets: 0, as the
// two-log form gives) or q a positive normal float (so a is positive and finite: subnormal or
// huge a included, whose products the fma rounds once); anything else (zeros of b, subnormals, inf,
// nan, negatives, a ratio out of range) takes the two-log form, whose special values are the
// language's. Under fast math the two-log form with CUDA's fast log, as before.
#if defined(__CUDA_ARCH__)
// The .ftz form is one MUFU.RCP; b is normal on the common path, and a reciprocal that flushes to 0
// (b >= 2^126) makes q 0, which the path's check sends to the two-log form.
__device__ __forceinline__ float lj_rcp_approx(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
#endif
__device__ __forceinline__ float lj_kl_term_two_logs(float a, float b) {
    const float term = (a == 0.0f ? 0.0f : a * lj_log(a)) - a * lj_log(b);
    // a log(a / a) is exactly 0 for positive finite a, whatever a contraction of the two products rounds
    return a == b && a > 0.0f && a <= 0x1.fffffep127f ? 0.0f : term;
}
__device__ __forceinline__ float lj_kl_term_common(float a, float b, bool& rare) {
#if __USE_FAST_MATH__
    return lj_kl_term_two_logs(a, b);
#else
    const float q = a * lj_rcp_approx(b);
    const float r = fmaf(-q, b, a);
    const unsigned ub = (unsigned)__float_as_int(b), uq = (unsigned)__float_as_int(q);
    const bool b_normal = ub - 0x00800000u < 0x7f000000u;  // positive normal
    const bool q_normal = uq - 0x00800000u < 0x7f000000u;
    const bool zero = a == 0.0f;                            // +0 or -0
    rare |= !(b_normal & (zero | q_normal));
    const float term = fmaf(a, lj_log_core((int)uq, 0), r);
    return zero | (a == b) ? 0.0f : term;  // a == b: exactly 0, as two logs give (rcp's q need not be 1)
#endif
}
__device__ __forceinline__ float lj_kl_term(float a, float b) {
    bool rare = false;
    const float term = lj_kl_term_common(a, b, rare);
    return rare ? lj_kl_term_two_logs(a, b) : term;
}
