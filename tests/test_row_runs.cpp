// templates/row_runs.cuh compiled on the host from the same text the kernels get: the run of a
// row of two strides found by multiply-high and shift, checked against division for divisors and
// columns where such tricks go wrong (powers of two and their neighbours, the largest values, the
// boundaries of each run) and a random sample.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace lj_host {
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline unsigned __umulhi(unsigned a, unsigned b) {
    return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
template <class T>
T load1(int, const void* p, long long i) { return static_cast<const T*>(p)[i]; }
#define __device__
#define __forceinline__ inline
#include "../templates/row_runs.cuh"
#undef __device__
#undef __forceinline__
}  // namespace lj_host

TEST_SUITE("emit") {

TEST_CASE("rows of two strides: the run of a column by multiply-high and shift is the division's") {
    std::vector<unsigned> divisors;
    for (unsigned d = 1; d <= 1100; ++d) divisors.push_back(d);
    for (unsigned l = 1; l < 31; ++l)
        for (int delta : {-1, 0, 1}) divisors.push_back((1u << l) + static_cast<unsigned>(delta));
    for (unsigned d : {3u * 5 * 7 * 11 * 13 * 17, 262144u, 2145u, 65535u, 999999937u, 2147483647u, 2147483646u})
        divisors.push_back(d);
    std::mt19937 rng(7);
    for (int i = 0; i < 2000; ++i) divisors.push_back(1u + rng() % 2147483647u);
    const unsigned top = 2147483647u;  // columns below 2^31
    int wrong = 0;
    for (unsigned d : divisors) {
        const lj_host::lj::RunDivider runs(d);
        std::vector<unsigned> columns{0, 1, top, top - 1, d - 1, d};
        if (d < top / 3) columns.insert(columns.end(), {d + 1, 2 * d - 1, 2 * d, top / d * d, top / d * d - 1});
        for (int k = 0; k < 200; ++k) columns.push_back(rng() % (top + 1u));
        for (unsigned j : columns) {
            if (j > top) continue;
            if (runs.quotient(j) != j / d && ++wrong <= 5) MESSAGE("d ", d, " j ", j, ": ", runs.quotient(j), " not ", j / d);
        }
    }
    CHECK(wrong == 0);
    // A column's offset: runs of 5 columns, 100 apart, 3 apart within one.
    const long long strides[3] = {0, 3, 100};
    const lj_host::lj::RunDivider five(5);
    for (long long j = 0; j < 40; ++j) CHECK(lj_host::lj::column_offset<2>(j, five, strides) == j / 5 * 100 + j % 5 * 3);
    float one = 2.5f, v[4];
    lj_host::lj::load_run_constant<4>(0, &one, 0, v);
    CHECK((v[0] == 2.5f && v[3] == 2.5f));
}

}  // TEST_SUITE
