// lossjit's float32 division by a constant (templates/lj_div.cuh) compiled on the host from the
// same file the kernels get, checked bit for bit against IEEE division: a table of constants over
// every 257th bit pattern and the edges, and (LOSSJIT_EXHAUSTIVE=1) every float for c = 6 and for
// a constant whose significand is all ones. Which divisions call it: the printer's table in
// tests/test_emit.cpp, and here, that the printer's range for a constant is lj_div_reciprocal's.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "pipeline.hpp"

namespace lj_host {
inline float fabsf(float x) { return std::fabs(x); }
using std::fmaf;
#define __device__
#define __forceinline__ inline
#include "../templates/lj_div.cuh"
#undef __device__
#undef __forceinline__
}  // namespace lj_host

namespace {

float bits_float(std::uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
std::uint32_t float_bits(float f) { std::uint32_t b; std::memcpy(&b, &f, 4); return b; }

bool same(float a, float b) { return float_bits(a) == float_bits(b) || (std::isnan(a) && std::isnan(b)); }

// Bit patterns [0, 2^32) taking every stride-th (and the last), on `threads` threads: those whose
// lj_div_by differs from x / c.
std::uint64_t mismatches(float c, std::uint64_t stride, unsigned threads) {
    const float rc = 1.0f / c;
    std::vector<std::uint64_t> bad(threads, 0);
    std::vector<std::thread> pool;
    const std::uint64_t count = ((1ull << 32) + stride - 1) / stride;
    for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            for (std::uint64_t i = t; i < count; i += threads) {
                const float x = bits_float(static_cast<std::uint32_t>(i * stride));
                bad[t] += !same(lj_host::lj_div_by(x, c, rc), x / c);
            }
        });
    for (auto& th : pool) th.join();
    std::uint64_t total = 0;
    for (auto b : bad) total += b;
    return total;
}

}  // namespace

TEST_SUITE("emit") {

TEST_CASE("lj_div_by: the division's bits for a table of constants") {
    const float inf = std::numeric_limits<float>::infinity();
    const float constants[] = {6.0f, 3.0f, 10.0f, 0.1f, 1.7f, 12345.678f, 0x1.fffffep0f, 0x1.7ffffep0f, 0x1.000002p0f,
                               -6.0f, 0x1p-40f, 0x1p40f, 0x1.197998p-40f, 0x1.4ed9ecp+39f, 0.5f, 8.0f};
    const float edges[] = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                           std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), 0x1p-80f,
                           std::nextafter(0x1p-80f, 0.0f), 0x1p80f, std::nextafter(0x1p80f, inf), 1.0f, -3.0f};
    for (float c : constants) {
        CAPTURE(c);
        for (float x : edges) {
            CAPTURE(x);
            CHECK(same(lj_host::lj_div_by(x, c, 1.0f / c), x / c));
        }
        CHECK(mismatches(c, 257, 2) == 0);
    }
}

TEST_CASE("the printer takes lj_div_by for a constant exactly where lj_div_reciprocal would for a parameter") {
    // lj_div_by's range [2^-40, 2^40] is written twice: in the printer's test of a constant divisor
    // (ir/print.cpp) and in lj_div_reciprocal (templates/lj_div.cuh). They must agree.
    const float inf = std::numeric_limits<float>::infinity();
    const float divisors[] = {6.0f, -6.0f, 0x1p-40f, -0x1p-40f, std::nextafter(0x1p-40f, 0.0f), 0x1p40f, -0x1p40f,
                              std::nextafter(0x1p40f, inf), 1e-45f, 1e30f, 1e-30f, 0.0f, inf};
    for (float c : divisors) {
        CAPTURE(c);
        const std::string text = fmt::format("x / {:.9g}", c);  // 9 digits: the same float back
        const auto program = lossjit::check(lossjit::parse(text, "expr"), {});
        const std::string printed = lossjit::print_expression(program, program.body);
        CAPTURE(printed);
        CHECK((printed.rfind("lj_div_by(", 0) == 0) == (lj_host::lj_div_reciprocal(c) != 0.0f));
    }
}

TEST_CASE("lj_div_by_param: the division's bits for any divisor, in lj_div_by's range or not") {
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    // In range (rc is 1 / c), then out of it (rc is 0: every x divides).
    const float divisors[] = {1.0f, 0.5f, -2.5f, 0x1.fffffep0f, 0x1p-40f, -0x1p40f,
                              0.0f, -0.0f, inf, -inf, nan, std::numeric_limits<float>::denorm_min(),
                              std::nextafter(0x1p-40f, 0.0f), std::nextafter(0x1p40f, inf), 1e30f, -1e-30f};
    const float numerators[] = {0.0f, -0.0f, 1.0f, -3.0f, 0.75f, inf, -inf, nan, std::numeric_limits<float>::denorm_min(),
                                std::numeric_limits<float>::max(), 0x1p-80f, 0x1p80f, 1e-40f, 3e38f};
    for (float c : divisors) {
        CAPTURE(c);
        const float rc = lj_host::lj_div_reciprocal(c);
        const bool in_range = std::fabs(c) >= 0x1p-40f && std::fabs(c) <= 0x1p40f;
        CHECK(same(rc, in_range ? 1.0f / c : 0.0f));
        for (float x : numerators) {
            CAPTURE(x);
            CHECK(same(lj_host::lj_div_by_param(x, c, rc), x / c));
        }
        for (std::uint64_t i = 0; i < (1ull << 32); i += 65521) {  // a prime stride over the bit patterns
            const float x = bits_float(static_cast<std::uint32_t>(i));
            if (!same(lj_host::lj_div_by_param(x, c, rc), x / c)) FAIL_CHECK("x = " << x);
        }
    }
}

TEST_CASE("lj_div_by_param: the division's bits for random divisors across lj_div_by's range") {
    // A parameter is any float the caller sets (Loss::set_param), not one of a table.
    std::uint32_t state = 0x9e3779b9u;
    auto next = [&] {  // xorshift32: the same divisors every run
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        return state;
    };
    for (int k = 0; k < 1000; ++k) {
        // A random significand and sign, the exponent anywhere in [-40, 39] (below 2^40).
        const std::uint32_t exponent = 127 - 40 + next() % 80;
        const float c = bits_float((next() & 0x807fffffu) | (exponent << 23));
        CAPTURE(c);
        const float rc = lj_host::lj_div_reciprocal(c);
        REQUIRE(rc != 0.0f);
        std::uint64_t bad = 0;
        for (std::uint64_t i = k; i < (1ull << 32); i += 65521 + 2 * static_cast<std::uint64_t>(k))
            bad += !same(lj_host::lj_div_by_param(bits_float(static_cast<std::uint32_t>(i)), c, rc),
                         bits_float(static_cast<std::uint32_t>(i)) / c);
        CHECK(bad == 0);
    }
}

TEST_CASE("lj_div_by: every float, c = 6 and c = 0x1.fffffep0" * doctest::skip(std::getenv("LOSSJIT_EXHAUSTIVE") == nullptr)) {
    const unsigned threads = std::max(2u, std::thread::hardware_concurrency());
    CHECK(mismatches(6.0f, 1, threads) == 0);
    CHECK(mismatches(0x1.fffffep0f, 1, threads) == 0);
}

}  // TEST_SUITE
