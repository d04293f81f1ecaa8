// lj::CenteredAcc (templates/lj_centered.cuh), compiled on the host from the same file the kernels
// get: a block team's merges emulated as the GPU runs them (each thread's columns in vectors of 4,
// the warp's butterfly, then lane l of every warp taking warp l's part and a butterfly over those:
// TeamOf::in_block in templates/by_rows.cuh), against a two-pass variance in long double. Rows of
// one repeated value must give 0 exactly, every thread of the block the same bits, inf and nan as the
// two passes give them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace lj_host {
using std::fma;
namespace lj {
inline double shuffle_xor(double v, int) { return v; }  // the emulation exchanges whole accumulators
}  // namespace lj
#define __device__
#define __forceinline__ inline
#include "../templates/lj_centered.cuh"
#undef __device__
#undef __forceinline__
}  // namespace lj_host

namespace {
using lj_host::lj::CenteredAcc;

struct Merged {
    double mean, variance;
    bool lanes_agree;
};

// The row's mean and (biased) variance as a block of `block` threads a row computes them.
Merged merge_as_a_block(const std::vector<float>& row, int block) {
    const auto at = [](int i) { return static_cast<std::size_t>(i); };
    std::vector<CenteredAcc> lane(at(block));
    for (std::size_t k = 0; k < row.size(); ++k) lane[(k / 4) % at(block)].add(row[k], 0);
    const auto butterfly = [&](int from) {
        for (int o = from; o > 0; o >>= 1) {
            std::vector<CenteredAcc> next = lane;
            for (int i = 0; i < block; ++i) next[at(i)].combine(lane[at(i ^ o)]);
            lane = next;
        }
    };
    butterfly(16);
    const int warps = block / 32;
    if (warps > 1) {
        std::vector<CenteredAcc> parts;
        for (int w = 0; w < warps; ++w) parts.push_back(lane[at(w * 32)]);
        for (int i = 0; i < block; ++i) lane[at(i)] = parts[at(i % 32 % warps)];
        butterfly(warps / 2);
    }
    bool agree = true;
    for (int i = 0; i < block; ++i) agree = agree && std::memcmp(&lane[at(i)], &lane[0], sizeof(CenteredAcc)) == 0;
    const double columns = static_cast<double>(row.size());
    return {lane[0].s / columns, lane[0].m2() / columns, agree};
}

float two_pass_variance(const std::vector<float>& row) {
    long double mean = 0;
    for (float v : row) mean += v;
    mean /= static_cast<long double>(row.size());
    long double squares = 0;
    for (float v : row) squares += (v - mean) * (v - mean);
    return static_cast<float>(squares / static_cast<long double>(row.size()));
}
}  // namespace

TEST_CASE("CenteredAcc merged as a block team: exact zeros, lanes that agree, the two-pass variance") {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    struct Row {
        std::string what;
        float repeated;          // every element this, where not nan
        float offset, spread;    // else offset + spread x normal
        int inf_at, minus_inf_at, nan_at;  // -1: none; else the column / 3 share of the row
    };
    const Row rows[] = {
        {"normal", nan, 0, 1, -1, -1, -1},
        {"far from 0 against the spread", nan, 1000, 0.01f, -1, -1, -1},
        {"3.25 repeated", 3.25f, 0, 0, -1, -1, -1},
        {"0.1 repeated (not a binary fraction)", 0.1f, 0, 0, -1, -1, -1},
        {"-7.3e5 repeated", -7.3e5f, 0, 0, -1, -1, -1},
        {"a +inf", nan, 0, 1, 1, -1, -1},
        {"a nan", nan, 0, 1, -1, -1, 1},
        {"-inf and +inf", nan, 0, 1, 2, 1, -1},
    };
    std::mt19937 rng(19);
    std::normal_distribution<float> normal;
    for (int columns : {100, 4096, 5000, 8192, 200000}) {
        for (int block : {32, 256, 512, 1024}) {
            for (const auto& r : rows) {
                CAPTURE(columns);
                CAPTURE(block);
                CAPTURE(r.what);
                std::vector<float> row(static_cast<std::size_t>(columns));
                for (auto& v : row) v = std::isnan(r.repeated) ? r.offset + r.spread * normal(rng) : r.repeated;
                const auto at = [&](int share) { return static_cast<std::size_t>(columns) * static_cast<std::size_t>(share) / 3; };
                if (r.inf_at >= 0) row[at(r.inf_at)] = inf;
                if (r.minus_inf_at >= 0) row[at(r.minus_inf_at)] = -inf;
                if (r.nan_at >= 0) row[at(r.nan_at)] = nan;
                const Merged got = merge_as_a_block(row, block);
                const float variance = static_cast<float>(got.variance), want = two_pass_variance(row);
                CHECK(got.lanes_agree);
                if (std::isnan(want))
                    CHECK(std::isnan(variance));
                else if (want == 0)
                    CHECK(variance == 0.0f);
                else
                    CHECK(std::fabs(variance - want) <= 1e-6f * want);
            }
        }
    }
}
