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
