// One-off host check of lj::CenteredAcc's merge (src/lang/builtins.cpp's text): a block team's
// butterfly and warp merges emulated in double; exact zeros, symmetry, accuracy, inf and nan.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#define __device__
#define __forceinline__ inline
namespace lj { inline double shuffle_xor(double v, int) { return v; } }
#include "centered_acc.h"  // the kCenteredAcc text of src/lang/builtins.cpp, written out
using lj::CenteredAcc;
static bool same(const CenteredAcc& a, const CenteredAcc& b) { return std::memcmp(&a, &b, sizeof a) == 0; }
int fails = 0;
void run(const std::vector<float>& row, int block, const char* what) {
    std::vector<CenteredAcc> t(block);
    for (size_t k = 0; k < row.size(); ++k) t[(k / 4) % block].add(row[k], (long long)k);
    for (int o = 16; o > 0; o >>= 1) {
        std::vector<CenteredAcc> next = t;
        for (int i = 0; i < block; ++i) next[i].combine(t[i ^ o]);
        t = next;
    }
    for (int i = 0; i < block; ++i) if (!same(t[i], t[i & ~31])) { printf("%s: lanes differ\n", what); ++fails; break; }
    CenteredAcc a = t[0];
    for (int w = 1; w < block / 32; ++w) a.combine(t[w * 32]);
    const double C = (double)row.size();
    const float var = (float)(a.m2() / C), mean = (float)(a.s / C);
    long double m = 0; for (float v : row) m += v; m /= C;
    long double q = 0; for (float v : row) q += ((long double)v - m) * ((long double)v - m);
    const float want = (float)(q / C);
    const bool ok = std::isnan(want) ? std::isnan(var) : std::isinf(want) ? var == want : want == 0 ? var == 0 : std::fabs(var - want) / want < 1e-6;
    if (!ok) { printf("%s block %d C %zu: var %.9g want %.9g\n", what, block, row.size(), var, want); ++fails; }
}
int main() {
    std::mt19937 g(19);
    std::normal_distribution<float> n;
    for (int C : {100, 1000, 4096, 5000, 8192, 200000})
        for (int block : {32, 256, 512, 1024}) {
            std::vector<float> r(C);
            for (auto& v : r) v = n(g); run(r, block, "normal");
            for (auto& v : r) v = 1000.0f + 0.01f * n(g); run(r, block, "1000 + 0.01 normal");
            for (auto& v : r) v = 3.25f; run(r, block, "3.25 repeated");
            for (auto& v : r) v = 0.1f; run(r, block, "0.1 repeated");
            for (auto& v : r) v = -7.3e5f; run(r, block, "-7.3e5 repeated");
            for (auto& v : r) v = n(g); r[C / 3] = INFINITY; run(r, block, "+inf");
            r[C / 3] = NAN; run(r, block, "nan");
            r[C / 3] = -INFINITY; r[C / 2] = INFINITY; run(r, block, "-inf and +inf");
        }
    printf("failures: %d\n", fails);
    return fails != 0;
}
