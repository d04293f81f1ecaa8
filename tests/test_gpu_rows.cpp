// GPU runs of programs that reduce along rows, against the CPU reference: warp and block teams,
// vector and scalar accesses, strided rows, ranks above 2, 16-bit and float64 logits, int32 and
// int64 indices (some out of range), maps per row and per element. Part of the gpu suite: skipped,
// visibly, without a device.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/kinds/defaults.hpp"
#include "lossjit/lossjit.hpp"
#include "gpu_support.hpp"
#include "runtime/kernels.hpp"
#include "tools/host.hpp"

using namespace lossjit;

namespace {

bool have_gpu() { return lossjit_test::have_typed_gpu(); }
using lossjit_test::Spread;
using lossjit_test::spread;
using lossjit_test::Typed;

// A map's output for the same inputs on the GPU (rounded to `dtype`) and from the CPU reference.
struct MapOutputs {
    Shape shape;
    std::vector<double> got, want;
};
MapOutputs map_outputs(Loss& loss, std::span<const TensorView> device, std::span<const TensorView> host,
                       DType dtype = DType::float32) {
    MapOutputs m;
    m.shape = loss.output_shape(host);
    HostTensor got(m.shape, dtype);
    DeviceBuffer out(got.bytes.size());
    loss.map(device, OutputView{out.data(), dtype, m.shape, {}});
    m.want.resize(static_cast<std::size_t>(got.numel()));
    loss.reference_map(host, OutputView{m.want.data(), DType::float64, m.shape, {}});
    synchronize();
    out.download(got.bytes.data(), got.bytes.size());
    for (std::int64_t i = 0; i < got.numel(); ++i) m.got.push_back(got.at(i));
    return m;
}

double rel_error(double a, double b) {
    if (std::isnan(a) && std::isnan(b)) return 0.0;
    return a == b ? 0.0 : std::fabs(a - b) / std::max(std::fabs(b), 1e-30);
}

// The GPU against the reference: a map's output, or a reduction's value from the fused kernel and from
// a call; then (where `gradients`) the gradients of `wrt` into `grads`, a map's with an upstream
// tensor of its output's shape (generated from `seed`). Returns the reference's gradients, for the
// caller to compare with what it downloads from `grads` (synchronized).
std::vector<ReferenceGradient> check_value_then_grad(Loss& loss, std::span<const TensorView> views,
                                                     std::span<const TensorView> host, const std::vector<std::string>& wrt,
                                                     std::span<const OutputView> grads, DType dtype, std::uint64_t seed,
                                                     bool gradients = true) {
    const bool float32 = dtype == DType::float32;
    std::vector<ReferenceGradient> want;
    if (loss.kind() == Kind::Map) {
        const MapOutputs m = map_outputs(loss, views, host, DType::float64);
        const Spread d = spread(m.got, m.want);
        CHECK(d.worst <= (float32 ? 2e-6 : 8e-3) * d.largest);
        if (!gradients) return want;
        const Typed up(format_shape(m.shape) + ":normal", dtype, seed);
        loss.grad(views, wrt, grads, up.view());
        want = loss.reference_grad(host, wrt, up.host.view());
    } else {
        DeviceBuffer value(sizeof(float));
        loss.value_and_grad(views, wrt, grads, static_cast<float*>(value.data()));
        synchronize();
        float v = 0;
        value.download(&v, sizeof v);
        const double expected = loss.reference(host);
        CHECK(rel_error(v, expected) < (float32 ? 2e-6 : 2e-3));
        CHECK(rel_error(loss(views), expected) < (float32 ? 2e-6 : 2e-3));
        want = loss.reference_grad(host, wrt);
    }
    synchronize();
    return want;
}

// The GPU's gradients of w and x (in that order, in `dtype`), into buffers filled with 0xFF first:
// every element must be written.
struct GradsWX {
    HostTensor w, x;
};
GradsWX gpu_grads_w_x(Loss& loss, std::span<const TensorView> views, const Shape& w_shape, const Shape& x_shape,
                      DType dtype) {
    GradsWX out{HostTensor(w_shape, dtype), HostTensor(x_shape, dtype)};
    DeviceBuffer dw(out.w.bytes.size() + 4), dx(out.x.bytes.size() + 4);
    dw.fill_bytes(0xFF);
    dx.fill_bytes(0xFF);
    const std::vector<OutputView> grads{OutputView{dw.data(), dtype, w_shape, {}}, OutputView{dx.data(), dtype, x_shape, {}}};
    loss.grad(views, std::vector<std::string>{"w", "x"}, grads);
    synchronize();
    dw.download(out.w.bytes.data(), out.w.bytes.size());
    dx.download(out.x.bytes.data(), out.x.bytes.size());
    return out;
}

// Gradients of `count` inputs of one shape: device buffers, the views a launch writes, and each one
// downloaded and compared with the reference's (worst difference within `bound` of the largest).
struct SameShapeGrads {
    std::vector<HostTensor> host;
    std::vector<DeviceBuffer> device;
    std::vector<OutputView> views;
    SameShapeGrads(std::size_t count, const Shape& shape, DType dtype) {
        for (std::size_t k = 0; k < count; ++k) {
            host.emplace_back(shape, dtype);
            device.emplace_back(host.back().bytes.size());
        }
        for (std::size_t k = 0; k < count; ++k) views.push_back(OutputView{device[k].data(), dtype, shape, {}});
    }
    void check_against(const std::vector<ReferenceGradient>& expected, std::span<const std::string> names, double bound) {
        for (std::size_t k = 0; k < host.size(); ++k) {
            CAPTURE(names[k]);
            device[k].download(host[k].bytes.data(), host[k].bytes.size());
            const Spread d = spread(host[k], expected[k].values);
            CHECK(d.worst <= bound * d.largest);
        }
    }
};

// Logits of `rows` x `columns` and class indices in [-2, columns + 1]: a few out of range (nan).
struct Problem {
    std::string shape;
    std::int64_t rows;
    std::int64_t columns;
};
const Problem kProblems[] = {
    {"512x1024", 512, 1024},    // warp per row, four elements per access
    {"300x1001", 300, 1001},    // rows not a multiple of 4: vectors from each row's first aligned column
    {"24x20000", 24, 20000},    // long rows: the block per row
    {"1x7", 1, 7},              // one row, one block
};

// The row cache (KernelSpec::row_cache_columns) off, and asked for: longer rows than shared memory
// holds keep part of the row (3 x 70000: two inputs of 280 KB a row; 64 x 4096: a warp per row, each
// of a block's 16 warps keeping part of its row of one input, the whole block's of two).
const Problem kCachedProblems[] = {
    {"64x4096", 64, 4096},
    {"512x1024", 512, 1024},
    {"300x1001", 300, 1001},
    {"24x20000", 24, 20000},
    {"3x70000", 3, 70000},
    {"40x50257", 40, 50257},  // GPT-2's vocabulary: shifted rows, a block each
};

// Blocks of a cluster sharing each row (KernelSpec::row_cluster, sm_90): rows a block takes, all
// kept (24 x 20000 in 2 blocks; 3 x 70000 in 8) or part (3 x 70000 in 2: 280 KB a row), none (the
// cache off), and, for reductions (whose grid is capped), more clusters than the grid holds
// (600 x 8192 in 8: rows in turn).
struct Run {
    Problem problem;
    std::optional<bool> row_cache;  // automatic, off or on
    int row_cluster = 0;
    bool all_dtypes = true;  // the clusters' runs: float32 only (the walks are the dtypes' own elsewhere)
    RowTeam row_team = RowTeam::Auto;
    std::optional<bool> row_prefetch = std::nullopt;  // automatic, off or on
    int block = 0, blocks_per_sm = 0;                 // 0: automatic
    // Knobs of the run, on top of `options`' own.
    void set(Knobs& knobs) const {
        knobs.row_cache = row_cache;
        knobs.row_cluster = row_cluster;
        knobs.row_team = row_team;
        knobs.row_prefetch = row_prefetch;
        knobs.block_threads = block;
        knobs.max_blocks_per_sm = blocks_per_sm;
    }
};
std::vector<Run> cached_runs(bool reduction) {
    std::vector<Run> runs;
    for (const auto& problem : kProblems) runs.push_back({problem, std::nullopt});
    for (const auto& problem : kCachedProblems)
        for (bool cache : {false, true}) runs.push_back({problem, cache, cache ? 0 : 1});
    // The row team asked for: the block (of automatic size, a few warps) where warps would take the
    // rows, and warps where the block would.
    runs.push_back({Problem{"64x4096", 64, 4096}, true, 0, true, RowTeam::Block});
    runs.push_back({Problem{"24x20000", 24, 20000}, true, 0, true, RowTeam::Warp});
    if (lossjit_test::device_arch() >= 90) {
        for (const auto& [problem, cluster] : {std::pair{Problem{"24x20000", 24, 20000}, 2}, {Problem{"3x70000", 3, 70000}, 8},
                                               {Problem{"3x70000", 3, 70000}, 2}})
            runs.push_back({problem, true, cluster, false});
        if (reduction) runs.push_back({Problem{"600x8192", 600, 8192}, true, 8, false});
        // Without a row cache: each block reads its share of the row in every walk; few long rows
        // take clusters of themselves (2 x 300000: 8 blocks a row, automatic).
        for (const auto& [problem, cluster] : {std::pair{Problem{"3x70000", 3, 70000}, 8}, {Problem{"24x20000", 24, 20000}, 2},
                                               {Problem{"2x300000", 2, 300000}, 0}})
            runs.push_back({problem, false, cluster, false});
        // Rows not a multiple of 4 shared by a cluster's blocks: the first and last columns a lane
        // each, the vectors from the first aligned column (KernelSpec::row_shift), cached and not.
        for (bool cache : {false, true}) runs.push_back({Problem{"3x70001", 3, 70001}, cache, 4, false});
        // Rows of which a block would keep less than half, more of them than SMs: clusters chosen
        // automatically (ByRowClusterLongRowShare; 4 or 8 blocks a row, by the inputs kept).
        runs.push_back({Problem{"80x131072", 80, 131072}, std::nullopt, 0, false});
    }
    return runs;
}

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("row programs: reductions match the reference in every team and access width" * doctest::skip(!have_gpu())) {
    const char* programs[] = {
        "mean(logsumexp(x, -1) - x[y])",
        "l = logsumexp(x, -1) - x[y]; sum(where(y >= 0 && y < 1000000, l, 0)) / sum(y >= 0 && y < 1000000)",
        "lp = x - logsumexp(x, -1); mean(-0.9 * lp[y] - 0.1 * mean(lp, -1))",
        "lp = (x - logsumexp(x, -1))[y]; mean(-(1 - exp(lp))^2 * lp)",
        "mean(amax(x, -1) - amin(x, -1)) + sum(x) / sum(x * x)",
        "sum(exp(x - logsumexp(x, -1)) * x) / 1000",
    };
    for (const auto& problem : kProblems) {
        for (DType dtype : {DType::float32, DType::bfloat16, DType::float64}) {
            const Typed x(problem.shape + ":normal", dtype, 11);
            const std::string index_spec = std::to_string(problem.rows) + ":integers[0," + std::to_string(problem.columns - 1) + "]";
            const Typed y(index_spec, DType::int64, 12);
            for (const char* text : programs) {
                CAPTURE(problem.shape);
                CAPTURE(to_string(dtype));
                CAPTURE(text);
                const bool indexed = std::string(text).find("y") != std::string::npos;
                Options options;
                options.inputs = indexed ? std::vector<std::string>{"x", "y"} : std::vector<std::string>{"x"};
                auto loss = compile(text, options);
                std::vector<TensorView> views{x.view()}, host{x.host.view()};
                if (indexed) {
                    views.push_back(y.view());
                    host.push_back(y.host.view());
                }
                const double expected = loss.reference(host);
                const double got = loss(views);
                CHECK(rel_error(got, expected) < 2e-6);
                // The same bits every run.
                CHECK(loss(views) == got);
            }
        }
    }
}

TEST_CASE("row programs: logsumexp and argmax of one argument share an accumulator: ties, nan, inf" *
          doctest::skip(!have_gpu())) {
    // Rows of each kind a team meets: ties of the maximum (the first column wins), a nan (its column
    // wins, logsumexp nan), all -inf (column 0, -inf), two +inf (the first, +inf), plain rows, a ramp
    // rising 0.5 a column (logsumexp's reference moves up again and again; the last column wins), a
    // nan beside a larger value and -inf (the nan wins), rows far below 0 (-60 + normal: the result
    // is m + log(s) with m up to 32 below it). Short rows (a thread or a warp a row), long ones (a
    // block), rows not a multiple of 4 (7, 4099: each row's first columns before its vectors), and
    // the same along dimension 0.
    const double inf = INFINITY;
    for (const auto& [rows, columns] : {std::pair<std::int64_t, std::int64_t>{1000, 7}, {700, 100}, {64, 5000}, {96, 4099}}) {
        for (const int dim : {-1, 0}) {
            CAPTURE(rows);
            CAPTURE(columns);
            CAPTURE(dim);
            const std::int64_t n = dim == -1 ? rows : columns;  // the reduced rows, and their length
            const std::int64_t c = dim == -1 ? columns : rows;
            HostTensor host = generate(parse_generator(std::to_string(rows) + "x" + std::to_string(columns) + ":normal"), 9);
            auto at = [&](std::int64_t r, std::int64_t k) { return dim == -1 ? r * columns + k : k * columns + r; };
            for (std::int64_t r = 0; r < n; ++r) {
                const std::int64_t a = (r * 7) % c, b = std::min(c - 1, a + 1 + (r % 3) * (c / 4));
                // Ties and nans also 512, 1024 and 2048 columns on: in a later group or tile of the
                // same lane, for the teams' strides.
                auto also = [&](std::int64_t k, double v) {
                    for (std::int64_t step : {512, 1024, 2048})
                        if (k + step < c) host.set(at(r, k + step), v);
                };
                switch (r % 8) {
                    case 0: host.set(at(r, a), 9.0); host.set(at(r, b), 9.0); also(a, 9.0); break;
                    case 1: host.set(at(r, b), NAN); host.set(at(r, a), 20.0); also(b, NAN); break;
                    case 2: for (std::int64_t k = 0; k < c; ++k) host.set(at(r, k), -inf); break;
                    case 3: host.set(at(r, b), inf); host.set(at(r, a), inf); break;
                    case 4: for (std::int64_t k = 0; k < c; ++k) host.set(at(r, k), 0.5 * static_cast<double>(k) - 100.0); break;
                    case 5:
                        host.set(at(r, a), NAN);
                        if (a + 1 < c) host.set(at(r, a + 1), 30.0);
                        if (a > 0) host.set(at(r, a - 1), -inf);
                        break;
                    case 6:
                        for (std::int64_t k = 0; k < c; ++k) host.set(at(r, k), host.at(at(r, k)) - 60.0);
                        break;
                    default: break;
                }
            }
            DeviceBuffer device(host.bytes.size());
            device.upload(host.bytes.data(), host.bytes.size());
            const std::string d = std::to_string(dim);
            auto loss = compile("m = logsumexp(x, " + d + "); i = argmax(x, " + d + "); m, i");
            const std::vector<TensorView> views{TensorView{device.data(), DType::float32, {rows, columns}, {}}};
            const std::vector<TensorView> host_views{host.view()};
            REQUIRE(loss.cuda_source(views).find("LogSumExpArgMaxAcc") != std::string::npos);
            const auto [shape, got, want] = map_outputs(loss, views, host_views);
            REQUIRE(shape == Shape{2, n});
            int wrong = 0;
            for (std::int64_t r = 0; r < n; ++r) {
                const double m = got[static_cast<std::size_t>(r)], wm = want[static_cast<std::size_t>(r)];
                const double i = got[static_cast<std::size_t>(n + r)], wi = want[static_cast<std::size_t>(n + r)];
                const bool m_ok = std::isnan(wm) ? std::isnan(m) : std::isinf(wm) ? m == wm : rel_error(m, wm) < 2e-6;
                if (!m_ok || i != wi) {
                    if (++wrong <= 5) MESSAGE("row ", r, ": logsumexp ", m, " (want ", wm, "), argmax ", i, " (want ", wi, ")");
                }
            }
            CHECK(wrong == 0);
        }
    }
}

TEST_CASE("row programs: a mean and the squared deviations from it in one walk: offsets, constants, inf, nan" *
          doctest::skip(!have_gpu())) {
    // Rows far from 0 against their spread (1000 + 0.01 x normal: the two passes' float32 mean would
    // cost the variance 1e-5 of itself), rows of one repeated value (variance 0 exactly), a +inf, a
    // nan, -inf and +inf together, plain rows; short rows (a warp a row), long ones (a block, and
    // few long rows: a cluster's blocks each, on sm_90).
    const double inf = INFINITY;
    for (const auto& [rows, columns] : {std::pair<std::int64_t, std::int64_t>{1000, 100}, {64, 5000}, {4, 200000}}) {
        CAPTURE(rows);
        CAPTURE(columns);
        HostTensor host = generate(parse_generator(std::to_string(rows) + "x" + std::to_string(columns) + ":normal"), 19);
        for (std::int64_t r = 0; r < rows; ++r) {
            const std::int64_t a = (r * 7) % columns, b = std::min(columns - 1, a + 1 + (r % 3) * (columns / 4));
            for (std::int64_t k = 0; k < columns; ++k) {
                const std::int64_t at = r * columns + k;
                if (r % 6 == 0) host.set(at, 1000.0 + 0.01 * host.at(at));
                if (r % 6 == 1) host.set(at, 3.25);
            }
            if (r % 6 == 2) host.set(r * columns + a, inf);
            if (r % 6 == 3) host.set(r * columns + b, NAN);
            if (r % 6 == 4) host.set(r * columns + a, -inf), host.set(r * columns + b, inf);
        }
        DeviceBuffer device(host.bytes.size());
        device.upload(host.bytes.data(), host.bytes.size());
        auto loss = compile("m = mean(x, -1); v = mean((x - m)^2, -1); u = var(x, -1); s = std(x, -1); m, v, u, s");
        const std::vector<TensorView> views{TensorView{device.data(), DType::float32, {rows, columns}, {}}};
        const std::vector<TensorView> host_views{host.view()};
        REQUIRE(loss.cuda_source(views).find("lj::CenteredAcc a") != std::string::npos);
        const auto [shape, got, want] = map_outputs(loss, views, host_views);
        REQUIRE(shape == Shape{4, rows});
        int wrong = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            const double g = got[i], w = want[i];
            // The float32 result of float64 sums: a few roundings of float32.
            const bool ok = std::isnan(w) ? std::isnan(g) : std::isinf(w) ? g == w : w == 0 ? g == 0 : rel_error(g, w) < 1e-6;
            if (!ok && ++wrong <= 5) MESSAGE("result ", i / static_cast<std::size_t>(rows), " row ", i % static_cast<std::size_t>(rows), ": ", g, " (want ", w, ")");
        }
        CHECK(wrong == 0);
    }
}

