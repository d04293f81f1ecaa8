// lossjit's float32 log (templates/lj_log.cuh) compiled on the host from the same file the kernels
// get: IEEE float operations and fmaf give the GPU's bits when there is no fast math. Checked
// against float64 log: the special cases, a dense sample, and (LOSSJIT_EXHAUSTIVE=1, or
// `lossjit_tests -tc="lj_log: every positive float" --no-skip`) all 2^31 positive floats.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

namespace lj_host {
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
using std::fmaf;
using std::log;
// rcp.approx's bound, at least 1 ulp off: the correctly rounded reciprocal moved one ulp, up for
// even bit patterns and down for odd ones (the GPU's own instruction: the GPU test of lj_kl_term).
inline float lj_rcp_approx(float x) {
    const float r = 1.0f / x;
    return std::nextafter(r, (__float_as_int(x) & 1) ? 0.0f : 2.0f * r);
}
#define __device__
#define __forceinline__ inline
#include "../templates/lj_log.cuh"
#undef __device__
#undef __forceinline__
}  // namespace lj_host

namespace {

float bits_float(std::uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }

// |lj_log(x) - log(x)| in units of the last place of the exact value (as a float).
double ulp_error(float x) {
    const float r = lj_host::lj_log(x);
    const double y = std::log(static_cast<double>(x));
    if (y == 0.0) return r == 0.0f ? 0.0 : std::numeric_limits<double>::infinity();
    int e = 0;
    std::frexp(y, &e);
    return std::fabs(static_cast<double>(r) - y) / std::ldexp(1.0, e - 24);
}

// The largest error over bit patterns [lo, hi) taking every stride-th, on `threads` threads.
double max_ulp(std::uint32_t lo, std::uint32_t hi, std::uint32_t stride, unsigned threads) {
    std::vector<double> worst(threads, 0.0);
    std::vector<std::thread> pool;
    const std::uint64_t count = (static_cast<std::uint64_t>(hi) - lo + stride - 1) / stride;
    for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            for (std::uint64_t i = t; i < count; i += threads)
                worst[t] = std::max(worst[t], ulp_error(bits_float(static_cast<std::uint32_t>(lo + i * stride))));
        });
    for (auto& th : pool) th.join();
    double m = 0.0;
    for (double w : worst) m = std::max(m, w);
    return m;
}

constexpr double kBoundUlp = 1.0;  // measured: 0.945 (exhaustive)

}  // namespace

