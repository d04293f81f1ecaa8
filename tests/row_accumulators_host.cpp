// The row accumulators of logsumexp and argmax (the builtins table's CUDA texts) run on the host:
// test_rows.cpp ("the row accumulators, compiled on the host, ...") writes the texts to a header and
// compiles this file with it (LJ_ACCUMULATORS), so that CI without a GPU checks what the kernels
// compute. IEEE float and double give the GPU's compares, sums and selects; exp and log are the
// host's. Rows are walked as the kernel's lanes walk them (whole tiles through add_tile, the last
// tile's groups through add_vec), and the lanes merged both ways a team merges (two phases, as
// Team::all_reduce; combine, as clusters and side-by-side teams), then checked against long double.
// Prints each failure; exits 1 if any.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#define __device__
#define __host__
#define __forceinline__ inline
inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}
// One lane's value: the merges below combine lanes directly, not through shuffles.
inline int __shfl_xor_sync(unsigned, int v, int) { return v; }
inline long long __shfl_xor_sync(unsigned, long long v, int) { return v; }
namespace lj {
template <bool C, class A, class B>
using conditional_t = std::conditional_t<C, A, B>;
inline float shuffle_xor(float v, int) { return v; }
inline double shuffle_xor(double v, int) { return v; }
}  // namespace lj
using std::exp;
using std::isfinite;
using std::log;

#include LJ_ACCUMULATORS

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
int failures = 0;

// Each lane's accumulator after walking its columns: tiles of U groups of VW, lane l's first group
// at l VW, the next tile TEAM VW U further on. A shifted row (KernelSpec::row_shift) starts its
// vectors `shift` columns in: lane l takes column l first where l < shift, and after its vectors
// column Cb + l where that is in the row (the columns after the last whole vector, from Cb).
template <class Acc, int TEAM, int VW, int U>
std::vector<Acc> walk(const std::vector<float>& row, long long shift) {
    const long long C = static_cast<long long>(row.size());
    shift = std::min(shift, C);
    const long long Cb = shift + (C - shift) / VW * VW;
    std::vector<Acc> lanes(TEAM);
    auto edge = [&](Acc& a, long long j) {
        float v[1] = {row[j]};
        a.add_vec(v, j);
    };
    for (int lane = 0; lane < TEAM; ++lane) {
        Acc& a = lanes[lane];
        if (lane < shift) edge(a, lane);
        for (long long j0 = shift + (long long)lane * VW; j0 < Cb; j0 += (long long)TEAM * VW * U) {
            if (j0 + (long long)(U - 1) * TEAM * VW < Cb) {
                float v[U][VW];
                for (int u = 0; u < U; ++u)
                    for (int q = 0; q < VW; ++q) v[u][q] = row[j0 + (long long)u * TEAM * VW + q];
                a.template add_tile<(long long)TEAM * VW>(v, j0);
            } else {
                for (int u = 0; u < U; ++u) {
                    const long long j = j0 + (long long)u * TEAM * VW;
                    if (j >= Cb) continue;
                    float v[VW];
                    for (int q = 0; q < VW; ++q) v[q] = row[j + q];
                    a.add_vec(v, j);
                }
            }
        }
        if (lane < C - Cb) edge(a, Cb + lane);
    }
    return lanes;
}

template <class Acc>
Acc two_phase(std::vector<Acc> lanes) {
    auto peak = lanes[0].peak();
    for (std::size_t l = 1; l < lanes.size(); ++l) peak.combine(lanes[l].peak());
    auto rest = lanes[0].rebase(peak);
    for (std::size_t l = 1; l < lanes.size(); ++l) rest.combine(lanes[l].rebase(peak));
    lanes[0].set(rest);
    return lanes[0];
}

template <class Acc>
Acc combined(const std::vector<Acc>& lanes) {
    Acc a = lanes[0];
    for (std::size_t l = 1; l < lanes.size(); ++l) a.combine(lanes[l]);
    return a;
}

// Two halves merged in two phases, then the halves combined (a cluster of two blocks).
template <class Acc>
Acc as_cluster(const std::vector<Acc>& lanes) {
    const std::size_t half = lanes.size() / 2;
    Acc a = two_phase(std::vector<Acc>(lanes.begin(), lanes.begin() + half));
    a.combine(two_phase(std::vector<Acc>(lanes.begin() + half, lanes.end())));
    return a;
}

double want_logsumexp(const std::vector<float>& row) {
    long double top = -INFINITY;
    for (float v : row) {
        if (std::isnan(v)) return NAN;
        top = std::max<long double>(top, v);
    }
    if (std::isinf(top)) return static_cast<double>(top);
    long double s = 0;
    for (float v : row) s += std::exp(static_cast<long double>(v) - top);
    return static_cast<double>(top + std::log(s));
}

double want_argmax(const std::vector<float>& row) {
    if (row.empty()) return NAN;
    std::size_t best = 0;
    for (std::size_t j = 0; j < row.size(); ++j) {
        if (std::isnan(row[j])) return static_cast<double>(j);
        if (row[j] > row[best]) best = j;
    }
    return static_cast<double>(best);
}