TEST_CASE("row programs: group norm, a row of two strides with weights the same along each run" * doctest::skip(!have_gpu())) {
    // x [N, G, C/G, H, W] normalized over (2, 3, 4); w and b [G, C/G, 1, 1] vary along the row's first
    // dimension and repeat along the plane: loaded once a vector where the planes are whole vectors
    // (20 x 24), an element at a time where not (15 x 15). The map, then its gradient for x and w's
    // refusal (summed over the batch and the plane: the CPU reference's).
    const char* program = "m = mean(x, (2, 3, 4)); (x - m) / sqrt(mean((x - m)^2, (2, 3, 4)) + 1e-5) * w + b";
    for (const char* shape : {"4x8x8x20x24", "3x8x8x15x15"}) {
        CAPTURE(shape);
        const Typed x(std::string(shape) + ":normal", DType::float32, 51);
        const Typed w("8x8x1x1:normal", DType::float32, 52), b("8x8x1x1:normal", DType::float32, 53);
        Options options;
        options.inputs = {"x", "w", "b"};
        auto loss = compile(program, options);
        const std::vector<TensorView> views{x.view(), w.view(), b.view()}, host{x.host.view(), w.host.view(), b.host.view()};
        REQUIRE(loss.cuda_source(views).find("lj::load_run_constant<VW>") != std::string::npos);
        const MapOutputs m = map_outputs(loss, views, host, DType::float64);
        const Spread d = spread(m.got, m.want);
        CHECK(d.worst <= 2e-6 * d.largest);
        const Typed up(std::string(shape) + ":normal", DType::float32, 54);
        HostTensor grad_host(x.host.shape, DType::float32);
        DeviceBuffer grad(grad_host.bytes.size());
        const std::vector<std::string> wrt{"x"};
        loss.grad(views, wrt, std::vector<OutputView>{OutputView{grad.data(), DType::float32, x.host.shape, {}}}, up.view());
        synchronize();
        grad.download(grad_host.bytes.data(), grad_host.bytes.size());
        const Spread g = spread(grad_host, loss.reference_grad(host, wrt, up.host.view())[0].values);
        CHECK(g.worst <= 1e-5 * g.largest);
    }
}