TEST_SUITE("emit") {

TEST_CASE("lj_log: special cases are exact") {
    using lj_host::lj_log;
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(lj_log(0.0f) == -inf);
    CHECK(lj_log(-0.0f) == -inf);
    CHECK(lj_log(inf) == inf);
    CHECK(std::isnan(lj_log(-inf)));
    CHECK(std::isnan(lj_log(-1.0f)));
    CHECK(std::isnan(lj_log(-std::numeric_limits<float>::denorm_min())));
    CHECK(std::isnan(lj_log(std::numeric_limits<float>::quiet_NaN())));
    CHECK(lj_log(1.0f) == 0.0f);
    CHECK(!std::signbit(lj_log(1.0f)));
    CHECK(lj_log(2.0f) == static_cast<float>(std::log(2.0)));
    CHECK(ulp_error(std::numeric_limits<float>::denorm_min()) <= kBoundUlp);
    CHECK(ulp_error(std::numeric_limits<float>::max()) <= kBoundUlp);
    CHECK(ulp_error(std::nextafter(1.0f, 0.0f)) <= kBoundUlp);
    CHECK(ulp_error(std::nextafter(1.0f, 2.0f)) <= kBoundUlp);
    CHECK(lj_host::lj_log(0.5) == std::log(0.5));  // float64 is the library's log
}

TEST_CASE("lj_log: within 1 ulp on a dense sample of positive floats") {
    // Every float in [0.5, 2) (where log is near 0 and the error is largest relative to it, and
    // the exponent k ln2 partly cancels) and every 61st bit pattern elsewhere, subnormals included.
    CHECK(max_ulp(0x3f000000u, 0x40000000u, 1, 2) <= kBoundUlp);
    CHECK(max_ulp(0x00000001u, 0x7f800000u, 61, 2) <= kBoundUlp);
}

TEST_CASE("lj_log_common: lj_log's bits wherever it does not flag; flags exactly the non-normal and non-positive inputs") {
    // Every 4099th bit pattern of all 2^32 (both signs, zeros, subnormals, inf, nan) and the edges.
    std::vector<std::uint32_t> patterns{0x00000000u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x00800000u, 0x7f7fffffu,
                                        0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x3f800000u, 0xbf800000u};
    for (std::uint64_t b = 0; b <= 0xffffffffull; b += 4099) patterns.push_back(static_cast<std::uint32_t>(b));
    int flagged = 0, mismatched = 0, wrongly_flagged = 0, cleared = 0;
    for (const std::uint32_t b : patterns) {
        const float x = bits_float(b);
        bool rare = false;
        const float common = lj_host::lj_log_common(x, rare);
        const float full = lj_host::lj_log(x);
        const bool positive_normal = x >= 0x1p-126f && x <= std::numeric_limits<float>::max();
        if (rare != !positive_normal) ++wrongly_flagged;
        if (rare) ++flagged;
        else if (std::memcmp(&common, &full, sizeof(float)) != 0) ++mismatched;
        bool kept = true;  // a flag already set stays set
        lj_host::lj_log_common(x, kept);
        if (!kept) ++cleared;
    }
    CHECK(wrongly_flagged == 0);
    CHECK(mismatched == 0);
    CHECK(cleared == 0);
    CHECK(flagged > patterns.size() / 3);  // the negatives and the rest: the sample reaches them
}

// KL's term a log(a / b) against float64, for lj_kl_term (one log) and for the two-log form it
// replaces: the bound of templates/lj_log.cuh, 3.5 ulp of the term and 2^-43 a, and the error of
// the two-log form beside it (where it cancels, far further off).
namespace {
struct KlErrors {
    double worst_ulp = 0;          // lj_kl_term's largest error, in ulp of the exact term (beyond 2^-43 a)
    double two_logs_worst_ulp = 0; // the two-log form's, where it is finite
    int two_logs_overflow = 0;     // pairs where a log(a) or a log(b) overflows float but the term does not
    int rare = 0;                  // pairs that left the common path
};
void kl_error(float a, float b, KlErrors& e) {
    bool rare = false;
    lj_host::lj_kl_term_common(a, b, rare);
    e.rare += rare;
    // log1p where a is near b (a - b exact there), log of the ratio elsewhere: 2^-53 of the logarithm
    const double ad = a, bd = b;
    const double exact = std::fabs(ad - bd) < 0.5 * bd ? ad * std::log1p((ad - bd) / bd) : ad * std::log(ad / bd);
    if (std::fabs(exact) >= 0x1p128) return;  // beyond float: both forms overflow
    const double ulp = std::ldexp(1.0, std::max(std::ilogb(exact), -149 + 23) - 23);  // of the exact term, as a float
    const double slack = std::ldexp(static_cast<double>(a), -43);
    const double one = std::fabs(static_cast<double>(lj_host::lj_kl_term(a, b)) - exact);
    const double two = std::fabs(static_cast<double>(lj_host::lj_kl_term_two_logs(a, b)) - exact);
    e.worst_ulp = std::max(e.worst_ulp, std::max(0.0, one - slack) / ulp);
    if (std::isfinite(two)) e.two_logs_worst_ulp = std::max(e.two_logs_worst_ulp, two / ulp);
    else ++e.two_logs_overflow;
}
}  // namespace

TEST_CASE("lj_kl_term: one log within 3.5 ulp and 2^-43 a of a log(a / b); two logs cancel") {
    KlErrors e;
    std::uint64_t state = 0x9e3779b97f4a7c15ull;
    auto next = [&] {  // splitmix64
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    };
    auto uniform = [&] { return static_cast<double>(next() >> 11) * 0x1p-53; };
    for (int i = 0; i < 2000000; ++i) {
        // softmax-like probabilities (1e-12 to 1), pairs near each other, and any normal floats
        const float a = static_cast<float>(std::exp(-28.0 * uniform()));
        const float b = static_cast<float>(std::exp(-28.0 * uniform()));
        kl_error(a, b, e);
        const int ulps = static_cast<int>(next() % 64) - 32;
        float near = a;
        for (int k = 0; k < std::abs(ulps); ++k) near = std::nextafter(near, ulps < 0 ? 0.0f : 2.0f);
        kl_error(a, near, e);
        // any positive finite a (subnormal and huge a take the one log where the ratio is normal)
        kl_error(bits_float(static_cast<std::uint32_t>(0x00000001u + next() % 0x7f7fffffu)),
                 bits_float(static_cast<std::uint32_t>(0x00800000u + next() % 0x7f000000u)), e);
    }
    for (float a : {1.0f, 0.5f, 0x1p-126f, 0x1p-149f, 0x1.fffffep125f, 0x1.fffffep127f})
        for (float b : {1.0f, std::nextafter(1.0f, 0.0f), std::nextafter(1.0f, 2.0f), a, std::nextafter(a, 0.0f), 0x1p-126f, 0x1.fffffep125f})
            kl_error(a, b, e);
    MESSAGE("lj_kl_term: " << e.worst_ulp << " ulp at most; the two-log form " << e.two_logs_worst_ulp
            << " (and overflows in " << e.two_logs_overflow << " pairs); rare: " << e.rare);
    CHECK(e.worst_ulp <= 3.5);
    CHECK(e.two_logs_worst_ulp > 1000.0);  // the cancellation the one-log form avoids, so this test can tell them apart
}

TEST_CASE("lj_kl_term: the special values of the two-log form; its common path flags the rest") {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> values{0.0f, -0.0f, 0x1p-149f, 0x1p-127f, 0x1p-126f, 0.25f, 1.0f, 0x1p126f,
                                    std::numeric_limits<float>::max(), inf, -1.0f, -inf, nan};
    int flagged = 0;
    for (float a : values)
        for (float b : values) {
            CAPTURE(a);
            CAPTURE(b);
            bool rare = false;
            const float common = lj_host::lj_kl_term_common(a, b, rare);
            flagged += rare;
            const float term = lj_host::lj_kl_term(a, b), two = lj_host::lj_kl_term_two_logs(a, b);
            // the one log takes positive normal b with a zero or a positive finite a whose ratio is
            // normal (subnormal and huge a included; kl_error holds those to the bound)
            const bool a_ok = a >= 0.0f && a <= std::numeric_limits<float>::max();
            const bool b_ok = b >= 0x1p-126f && b <= std::numeric_limits<float>::max();
            if (!a_ok || !b_ok) {  // the two-log form's value, bit for bit
                CHECK(rare);
                CHECK((std::memcmp(&term, &two, sizeof term) == 0 || (std::isnan(term) && std::isnan(two))));
            } else if (!rare) {
                CHECK(std::memcmp(&term, &common, sizeof term) == 0);
                if (a == 0.0f) CHECK((term == 0.0f && !std::signbit(term)));
            }
            // xlogy(a, a) - a * log(b): 0 where a is 0 and log(b) finite, nan where a is 0 and b not positive finite
            if (a == 0.0f && b_ok) CHECK(term == 0.0f);
            if (a == 0.0f && (b <= 0.0f || std::isinf(b) || std::isnan(b))) CHECK(std::isnan(term));
        }
    CHECK(flagged > 0);
    // KL of a distribution against itself is 0: a == b gives exactly 0, as two logs do
    for (std::uint32_t bits = 0x00800000u; bits < 0x7e800000u; bits += 65537) {
        const float a = bits_float(bits);
        CAPTURE(a);
        CHECK(lj_host::lj_kl_term(a, a) == 0.0f);
    }
}

TEST_CASE("lj_log: within 1 ulp on every positive float" * doctest::skip(std::getenv("LOSSJIT_EXHAUSTIVE") == nullptr)) {
    const unsigned threads = std::max(2u, std::thread::hardware_concurrency());
    const double worst = max_ulp(0x00000001u, 0x7f800000u, 1, threads);
    MESSAGE("max ulp error over all positive finite floats: " << worst);
    CHECK(worst <= kBoundUlp);
}

}  // TEST_SUITE