bool same_logsumexp(double got, double want) {
    if (std::isnan(want) || std::isinf(want)) return std::isnan(want) ? std::isnan(got) : got == want;
    return std::fabs(got - want) <= 2e-6 * std::max(1.0, std::fabs(want));
}

bool same_index(double got, double want) { return std::isnan(want) ? std::isnan(got) : got == want; }

template <int TEAM, int VW, int U>
void check(const std::vector<float>& row, const char* kind, long long shift) {
    const double lse = want_logsumexp(row), arg = want_argmax(row);
    using Shared = lj::LogSumExpArgMaxAcc<float>;
    const auto shared = walk<Shared, TEAM, VW, U>(row, shift);
    const auto alone = walk<lj::LogSumExpAcc<float>, TEAM, VW, U>(row, shift);
    const char* merges[] = {"two phases", "combine", "cluster"};
    const Shared by_shared[] = {two_phase(shared), combined(shared), as_cluster(shared)};
    const lj::LogSumExpAcc<float> by_alone[] = {two_phase(alone), combined(alone), as_cluster(alone)};
    for (int k = 0; k < 3; ++k) {
        const double got_lse = by_shared[k].value(), got_arg = by_shared[k].index(), got_alone = by_alone[k].value();
        if (!same_logsumexp(got_lse, lse) || !same_index(got_arg, arg) || !same_logsumexp(got_alone, lse)) {
            if (++failures <= 20)
                std::printf("%s row of %zu, team %d, vector %d, unroll %d, shift %lld, %s: logsumexp %.9g / alone %.9g "
                            "(want %.9g), argmax %.9g (want %.9g)\n",
                            kind, row.size(), TEAM, VW, U, shift, merges[k], got_lse, got_alone, lse, got_arg, arg);
        }
    }
}

template <int TEAM, int VW, int U>
void rows_of(long long columns, std::mt19937& rng) {
    // Vectors start where the row's address is a multiple of VW: a row of a length not a multiple
    // of VW, or of a view whose row stride is not, starts them `shift` columns in; each row kind
    // below gets a shift of its own (0 for VW 1).
    std::uniform_int_distribution<long long> shifts(0, VW - 1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<long long> column(0, columns > 0 ? columns - 1 : 0);
    auto plain = [&] {
        std::vector<float> r(static_cast<std::size_t>(columns));
        for (float& v : r) v = normal(rng);
        return r;
    };
    check<TEAM, VW, U>(plain(), "normal", shifts(rng));
    if (columns == 0) return;
    {
        auto r = plain();
        const long long a = column(rng), b = column(rng);
        r[a] = r[b] = 9.0f;  // a tie: the first column
        check<TEAM, VW, U>(r, "tie", shifts(rng));
        r[b] = NAN;  // the nan wins wherever it is
        check<TEAM, VW, U>(r, "nan", shifts(rng));
        r[a] = NAN;
        check<TEAM, VW, U>(r, "two nans", shifts(rng));
    }
    check<TEAM, VW, U>(std::vector<float>(static_cast<std::size_t>(columns), -kInf), "-inf", shifts(rng));
    {
        auto r = std::vector<float>(static_cast<std::size_t>(columns), -kInf);
        r[column(rng)] = NAN;
        check<TEAM, VW, U>(r, "-inf and a nan", shifts(rng));
        r = plain();
        r[column(rng)] = kInf;
        r[column(rng)] = kInf;
        check<TEAM, VW, U>(r, "two +inf", shifts(rng));
    }
    {
        std::vector<float> up(static_cast<std::size_t>(columns)), down = up, far = up, masked = plain();
        for (long long j = 0; j < columns; ++j) {
            up[j] = 0.5f * static_cast<float>(j) - 100.0f;  // the reference moves up again and again
            down[j] = -up[j];
            far[j] = -60.0f + normal(rng);
        }
        for (long long j = 0; j < columns; j += 3) masked[j] = -1e9f;  // a mask's fill
        check<TEAM, VW, U>(up, "ramp up", shifts(rng));
        check<TEAM, VW, U>(down, "ramp down", shifts(rng));
        check<TEAM, VW, U>(far, "far below 0", shifts(rng));
        check<TEAM, VW, U>(masked, "masked", shifts(rng));
    }
}

template <int TEAM, int VW, int U>
void shape(std::mt19937& rng) {
    for (long long columns : {0LL, 1LL, 3LL, 7LL, 64LL, 100LL, 1000LL, 5000LL, 33000LL}) rows_of<TEAM, VW, U>(columns, rng);
}

}  // namespace

int main() {
    std::mt19937 rng(46);
    shape<32, 1, 1>(rng);
    shape<32, 4, 2>(rng);
    shape<32, 4, 3>(rng);
    shape<256, 4, 1>(rng);
    shape<256, 4, 2>(rng);
    shape<256, 8, 2>(rng);
    shape<256, 4, 3>(rng);
    shape<256, 1, 5>(rng);
    std::printf("%d failures\n", failures);
    return failures == 0 ? 0 : 1;
}