TEST_CASE("row programs: out-of-range indices give nan rows, int32 indices, strided logits" * doctest::skip(!have_gpu())) {
    const Typed x("256x513:normal", DType::float32, 3);
    const Typed y("256:integers[-3,515]", DType::int32, 4);  // some below 0, some at or past 513
    Options options;
    options.inputs = {"x", "y"};
    auto ignore = compile("l = logsumexp(x, -1) - x[y]; sum(where(y >= 0 && y < 513, l, 0)) / sum(y >= 0 && y < 513)", options);
    const std::vector<TensorView> views{x.view(), y.view()};
    const std::vector<TensorView> host{x.host.view(), y.host.view()};
    CHECK(rel_error(ignore(views), ignore.reference(host)) < 2e-6);
    auto plain = compile("mean(logsumexp(x, -1) - x[y])", options);
    CHECK(std::isnan(plain(views)));  // out of range: nan, never a read elsewhere

    // Per-row map (reduction 'none'), in float32 and bfloat16 outputs.
    auto none = compile("logsumexp(x, -1) - x[y]", options);
    for (DType out_dtype : {DType::float32, DType::bfloat16}) {
        DeviceBuffer device(static_cast<std::size_t>(256) * size_of(out_dtype));
        none.map(views, OutputView{device.data(), out_dtype, {256}, {}});
        HostTensor got({256}, out_dtype), expected({256}, out_dtype);
        device.download(got.bytes.data(), got.bytes.size());
        none.reference_map(host, expected.output());
        int mismatched = 0;
        for (std::int64_t i = 0; i < 256; ++i) {
            const double a = got.at(i), b = expected.at(i);
            if (std::isnan(a) != std::isnan(b) || (!std::isnan(a) && rel_error(a, b) > (out_dtype == DType::float32 ? 2e-6 : 8e-3)))
                ++mismatched;
        }
        CHECK(mismatched == 0);
    }

    // Log-softmax map over a transposed view (rows strided): one element per access.
    const Typed square("384x384:normal", DType::float32, 5);
    const TensorView transposed{square.device.data(), DType::float32, {384, 384}, {1, 384}};
    const TensorView transposed_host{square.host.bytes.data(), DType::float32, {384, 384}, {1, 384}};
    auto log_softmax = compile("x - logsumexp(x, -1)");
    DeviceBuffer out(384 * 384 * sizeof(float));
    log_softmax.map(std::vector<TensorView>{transposed}, OutputView{out.data(), DType::float32, {384, 384}, {}});
    std::vector<float> got(384 * 384), expected(384 * 384);
    out.download(got.data(), got.size() * sizeof(float));
    log_softmax.reference_map(std::vector<TensorView>{transposed_host}, OutputView{expected.data(), DType::float32, {384, 384}, {}});
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, rel_error(got[i], expected[i]));
    CHECK(worst < 2e-6);
}

// A block's row of two or three inputs reduced alone: on an H200 under a register bound
// (ByRowBlockSeveralInputsMaxRegisters), float64 and unroll 8 without it; rows a multiple of 4 and not.
TEST_CASE("row programs: reductions of several inputs along a block's row match the reference" * doctest::skip(!have_gpu())) {
    // Triplet's two distances (about sqrt(2C) = 200) cancel to about 1 in float32, the program's type:
    // their rounding, 200 x 2^-24 a row, sets the tolerance (2.26e-6 measured with bfloat16 inputs).
    struct Case {
        const char* text;
        bool three;  // reads r too
        double tolerance;
    };
    const Case programs[] = {
        {"mean(1 - sum(a * b, -1) / max(sqrt(sum(a * a, -1)) * sqrt(sum(b * b, -1)), 1e-8))", false, 2e-6},
        {"mean(max(sqrt(sum((a - b + 1e-6)^2, -1)) - sqrt(sum((a - r + 1e-6)^2, -1)) + 1, 0))", true, 2e-5},
        {"mean(sum((a - b)^2, -1))", false, 2e-6},
    };
    for (const std::string shape : {"64x16384", "24x20001"}) {
        for (DType dtype : {DType::float32, DType::bfloat16, DType::float64}) {
            const Typed a(shape + ":normal", dtype, 21);
            const Typed b(shape + ":normal", dtype, 22);
            const Typed r(shape + ":normal", dtype, 23);
            for (const Case& program : programs) {
                for (int unroll : {0, 8}) {
                    const std::string text = program.text;  // (a const char* would be captured as its address)
                    CAPTURE(shape);
                    CAPTURE(to_string(dtype));
                    CAPTURE(text);
                    CAPTURE(unroll);
                    Options options;
                    options.inputs = program.three ? std::vector<std::string>{"a", "b", "r"} : std::vector<std::string>{"a", "b"};
                    options.knobs.unroll = unroll;
                    auto loss = compile(text, options);
                    std::vector<TensorView> views{a.view(), b.view()}, host{a.host.view(), b.host.view()};
                    if (program.three) {
                        views.push_back(r.view());
                        host.push_back(r.host.view());
                    }
                    CHECK(rel_error(loss(views), loss.reference(host)) < program.tolerance);
                }
            }
        }
    }
}

TEST_CASE("row programs: rank 3, and rows of one value per row" * doctest::skip(!have_gpu())) {
    const Typed a("6x40x256:normal", DType::float32, 7);
    const Typed b("6x40x256:normal", DType::float32, 8);
    const Typed r("6x40x1:uniform[0,2]", DType::float32, 9);  // one weight per row
    Options options;
    options.inputs = {"a", "b", "r"};
    auto cosine = compile("mean(r * (1 - sum(a * b, -1) / max(sqrt(sum(a * a, -1)) * sqrt(sum(b * b, -1)), 1e-8)))", options);
    const std::vector<TensorView> views{a.view(), b.view(), r.view()};
    const std::vector<TensorView> host{a.host.view(), b.host.view(), r.host.view()};
    CHECK(rel_error(cosine(views), cosine.reference(host)) < 2e-6);
    auto triplet = compile("mean(max(sqrt(sum((a - b + 1e-6)^2, -1)) - sqrt(sum((a - r + 1e-6)^2, -1)) + 1, 0))", options);
    CHECK(rel_error(triplet(views), triplet.reference(host)) < 2e-6);
}

}  // TEST_SUITE

TEST_SUITE("gpu") {

TEST_CASE("row programs: fused value and gradients match the reference" * doctest::skip(!have_gpu())) {
    struct Case {
        const char* program;
        bool indexed;
    };
    const Case cases[] = {
        {"mean(logsumexp(x, -1) - x[y])", true},
        {"lp = x - logsumexp(x, -1); mean(-0.9 * lp[y] - 0.1 * mean(lp, -1))", true},
        {"lp = (x - logsumexp(x, -1))[y]; mean(-(1 - exp(lp))^2 * lp)", true},
        {"mean(1 - sum(x * s, -1) / (max(sqrt(sum(x * x, -1)), 1e-8) * max(sqrt(sum(s * s, -1)), 1e-8)))", false},
        {"q = s / 2 - logsumexp(s / 2, -1); p = x / 2 - logsumexp(x / 2, -1); batchmean(sum(exp(q) * (q - p), -1) * 4)", false},
        // Composite: the factor 1 / sum(...) comes from a kernel of its own, first.
        {"l = logsumexp(x, -1) - x[y]; sum(where(y % 3 != 0, l, 0)) / sum(y % 3 != 0)", true},
        {"l = logsumexp(x, -1) - x[y]; sum((y % 5 + 1) * l) / sum(y % 5 + 1)", true},
    };
    for (const Run& run : cached_runs(true)) {
        const auto& [problem, row_cache, row_cluster, all_dtypes, row_team, row_prefetch, block, blocks_per_sm] = run;
        for (DType dtype : {DType::float32, DType::bfloat16}) {
            if (!all_dtypes && dtype != DType::float32) continue;
            const Typed x(problem.shape + ":normal", dtype, 21);
            const Typed s(problem.shape + ":normal", dtype, 22);
            const Typed y(std::to_string(problem.rows) + ":integers[0," + std::to_string(problem.columns - 1) + "]",
                          DType::int64, 23);
            for (const auto& c : cases) {
                CAPTURE(problem.shape);
                CAPTURE(to_string(dtype));
                CAPTURE(std::string(c.program));
                CAPTURE(row_cache.value_or(false));
                CAPTURE(row_cluster);
                CAPTURE(to_string(row_team));
                CAPTURE(row_prefetch.value_or(false));
                Options options;
                run.set(options.knobs);
                options.inputs = {"x", c.indexed ? "y" : "s"};
                auto loss = compile(c.program, options);
                const Typed& second = c.indexed ? y : s;
                const std::vector<TensorView> views{x.view(), second.view()};
                const std::vector<TensorView> host{x.host.view(), second.host.view()};
                const std::vector<std::string> wrt{"x"};
                HostTensor got(x.host.shape, dtype);
                DeviceBuffer grad(got.bytes.size());
                DeviceBuffer value(sizeof(float));
                const std::vector<OutputView> grads{OutputView{grad.data(), dtype, x.host.shape, {}}};
                loss.value_and_grad(views, wrt, grads, static_cast<float*>(value.data()));
                synchronize();
                float v = 0;
                value.download(&v, sizeof v);
                grad.download(got.bytes.data(), got.bytes.size());
                // float32 arithmetic per element: KL's q - p, with |q| and |p| near log(C), loses more
                // of the value to rounding on the longest rows (the same with the cache off).
                CHECK(rel_error(v, loss.reference(host)) < (problem.columns > 20000 ? 5e-6 : 2e-6));
                if (row_cache) CHECK(loss.kernel_info()->knobs.row_cache == *row_cache);  // each walks its rows twice
                if (row_cluster > 1) CHECK(loss.kernel_info()->knobs.row_cluster == row_cluster);
                if (problem.rows * 2 <= lossjit_test::device_multiprocessors() && problem.columns >= 300000)
                    CHECK(loss.kernel_info()->knobs.row_cluster == 8);  // automatic: few long rows
                if (problem.columns == 131072 && !row_cache)
                    CHECK(loss.kernel_info()->knobs.row_cluster > 1);  // automatic: long rows a block keeps too little of
                const auto ref = loss.reference_grad(host, wrt);
                const Spread d = spread(got, ref[0].values);
                // float32: within 1e-5 of the largest (the bound); bfloat16: its rounding.
                CHECK(d.worst <= (dtype == DType::float32 ? 1e-5 : 8e-3) * d.largest);
            }
        }
    }
}

TEST_CASE("row programs: a take picked out of the walk ahead (a block alone on its SM) matches the reference" *
          doctest::skip(!have_gpu())) {
    // With this GPU's defaults: on an H200 a fused cross-entropy whose 1024-thread block keeps its row
    // alone on its SM walks the next row ahead and picks x[y] out of that walk, its index loaded a row
    // ahead (ByRowWalkAheadPickedMaxThreads); elsewhere the copies. More rows than SMs, so that each
    // block takes rows in turn; 32000 columns end in a partial tile (the pick compares the column);
    // 65536 are kept in part (ByRowPrefetchAlonePart: the last columns, and an index there, walked
    // from memory); indices at either end of the row, ignored (-100) and out of range (nan, never a
    // stale slot).
    const bool h200 = gpu_class(open_device(0).gpu) == GpuClass::HopperHbm3e;
    const char* plain = "mean(logsumexp(x, -1) - x[y])";
    const char* ignore = "l = logsumexp(x, -1) - x[y]; sum(where(y != -100, l, 0)) / sum(y != -100)";
    struct Case {
        const char* program;
        std::int64_t row_200;  // row 200's index: in range, ignored, or out of range
    };
    for (const long long columns : {32768LL, 32000LL, 65536LL}) {
        const long long rows = 300;
        const Typed x(std::to_string(rows) + "x" + std::to_string(columns) + ":normal", DType::float32, 31);
        Typed y(std::to_string(rows) + ":integers[0," + std::to_string(columns - 1) + "]", DType::int64, 32);
        auto* index = reinterpret_cast<std::int64_t*>(y.host.bytes.data());
        index[0] = 0, index[1] = columns - 1, index[2] = columns - 4, index[3] = 3, index[rows - 1] = columns - 1;
        const Case cases[] = {{plain, 5}, {ignore, -100}, {plain, columns}};
        for (const Case& c : cases) {
            CAPTURE(columns);
            CAPTURE(std::string(c.program));
            CAPTURE(c.row_200);
            const bool ignores = c.program == ignore;
            index[7] = index[150] = ignores ? -100 : 7;
            index[200] = c.row_200;
            y.device.upload(y.host.bytes.data(), y.host.bytes.size());
            Options options;
            options.inputs = {"x", "y"};
            auto loss = compile(c.program, options);
            const std::vector<TensorView> views{x.view(), y.view()}, host{x.host.view(), y.host.view()};
            const std::vector<std::string> wrt{"x"};
            HostTensor got(x.host.shape, DType::float32);
            DeviceBuffer grad(got.bytes.size());
            DeviceBuffer value(sizeof(float));
            const std::vector<OutputView> grads{OutputView{grad.data(), DType::float32, x.host.shape, {}}};
            loss.value_and_grad(views, wrt, grads, static_cast<float*>(value.data()));
            synchronize();
            const std::string& signature = loss.kernel_info()->signature;
            CAPTURE(signature);
            if (h200) CHECK(signature.find("next row walked ahead") != std::string::npos);
            float v = 0;
            value.download(&v, sizeof v);
            if (c.row_200 == columns) {  // out of range: nan, never the slot of an earlier row's take
                CHECK(std::isnan(v));
                continue;
            }
            CHECK(rel_error(v, loss.reference(host)) < 5e-6);
            grad.download(got.bytes.data(), got.bytes.size());
            const auto ref = loss.reference_grad(host, wrt);
            const Spread d = spread(got, ref[0].values);
            CHECK(d.worst <= 1e-5 * d.largest);
        }
    }
}

TEST_CASE("row programs: the gradient of an input of one value per row ([N, 1]) matches the reference" *
          doctest::skip(!have_gpu())) {
    // Written once per row, beside the logits' gradient; along the last dimension (warp, block and
    // one-block teams) and along dimension 0 (rows side by side: several threads a row, and one).
    struct Case {
        const char* program;
        std::string x_shape, w_shape, y_shape;  // y_shape empty: no index
    };
    std::vector<Case> cases;
    for (const auto& problem : kProblems) {
        const std::string rows = std::to_string(problem.rows);
        cases.push_back({"mean(w * (logsumexp(x, -1) - x[y]))", problem.shape, rows + "x1", rows});
        cases.push_back({"sum(w * amax(x, -1) + w * w * mean(x, -1))", problem.shape, rows + "x1", ""});
    }
    cases.push_back({"mean(w * logsumexp(x, 0))", "64x8192", "1x8192", ""});             // several threads a row
    cases.push_back({"mean(w * sum(x, 0) + amax(x, 0))", "4x300000", "1x300000", ""});  // a thread a row
    for (const auto& c : cases) {
        for (DType dtype : {DType::float32, DType::bfloat16}) {
            CAPTURE(c.program);
            CAPTURE(c.x_shape);
            CAPTURE(to_string(dtype));
            const bool indexed = !c.y_shape.empty();
            const Typed x(c.x_shape + ":normal", dtype, 31), w(c.w_shape + ":uniform[0.5,1.5]", dtype, 32);
            const std::int64_t columns = x.host.shape.back();
            Options options;
            options.inputs = indexed ? std::vector<std::string>{"x", "w", "y"} : std::vector<std::string>{"x", "w"};
            auto loss = compile(c.program, options);
            std::vector<TensorView> views{x.view(), w.view()}, host{x.host.view(), w.host.view()};
            std::optional<Typed> y;
            if (indexed) {
                y.emplace(c.y_shape + ":integers[0," + std::to_string(columns - 1) + "]", DType::int64, 33);
                views.push_back(y->view());
                host.push_back(y->host.view());
            }
            const auto got = gpu_grads_w_x(loss, views, w.host.shape, x.host.shape, dtype);
            const auto ref = loss.reference_grad(host, std::vector<std::string>{"w", "x"});
            const double bound = dtype == DType::float32 ? 1e-5 : 8e-3;
            const Spread sw = spread(got.w, ref[0].values), sx = spread(got.x, ref[1].values);
            CHECK(sw.worst <= bound * sw.largest);
            CHECK(sx.worst <= bound * sx.largest);
        }
    }
}

TEST_CASE("row programs: class-weight gradients w[y], added into the classes, match the reference, same bits each run" *
          doctest::skip(!have_gpu())) {
    // Each row's one value and its class from the fused kernel, then the scatter kernels' chunks of
    // rows and ranges of classes (templates/scatter.cuh): one class range and one chunk (1 x 7), many
    // chunks (4096 rows: 4 of 1024), many class ranges (40000 classes: 20), classes along dimension 1.
    // Rows whose index is -1 are ignored by the program and add nothing.
    struct Case {
        const char* program;
        std::string x_shape, y_shape, w_shape;
    };
    const char* weighted = "mean(w[y] * (logsumexp(x, -1) - x[y]))";
    const char* ignoring =
        "l = logsumexp(x, -1) - x[y]; sum(where(y != -1, w[y] * l, 0)) / sum(where(y != -1, w[y], 0))";
    std::vector<Case> cases;
    for (const auto& problem : kProblems) {
        const std::string rows = std::to_string(problem.rows), columns = std::to_string(problem.columns);
        cases.push_back({weighted, problem.shape, rows, columns});
        cases.push_back({ignoring, problem.shape, rows, columns});
    }
    cases.push_back({weighted, "4096x5000", "4096", "5000"});
    cases.push_back({ignoring, "64x40000", "64", "40000"});
    cases.push_back({"mean(w[y] * (logsumexp(x, 1) - x[y]))", "8x100x300", "8x300", "100x1"});
    for (const auto& c : cases) {
        for (DType dtype : {DType::float32, DType::bfloat16}) {
            CAPTURE(c.program);
            CAPTURE(c.x_shape);
            CAPTURE(to_string(dtype));
            const Typed x(c.x_shape + ":normal", dtype, 41), w(c.w_shape + ":uniform[0.5,1.5]", dtype, 42);
            const std::int64_t classes = w.host.numel();
            const bool ignores = std::string(c.program).find("!= -1") != std::string::npos;
            const Typed y(c.y_shape + ":integers[" + (ignores ? "-1" : "0") + "," + std::to_string(classes - 1) + "]",
                          DType::int64, 43);
            Options options;
            options.inputs = {"x", "y", "w"};
            auto loss = compile(c.program, options);
            const std::vector<TensorView> views{x.view(), y.view(), w.view()}, host{x.host.view(), y.host.view(), w.host.view()};
            // Every class written, those no row has too; the same bits a second time.
            const auto got = gpu_grads_w_x(loss, views, w.host.shape, x.host.shape, dtype);
            CHECK(gpu_grads_w_x(loss, views, w.host.shape, x.host.shape, dtype).w.bytes == got.w.bytes);
            const auto ref = loss.reference_grad(host, std::vector<std::string>{"w", "x"});
            const double bound = dtype == DType::float32 ? 1e-5 : 8e-3;
            const Spread sw = spread(got.w, ref[0].values), sx = spread(got.x, ref[1].values);
            if (y.host.numel() > 1) CHECK(sw.largest > 0);  // one row's ratio does not move with w
            CHECK(sw.worst <= bound * sw.largest);
            CHECK(sx.worst <= bound * sx.largest);
        }
    }
    // No rows: every class's gradient is 0, written; no classes: nothing to add into.
    for (const auto& [x_shape, y_shape, w_shape] :
         {std::tuple{"0x5", "0", "5"}, std::tuple{"3x0", "3", "0"}}) {
        CAPTURE(x_shape);
        const Typed x(std::string(x_shape) + ":normal", DType::float32, 44), w(std::string(w_shape) + ":uniform", DType::float32, 45);
        const Typed y(std::string(y_shape) + ":integers[0,4]", DType::int64, 46);
        Options options;
        options.inputs = {"x", "y", "w"};
        auto loss = compile(weighted, options);
        const std::vector<TensorView> views{x.view(), y.view(), w.view()};
        const auto got = gpu_grads_w_x(loss, views, w.host.shape, x.host.shape, DType::float32);
        for (std::int64_t i = 0; i < got.w.numel(); ++i) CHECK(got.w.at(i) == 0.0);
    }
}

TEST_CASE("row programs: the row prefetch gives the reference's values and gradients, on and off" *
          doctest::skip(!have_gpu() || lossjit_test::device_arch() < 80)) {
    // KernelSpec::row_prefetch: every walk reads the row cache, the last one copies the team's next
    // row in. One block an SM (blocks_per_sm 1), so that each team takes several rows in turn: a
    // block a row (600 x 8192), warps (2048 x 1024 at 64 threads: 264 warps), part of the row kept
    // (3 x 70000: the rest read from memory in every walk), and the rows a team takes ending before
    // the grid does (24 x 20000). bfloat16 inputs are kept as float32: no prefetch (a note).
    const Run runs[] = {
        {Problem{"600x8192", 600, 8192}, true, 0, true, RowTeam::Block, true, 0, 1},
        {Problem{"2048x1024", 2048, 1024}, true, 0, true, RowTeam::Warp, true, 64, 1},
        {Problem{"3x70000", 3, 70000}, true, 1, true, RowTeam::Auto, true},
        {Problem{"24x20000", 24, 20000}, true, 1, true, RowTeam::Auto, true},
        {Problem{"600x8192", 600, 8192}, true, 0, true, RowTeam::Block, false, 0, 1},
    };
    struct Case {
        const char* program;
        bool map;
        std::vector<std::string> inputs;
    };
    const Case cases[] = {
        {"mean(logsumexp(x, -1) - x[y])", false, {"x", "y"}},
        {"mean(1 - sum(x * s, -1) / (max(sqrt(sum(x * x, -1)), 1e-8) * max(sqrt(sum(s * s, -1)), 1e-8)))", false, {"x", "s"}},
        {"m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)", true, {"x"}},  // three walks backward
        {"exp(x - logsumexp(x, -1))", true, {"x"}},
        // A take of a second input at the index (a class weight's pattern; exp keeps the weights
        // positive, so that the mean of a few rows does not cancel to nothing).
        {"mean(exp(s[y]) * (logsumexp(x, -1) - x[y]))", false, {"x", "s", "y"}},
        // Takes of log_softmax, whose adjoint's row sum is in closed form (inrow): label smoothing's
        // first walk only reduces, so that it walks ahead where the prefetch is on; focal's.
        {"lp = x - logsumexp(x, -1); mean(-0.9 * lp[y] - 0.1 * mean(lp, -1))", false, {"x", "y"}},
        {"lp = (x - logsumexp(x, -1))[y]; mean(-(1 - exp(lp))^2 * lp)", false, {"x", "y"}},
    };
    for (const Run& run : runs) {
        const Problem& problem = run.problem;
        for (DType dtype : {DType::float32, DType::float64, DType::bfloat16}) {
            const Typed x(problem.shape + ":normal", dtype, 51);
            const Typed s(problem.shape + ":normal", dtype, 52);
            const Typed y(std::to_string(problem.rows) + ":integers[0," + std::to_string(problem.columns - 1) + "]",
                          DType::int64, 53);
            for (const auto& c : cases) {
                CAPTURE(problem.shape);
                CAPTURE(to_string(dtype));
                CAPTURE(std::string(c.program));
                CAPTURE(run.row_prefetch.value_or(false));
                Options options;
                run.set(options.knobs);
                options.inputs = c.inputs;
                auto loss = compile(c.program, options);
                std::vector<TensorView> views{x.view()}, host{x.host.view()};
                for (std::size_t i = 1; i < c.inputs.size(); ++i) {
                    const Typed& next = c.inputs[i] == "y" ? y : s;
                    views.push_back(next.view());
                    host.push_back(next.host.view());
                }
                const std::vector<std::string> wrt{"x"};
                HostTensor got(x.host.shape, dtype);
                DeviceBuffer grad(got.bytes.size());
                const std::vector<OutputView> grads{OutputView{grad.data(), dtype, x.host.shape, {}}};
                const bool float32 = dtype == DType::float32;
                // Each kernel (a map's, its backward's, the fused value and gradient) keeps its rows
                // and copies the next ones in.
                auto check_kernel = [&] {
                    CHECK(loss.kernel_info()->knobs.row_cache == true);
                    CHECK(loss.kernel_info()->knobs.row_prefetch == (*run.row_prefetch && dtype != DType::bfloat16));
                };
                std::vector<ReferenceGradient> want;
                if (c.map) {
                    const MapOutputs m = map_outputs(loss, views, host, DType::float64);
                    check_kernel();
                    const Spread o = spread(m.got, m.want);
                    CHECK(o.worst <= (float32 ? 2e-6 : dtype == DType::float64 ? 1e-12 : 8e-3) * o.largest);
                    const Typed up(format_shape(m.shape) + ":normal", dtype, 54);
                    loss.grad(views, wrt, grads, up.view());
                    check_kernel();
                    want = loss.reference_grad(host, wrt, up.host.view());
                } else {
                    DeviceBuffer value(sizeof(double));
                    loss.value_and_grad(views, wrt, grads, OutputView{value.data(), DType::float64, Shape{}, {}});
                    check_kernel();
                    synchronize();
                    double v = 0;
                    value.download(&v, sizeof v);
                    CHECK(rel_error(v, loss.reference(host)) < (float32 ? 5e-6 : dtype == DType::float64 ? 1e-12 : 2e-3));
                    want = loss.reference_grad(host, wrt);
                }
                synchronize();
                grad.download(got.bytes.data(), got.bytes.size());
                const Spread d = spread(got, want[0].values);
                CHECK(d.worst <= (dtype == DType::bfloat16 ? 8e-3 : float32 ? 1e-5 : 1e-12) * d.largest);
            }
        }
    }
}

TEST_CASE("row programs: gradients of maps that reduce, with an upstream tensor, match the reference" *
          doctest::skip(!have_gpu())) {
    struct Case {
        const char* program;
        bool per_row_output;  // the output is [N] (reduction='none')
        bool indexed;
    };
    const Case cases[] = {
        {"x - logsumexp(x, -1)", false, false},                        // log_softmax
        {"exp(x - logsumexp(x, -1))", false, false},                   // softmax
        {"x / sqrt(mean(x * x, -1) + 1e-6)", false, false},            // RMS norm
        // Layer norm: the mean and the variance in one walk (lj::CenteredAcc), the elements in the next.
        {"m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)", false, false},
        {"logsumexp(x, -1) - x[y]", true, true},                       // cross-entropy, reduction='none'
    };
    for (const Run& run : cached_runs(false)) {
        const auto& [problem, row_cache, row_cluster, all_dtypes, row_team, row_prefetch, block, blocks_per_sm] = run;
        for (DType dtype : {DType::float32, DType::bfloat16, DType::float64}) {
            if (!all_dtypes && dtype != DType::float32) continue;
            const Typed x(problem.shape + ":normal", dtype, 31);
            const Typed y(std::to_string(problem.rows) + ":integers[0," + std::to_string(problem.columns - 1) + "]",
                          DType::int64, 32);
            for (const auto& c : cases) {
                CAPTURE(problem.shape);
                CAPTURE(to_string(dtype));
                CAPTURE(std::string(c.program));
                CAPTURE(row_cache.value_or(false));
                CAPTURE(row_cluster);
                CAPTURE(to_string(row_team));
                CAPTURE(row_prefetch.value_or(false));
                Options options;
                run.set(options.knobs);
                auto loss = compile(c.program, options);
                std::vector<TensorView> views{x.view()}, host{x.host.view()};
                if (c.indexed) {
                    views.push_back(y.view());
                    host.push_back(y.host.view());
                }
                const std::string out_shape = c.per_row_output ? std::to_string(problem.rows) : problem.shape;
                const Typed up(out_shape + ":normal", dtype, 33);
                const std::vector<std::string> wrt{"x"};
                HostTensor got(x.host.shape, dtype);
                DeviceBuffer grad(got.bytes.size());
                const std::vector<OutputView> grads{OutputView{grad.data(), dtype, x.host.shape, {}}};
                loss.grad(views, wrt, grads, up.view());
                synchronize();
                grad.download(got.bytes.data(), got.bytes.size());
                if (row_cluster > 1) CHECK(loss.kernel_info()->knobs.row_cluster == row_cluster);
                if (problem.rows * 2 <= lossjit_test::device_multiprocessors() && problem.columns >= 300000)
                    CHECK(loss.kernel_info()->knobs.row_cluster == 8);  // automatic: few long rows
                const auto ref = loss.reference_grad(host, wrt, up.host.view());
                const Spread d = spread(got, ref[0].values);
                CHECK(d.worst <= (dtype == DType::bfloat16 ? 8e-3 : 1e-5) * d.largest);
            }
        }
    }
}

}  // TEST_SUITE

TEST_SUITE("gpu") {

// Reductions along other dimensions: strided rows taken side by side where many lie so, a warp or
// the block on one strided row where few do; maps (per element, per row), reductions, their
// fused gradients and a map's backward, against the CPU reference.
TEST_CASE("row programs along other dimensions match the reference, in every team" * doctest::skip(!have_gpu())) {
    struct Case {
        const char* program;
        const char* shape;
        bool indexed;  // y: the class along dimension 1 ([N, D] for x [N, C, D])
    };
    const Case cases[] = {
        {"sum(x, 0)", "64x40000", false},                                   // side by side, 8 threads a row
        {"mean(x, 1)", "3x8x100000", false},                                // side by side, a thread a row
        {"amax(x, 1) - amin(x, 1)", "3x16x100000", false},                  // the same, comparing (unroll 4)
        {"sum(x, 0)", "3000x37", false},                                    // 37 rows: a warp per strided row
        {"amax(x, 0) - amin(x, 0)", "20000x5", false},                      // the block per strided row
        {"amax(x, 0) - amin(x, 0)", "5x4300", false},                       // side by side, the last block part full
        {"x / sqrt(mean(x^2, 1) + 1e-5)", "4x64x8192", false},              // RMS norm over the features
        {"x - logsumexp(x, 1)", "2x33x9001", false},                        // log_softmax along the classes
        {"m = mean(x, (2, 3)); (x - m) / sqrt(mean((x - m)^2, (2, 3)) + 1e-5)", "4x6x33x65", false},
        {"argmax(x, 1)", "4x300x5000", false},
        {"mean(logsumexp(x, 1) - x[y])", "8x50x4096", true},                 // K-dimensional cross-entropy
        {"logsumexp(x, 1) - x[y]", "8x50x4096", true},                       // the same, reduction='none'
        {"mean(var(x, 0) * amax(x, 0))", "40x30000", false},
        // Rows of two strides (Layout::row_inner): batch norm's (0, 2, 3), segments of 32 x 32 (vectors)
        // and of 33 x 65 (an element at a time); (0, 2) as a map per row; few long rows of two
        // strides (3 rows: a cluster's blocks each on sm_90).
        {"m = mean(x, (0, 2, 3)); (x - m) / sqrt(mean((x - m)^2, (0, 2, 3)) + 1e-5)", "4x16x32x32", false},
        {"m = mean(x, (0, 2, 3)); (x - m) / sqrt(mean((x - m)^2, (0, 2, 3)) + 1e-5)", "8x16x33x65", false},
        {"sum(x, (0, 2))", "16x40x1000", false},
        {"mean(amax(x, (0, 2)) - logsumexp(x, (0, 2)))", "6x3x50000", false},
    };
    for (const auto& c : cases) {
        for (DType dtype : {DType::float32, DType::bfloat16}) {
            CAPTURE(c.program);
            CAPTURE(c.shape);
            CAPTURE(to_string(dtype));
            const Typed x(std::string(c.shape) + ":normal", dtype, 41);
            const Shape& shape = x.host.shape;
            const std::string rows = std::to_string(shape[0]) + "x" + std::to_string(shape.size() > 2 ? shape[2] : 1);
            const Typed y(rows + ":integers[0," + std::to_string(shape[1] - 1) + "]", DType::int64, 42);
            Options options;
            options.inputs = c.indexed ? std::vector<std::string>{"x", "y"} : std::vector<std::string>{"x"};
            auto loss = compile(c.program, options);
            std::vector<TensorView> views{x.view()}, host{x.host.view()};
            if (c.indexed) {
                views.push_back(y.view());
                host.push_back(y.host.view());
            }
            const bool float32 = dtype == DType::float32;
            const std::vector<std::string> wrt{"x"};
            HostTensor grad_host(shape, dtype);
            DeviceBuffer grad(grad_host.bytes.size());
            const std::vector<OutputView> grads{OutputView{grad.data(), dtype, shape, {}}};
            const bool argmax = std::string(c.program).find("argmax") != std::string::npos;  // no gradient
            const auto expected_grad = check_value_then_grad(loss, views, host, wrt, grads, dtype, 43, !argmax);
            if (argmax) continue;
            grad.download(grad_host.bytes.data(), grad_host.bytes.size());
            const Spread d = spread(grad_host, expected_grad[0].values);
            CHECK(d.worst <= (float32 ? 1e-5 : 8e-3) * d.largest);
        }
    }
}

TEST_CASE("row programs: rows side by side kept in the row cache give the values and gradients they give without" *
          doctest::skip(!have_gpu())) {
    // Strided rows side by side keep their rows in shared memory between walks, interleaved by row
    // (lj::SideTeam::cache_at): a thread a row and two; a row not a multiple of 4 (33 classes); the
    // K-dimensional cross-entropy's fused value and gradient (and reduction='none' as a map); the
    // centered mean and variance; two inputs kept (cosine along dimension 1); rows longer than a
    // block holds, their leading columns kept (asked for). Each with the cache as chosen, asked for
    // and refused.
    struct Case {
        const char* program;
        const char* shape;  // x's and z's; y is x's without dimension 1
        std::vector<std::string> inputs;
    };
    const Case cases[] = {
        {"x / sqrt(mean(x^2, 1) + 1e-5)", "4x64x8192", {"x"}},    // 32768 rows: two threads a row
        {"x / sqrt(mean(x^2, 1) + 1e-5)", "2x64x300000", {"x"}},  // a thread a row
        {"x - logsumexp(x, 1)", "2x33x9001", {"x"}},
        {"mean(logsumexp(x, 1) - x[y])", "8x50x4096", {"x", "y"}},
        {"logsumexp(x, 1) - x[y]", "8x50x4096", {"x", "y"}},
        {"m = mean(x, 1); (x - m) / sqrt(mean((x - m)^2, 1) + 1e-5)", "4x48x8192", {"x"}},
        {"mean(1 - sum(x * z, 1) / sqrt(sum(x * x, 1) * sum(z * z, 1)))", "4x40x8192", {"x", "z"}},
        {"x / sqrt(mean(x^2, 1) + 1e-5)", "2x3000x4096", {"x"}},  // 1744 of 3000 columns kept, asked for
    };
    for (const auto& c : cases) {
        for (const auto& [dtype, knob] : {std::tuple{DType::float32, std::optional<bool>{}},
                                          std::tuple{DType::float32, std::optional<bool>{true}},
                                          std::tuple{DType::float32, std::optional<bool>{false}},
                                          std::tuple{DType::bfloat16, std::optional<bool>{}}}) {
            CAPTURE(std::string(c.program));
            CAPTURE(std::string(c.shape));
            CAPTURE(to_string(dtype));
            CAPTURE(knob.value_or(false));
            CAPTURE(knob.has_value());
            Options options;
            options.inputs = c.inputs;
            options.knobs.row_cache = knob;
            options.use_tuning = false;
            auto loss = compile(c.program, options);
            const Typed x(std::string(c.shape) + ":normal", dtype, 51), z(std::string(c.shape) + ":normal", dtype, 52);
            const Shape& shape = x.host.shape;
            const Typed y(std::to_string(shape[0]) + "x" + std::to_string(shape[2]) + ":integers[0," +
                              std::to_string(shape[1] - 1) + "]",
                          DType::int64, 53);
            std::vector<TensorView> views, host;
            std::vector<std::string> wrt;
            for (const auto& name : c.inputs) {
                const Typed& t = name == "x" ? x : name == "z" ? z : y;
                views.push_back(t.view());
                host.push_back(t.host.view());
                if (name != "y") wrt.push_back(name);
            }
            SameShapeGrads grads(wrt.size(), shape, dtype);
            const auto expected = check_value_then_grad(loss, views, host, wrt, grads.views, dtype, 54);
            // The kernel that walks the rows twice reports the knob: a map's gradient (the last one
            // run), a reduction's fused value and gradient (run again: its value alone walks once).
            if (loss.kind() == Kind::Reduction) {
                loss.value_and_grad(views, wrt, grads.views, nullptr);
                synchronize();
            }
            if (knob) CHECK(loss.kernel_info()->knobs.row_cache == knob);
            grads.check_against(expected, wrt, dtype == DType::float32 ? 1e-5 : 8e-3);
        }
    }
}

TEST_CASE("row programs: the gradient of amax and amin reaches the element the walk found, however it is compiled" *
          doctest::skip(!have_gpu())) {
    // amax's gradient is g / (the elements equal to the largest) at each of them: a later walk evaluates
    // each element again and compares it with the largest the first walk kept. Products and sums inside
    // the argument were fused into an FMA in one walk and not in the other, so no element matched and
    // whole rows were nan (float64, the first program, from tests/differential/k_takes.py, seed 93,
    // program 43). The printer now rounds them apart (lj::mul_rn, ExpressionPrinter).
    struct Case {
        const char* program;
        std::vector<std::string> inputs;  // x, then s (an input like x) or k (3 indices per row)
        std::vector<DType> dtypes;        // x's and s's; float32 would tie near exp(tanh(...)) = e
        std::string shape;
    };
    const Case cases[] = {
        {"a = sum(-1.5 - (x[k] - (exp(tanh(x)) * (x * 0.5))[k]), -1); "
         "mean((tanh(amax(x + x + a * x, -1)) + sum(sin(x[k]) - a, -1)) * (amax(exp(tanh(a * x)), -1) + a))",
         {"x", "k"}, {DType::float64}, "512x33"},
        {"mean(amax(x * s + x, -1) + amin(x * s - s, -1) * sum(x, -1))", {"x", "s"}, {DType::float32, DType::float64}, "512x333"},
        {"h = x * sum(x, -1) + s * s; mean(amax(h, -1) * sum(h * x, -1))", {"x", "s"}, {DType::float32, DType::float64}, "96x5000"},
    };
    for (const auto& c : cases) {
        for (DType dtype : c.dtypes) {
            CAPTURE(std::string(c.program));
            CAPTURE(to_string(dtype));
            const std::string rows = c.shape.substr(0, c.shape.find('x')), columns = c.shape.substr(c.shape.find('x') + 1);
            const bool takes = c.inputs[1] == "k";
            const Typed x(c.shape + ":normal", dtype, 71);
            const std::string indices = rows + "x3:integers[0," + std::to_string(std::stoll(columns) - 1) + "]";
            const Typed second = takes ? Typed(indices, DType::int64, 72) : Typed(c.shape + ":normal", dtype, 73);
            Options options;
            options.inputs = c.inputs;
            auto loss = compile(c.program, options);
            const std::vector<TensorView> views{x.view(), second.view()};
            const std::vector<TensorView> host{x.host.view(), second.host.view()};
            std::vector<std::string> wrt{"x"};
            if (!takes) wrt.push_back("s");
            SameShapeGrads grads(wrt.size(), x.host.shape, dtype);
            const auto want = check_value_then_grad(loss, views, host, wrt, grads.views, dtype, 74);
            grads.check_against(want, wrt, dtype == DType::float32 ? 1e-5 : 1e-12);
        }
    }
}

TEST_CASE("row programs: takes of K indices per row (x[k]): values, and gradients of x (repeated columns) and q" *
          doctest::skip(!have_gpu())) {
    // The K walked by the team's lanes (a warp, a block, a cluster's blocks), x's gradient written by
    // the element pass and again at the gathered columns (many repeats where K is near C: 64 x 16 with
    // 12), q's at each of its K. Indices in [0, C) for the gradients; a map's values with some outside
    // (nan rows), as int32, too. bfloat16 inputs for the distillation alone (their loads are the
    // same for every program).
    struct Case {
        Problem problem;
        std::int64_t k;
        int row_cluster;  // 0: automatic
    };
    std::vector<Case> cases;
    for (const auto& problem : kProblems) cases.push_back({problem, problem.columns > 8 ? 8 : 3, 0});
    cases.push_back({Problem{"64x16", 64, 16}, 12, 0});
    cases.push_back({Problem{"4096x4096", 4096, 4096}, 64, 0});
    if (lossjit_test::device_arch() >= 90) {
        cases.push_back({Problem{"24x20000", 24, 20000}, 20, 2});
        cases.push_back({Problem{"3x70000", 3, 70000}, 40, 8});
        cases.push_back({Problem{"2x300000", 2, 300000}, 5, 0});  // a cluster each, automatic
    }
    const char* programs[] = {
        "lse = logsumexp(x, -1); mean(sum(q * (log(q) - (x[k] - lse)), -1))",  // top-k distillation
        "sum(amax(q * x[k], -1) - logsumexp(x, -1) * sum(q, -1))",
        "mean(q * exp(x[k] - logsumexp(x, -1))) / mean(x * x)",  // a total of K values; a factor program
        "sum(q * x[k], -1)",                                        // a map: one value per row
        "mean(sum(q * (x - logsumexp(x, -1))[k], -1))",             // log_softmax taken: lse through the take
    };
    for (const auto& c : cases) {
        const std::string rows = std::to_string(c.problem.rows), kq = rows + "x" + std::to_string(c.k);
        Options options;
        options.inputs = {"x", "k", "q"};
        options.knobs.row_cluster = c.row_cluster;
        for (const char* text : programs) {
            for (DType dtype : {DType::float32, DType::bfloat16}) {
                if (dtype != DType::float32 && text != programs[0]) continue;  // bf16: the distillation's loads
                CAPTURE(text);
                CAPTURE(c.problem.shape);
                CAPTURE(c.row_cluster);
                CAPTURE(to_string(dtype));
                const Typed x(c.problem.shape + ":normal", dtype, 51), q(kq + ":uniform[0.1,1]", dtype, 52);
                const Typed k(kq + ":integers[0," + std::to_string(c.problem.columns - 1) + "]", DType::int64, 53);
                auto loss = compile(text, options);
                const std::vector<TensorView> views{x.view(), k.view(), q.view()};
                const std::vector<TensorView> host{x.host.view(), k.host.view(), q.host.view()};
                const bool float32 = dtype == DType::float32;
                const std::vector<std::string> wrt{"x", "q"};
                HostTensor gx(x.host.shape, dtype), gq(q.host.shape, dtype);
                DeviceBuffer dx(gx.bytes.size() + 4), dq(gq.bytes.size() + 4);
                dx.fill_bytes(0xFF);  // every element must be written
                dq.fill_bytes(0xFF);
                const std::vector<OutputView> grads{OutputView{dx.data(), dtype, gx.shape, {}},
                                                    OutputView{dq.data(), dtype, gq.shape, {}}};
                const auto want = check_value_then_grad(loss, views, host, wrt, grads, dtype, 54);
                dx.download(gx.bytes.data(), gx.bytes.size());
                dq.download(gq.bytes.data(), gq.bytes.size());
                const Spread sx = spread(gx, want[0].values), sq = spread(gq, want[1].values);
                CHECK(sx.worst <= (float32 ? 1e-5 : 8e-3) * sx.largest);
                CHECK(sq.worst <= (float32 ? 1e-5 : 8e-3) * sq.largest);
            }
        }
        // Indices outside [0, C) (nan rows), as int32: a map's values; and the fused value and gradient of
        // a take of an expression that would not pass a nan on ((x > 0)[k]): nan where the reference is.
        const Typed x(c.problem.shape + ":normal", DType::float32, 55), q(kq + ":uniform[0.1,1]", DType::float32, 56);
        const Typed k(kq + ":integers[-1," + std::to_string(c.problem.columns) + "]", DType::int32, 57);
        const std::vector<TensorView> views{x.view(), k.view(), q.view()};
        const std::vector<TensorView> host{x.host.view(), k.host.view(), q.host.view()};
        auto per_row = compile(programs[3], options);
        const MapOutputs m = map_outputs(per_row, views, host, DType::float64);
        const Spread d = spread(m.got, m.want);
        CHECK(d.worst <= 2e-6 * d.largest);
        auto guarded = compile("sum(where((x > 0)[k], q, 1) * (x - logsumexp(x, -1))[k], -1)", options);
        const MapOutputs g = map_outputs(guarded, views, host, DType::float64);
        const Spread dg = spread(g.got, g.want);
        CHECK(dg.worst <= 2e-6 * dg.largest);
        const Typed up(rows + ":normal", DType::float32, 58);
        HostTensor gx(x.host.shape, DType::float32);
        DeviceBuffer dx(gx.bytes.size());
        guarded.grad(views, std::vector<std::string>{"x"}, std::vector<OutputView>{OutputView{dx.data(), DType::float32, gx.shape, {}}},
                     up.view());
        const auto want = guarded.reference_grad(host, std::vector<std::string>{"x"}, up.host.view());
        synchronize();
        dx.download(gx.bytes.data(), gx.bytes.size());
        const Spread sg = spread(gx, want[0].values);
        CHECK(sg.worst <= 1e-5 * sg.largest);
    }
}

// Options::gpu (`lossjit emit --gpu`, `warm --gpu`): on a GPU lossjit knows by name, a call runs the
// kernel chosen without a GPU for that name, so that a cache warmed for the name serves the GPU. The
// named facts must be what this GPU's driver reports; a GPU known by none of the names is reported.
TEST_CASE("row programs: a GPU known by name runs the kernels chosen for its name without it" * doctest::skip(!have_gpu())) {
    const DeviceFacts device = open_device(0);
    const NamedGpu* named = nullptr;
    for (const NamedGpu& g : named_gpus())
        if (g.facts.arch == device.gpu.arch && g.facts.multiprocessors == device.gpu.multiprocessors &&
            g.facts.shared_bytes_per_block == device.gpu.shared_bytes_per_block &&
            g.facts.threads_per_sm == device.gpu.threads_per_sm && gpu_class(g.facts) == gpu_class(device.gpu))
            named = &g;
    if (!named) {
        MESSAGE("this GPU (" << device.tuning_text << ") is none of the GPUs lossjit knows by name: nothing to compare");
        return;
    }
    MESSAGE("this GPU is " << named->name << " (" << device.tuning_text << ")");
    struct Case {
        const char* program;
        const char* x;
        std::string second;  // the second input: "y" (an index), "s" (logits as x) or none
        bool grad;
    };
    const Case cases[] = {
        {"mean(logsumexp(x, -1) - x[y])", "256x32768:normal", "y", true},   // a block alone: the H200's prefetch
        {"mean(logsumexp(x, -1) - x[y])", "4096x4096:normal", "y", false},  // warps: each GPU's unroll
        {"mean(1 - sum(x * s, -1) / sqrt(sum(x * x, -1) * sum(s * s, -1)))", "256x16384:normal", "s", true},
        {"mean(1 - sum(x * s, -1) / sqrt(sum(x * x, -1) * sum(s * s, -1)))", "256x16384:normal", "s", false},  // the H200's register bound
        {"exp(x - logsumexp(x, -1))", "256x32768:normal", "", false},       // a map walking its rows twice
    };
    for (const Case& c : cases) {
        CAPTURE(std::string(c.program));
        CAPTURE(std::string(c.x));
        const Typed x(c.x, DType::float32, 5);
        const bool indexed = c.second == "y";
        const Typed second(indexed ? std::to_string(x.host.shape[0]) + ":integers[0,9]" : std::string(c.x),
                           indexed ? DType::int64 : DType::float32, 6);
        Options options;
        options.inputs = {"x"};
        if (!c.second.empty()) options.inputs.push_back(c.second);
        Loss loss = compile(c.program, options);
        std::vector<TensorView> views{x.view()};
        if (!c.second.empty()) views.push_back(second.view());
        const std::vector<std::string> wrt{"x"};
        if (loss.kind() == Kind::Map) {
            DeviceBuffer out(x.host.bytes.size());
            loss.map(views, OutputView{out.data(), DType::float32, x.host.shape, {}});
        } else if (c.grad) {
            DeviceBuffer grad(x.host.bytes.size()), value(sizeof(float));
            const std::vector<OutputView> grads{OutputView{grad.data(), DType::float32, x.host.shape, {}}};
            loss.value_and_grad(views, wrt, grads, static_cast<float*>(value.data()));
        } else {
            (void)loss(views);
        }
        synchronize();
        const std::string ran = loss.kernel_info()->signature;
        options.gpu = std::string(named->name);
        const Loss chosen = compile(c.program, options);
        const std::string source = c.grad ? chosen.cuda_source(views, wrt) : chosen.cuda_source(views);
        CHECK_MESSAGE(source.find("// Kernel variant: " + ran + ".\n") != std::string::npos, "ran: " << ran);
    }
}

}  // TEST_SUITE
