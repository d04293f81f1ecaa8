// Whole-tensor statistics inside expressions (`x / sqrt(sum(x^2))`, `mean((x - mean(x))^2)`): the
// split into statistics (ir/statistics.cpp), the CPU reference against values computed here, what is
// refused (gradients through a statistic, too many), and the kernels that read them compiled with
// NVRTC. The GPU against the reference: the case at the end (gpu suite).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "jit/compile.hpp"
#include "lossjit/errors.hpp"
#include "lossjit/lossjit.hpp"
#include "gpu_support.hpp"
#include "pipeline.hpp"
#include "host_views.hpp"

using namespace lossjit;
using lossjit_test::map_of;
using lossjit_test::view;

namespace {

std::vector<double> wave(std::size_t n, double phase) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(0.37 * static_cast<double>(i) + phase) * 2.0 + 0.25;
    return v;
}

double mean_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }

}  // namespace

TEST_SUITE("statistics") {

TEST_CASE("each whole-tensor reduction used per element, per row or reduced again becomes a statistic") {
    struct Row {
        const char* program;
        std::vector<std::string> statistics;  // as dump_checked prints them
        const char* body;                     // the program's body after the split
        const char* reduction;
    };
    const Row table[] = {
        {"x / sqrt(sum(x^2))", {"statistic0 = sqrt(sum(x ^ 2))"}, "x / statistic0", "none (elementwise map)"},
        {"mean((x - mean(x))^2)", {"statistic0 = mean(x)"}, "(x - statistic0) ^ 2", "mean"},
        // Nested: the variance reads the mean; the mean written three times is computed once.
        {"(x - mean(x)) / sqrt(mean((x - mean(x))^2) + 1e-5)",
         {"statistic0 = mean(x)", "statistic1 = sqrt(mean((x - statistic0) ^ 2) + 1e-05)"},
         "(x - statistic0) / statistic1", "none (elementwise map)"},
        // A binding of a statistic keeps its name in the program; one only statistics use is theirs.
        {"s = sum(x^2); n = sqrt(s); x / n", {"statistic0 = sqrt(sum(x ^ 2))"}, "x / n", "none (elementwise map)"},
        // Composite programs keep their own reductions; only the one used per element is split off.
        {"sum(x) / sum(x - mean(x))", {"statistic0 = mean(x)"}, "sum(x) / sum(x - statistic0)", "composite"},
        // A statistic of values per row, and one used per row.
        {"x - mean(logsumexp(x, -1))", {"statistic0 = mean(logsumexp(x, -1))"}, "x - statistic0", "none (elementwise map)"},
        {"mean(logsumexp(x - mean(x), -1))", {"statistic0 = mean(x)"}, "logsumexp(x - statistic0, -1)", "mean"},
        // Reduced again: a number summed over the broadcast shape.
        {"sum(mean(x))", {"statistic0 = mean(x)"}, "statistic0", "sum"},
        // A condition.
        {"where(sum(x) > 0, x, -x)", {"statistic0 = sum(x) > 0"}, "statistic0 ? x : -x", "none (elementwise map)"},
        // Nothing to split.
        {"sum(x) / sum(x * x)", {}, "sum(x) / sum(x * x)", "composite"},
    };
    for (const auto& row : table) {
        CAPTURE(row.program);
        const ir::Program program = check(parse(row.program, "expr"), {});
        const std::string dump = dump_checked(program);
        CHECK(program.statistics.size() == row.statistics.size());
        for (const auto& s : row.statistics) CHECK(dump.find("statistic (a pass of its own, first): " + s + "\n") != std::string::npos);
        CHECK(dump.find(std::string("body: ") + row.body + "\n") != std::string::npos);
        CHECK(dump.find(std::string("reduction: ") + row.reduction + "\n") != std::string::npos);
        CHECK(dump.find("params: (none)") != std::string::npos);  // statistics are not the caller's parameters
        for (const auto& statistic : program.statistics) CHECK(statistic->statistics.empty());
    }
}

TEST_CASE("statistic names never collide with the user's, and the caller's parameters stay the caller's") {
    Options options;
    options.inputs = {"x", "statistic0"};
    auto loss = compile("param a = 2; x * a / sum(statistic0)", options);
    const auto params = loss.params();
    REQUIRE(params.size() == 1);
    CHECK(params[0].name == "a");
    CHECK_THROWS_AS(loss.set_param("statistic_0", 1.0), UsageError);
    const std::string dump = dump_checked(check(parse("param a = 2; x * a / sum(statistic0)", "expr"), {options.inputs, {}}));
    CHECK(dump.find("statistic_0 = sum(statistic0)") != std::string::npos);
    const std::vector<double> x = wave(6, 0.1), s = wave(6, 0.9);
    const TensorView views[] = {view(x, {2, 3}), view(s, {2, 3})};
    loss.set_param("a", 3.0);
    const auto out = map_of(loss, views);
    const double total = std::accumulate(s.begin(), s.end(), 0.0);
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(out[i] == doctest::Approx(x[i] * 3.0 / total).epsilon(1e-14));
}

TEST_CASE("the reference computes each statistic first, as torch would in two steps") {
    const std::size_t n = 4 * 7;
    const std::vector<double> x = wave(n, 0.3), t = wave(7, 1.1);
    const TensorView xv = view(x, {4, 7});
    const double m = mean_of(x);
    double var = 0, squares = 0;
    for (double v : x) {
        var += (v - m) * (v - m);
        squares += v * v;
    }
    var /= static_cast<double>(n);
    SUBCASE("Frobenius normalization") {
        auto loss = compile("x / sqrt(sum(x^2))");
        const TensorView views[] = {xv};
        const auto out = map_of(loss, views);
        for (std::size_t i = 0; i < n; ++i) CHECK(out[i] == doctest::Approx(x[i] / std::sqrt(squares)).epsilon(1e-14));
    }
    SUBCASE("standardization, the variance reading the mean") {
        auto loss = compile("(x - mean(x)) / sqrt(mean((x - mean(x))^2) + 1e-5)");
        const TensorView views[] = {xv};
        const auto out = map_of(loss, views);
        for (std::size_t i = 0; i < n; ++i) CHECK(out[i] == doctest::Approx((x[i] - m) / std::sqrt(var + 1e-5)).epsilon(1e-13));
    }
    SUBCASE("a reduction of a statistic's use: the variance") {
        auto loss = compile("mean((x - mean(x))^2)");
        const TensorView views[] = {xv};
        CHECK(loss.reference(views) == doctest::Approx(var).epsilon(1e-14));
    }
    SUBCASE("a statistic of a broadcast input counts the broadcast shape's elements, as everywhere") {
        Options options;
        options.inputs = {"x", "t"};
        auto loss = compile("x - sum(t)", options);
        const TensorView views[] = {xv, view(t, {7})};
        const auto out = map_of(loss, views);
        const double total = 4.0 * std::accumulate(t.begin(), t.end(), 0.0);  // t.expand(4, 7).sum()
        for (std::size_t i = 0; i < n; ++i) CHECK(out[i] == doctest::Approx(x[i] - total).epsilon(1e-13));
        // A per-row value's statistic runs over the rows, as a Composite program's reduction does.
        auto per_row = compile("x - sum(w)", Options{.inputs = {"x", "w"}});
        const std::vector<double> w = wave(4, 2.1);
        const TensorView with_w[] = {xv, view(w, {4, 1})};
        const auto by_rows = map_of(per_row, with_w);
        const double rows_total = std::accumulate(w.begin(), w.end(), 0.0);
        for (std::size_t i = 0; i < n; ++i) CHECK(by_rows[i] == doctest::Approx(x[i] - rows_total).epsilon(1e-13));
        auto composite = compile("sum(w) + 0 * sum(x)", Options{.inputs = {"x", "w"}});
        CHECK(composite.reference(with_w) == doctest::Approx(rows_total).epsilon(1e-14));
    }
    SUBCASE("per row, beside a statistic") {
        auto loss = compile("x - logsumexp(x, -1) + mean(x)");
        const TensorView views[] = {xv};
        const auto out = map_of(loss, views);
        for (std::size_t r = 0; r < 4; ++r) {
            double lse = 0;
            for (std::size_t c = 0; c < 7; ++c) lse += std::exp(x[r * 7 + c]);
            lse = std::log(lse);
            for (std::size_t c = 0; c < 7; ++c) CHECK(out[r * 7 + c] == doctest::Approx(x[r * 7 + c] - lse + m).epsilon(1e-13));
        }
    }
}

TEST_CASE("a gradient through a statistic is refused, naming it; beside one it is computed") {
    Options options;
    options.inputs = {"p", "t"};
    auto loss = compile("mean((p - mean(t))^2)", options);
    const std::vector<double> p = wave(12, 0.2), t = wave(12, 1.4);
    const TensorView views[] = {view(p, {3, 4}), view(t, {3, 4})};
    const std::vector<std::string> wrt_t{"t"};
    CHECK_THROWS_WITH_AS(loss.reference_grad(views, wrt_t),
                         "expr:1:11: no gradient through 'mean(t)', a whole-tensor statistic used inside an expression, "
                         "with respect to 't' (it reads it): statistics are computed before the pass that uses them "
                         "and pass no gradient; differentiate with respect to inputs no statistic reads",
                         UnsupportedError);
    // With respect to p: 2 (p - mean(t)) / N, the statistic a number.
    const std::vector<std::string> wrt_p{"p"};
    const auto grads = loss.reference_grad(views, wrt_p);
    REQUIRE(grads.size() == 1);
    const double mt = mean_of(t);
    for (std::size_t i = 0; i < p.size(); ++i) CHECK(grads[0].values[i] == doctest::Approx(2.0 * (p[i] - mt) / 12.0).epsilon(1e-14));
}

TEST_CASE("at most kMaxStatistics statistics, with the position of the one past") {
    std::string text = "x";
    for (int i = 0; i <= kMaxStatistics; ++i) text += fmt::format(" + sum(x ^ {})", i + 1);
    text = "x * (" + text + ")";
    CHECK_THROWS_AS(compile(text), SourceError);
    try {
        compile(text);
    } catch (const SourceError& e) {
        CHECK(std::string(e.what()).find("at most 8 whole-tensor statistics") != std::string::npos);
    }
}

TEST_CASE("the kernels that read statistics compile with NVRTC") {
    struct Case {
        const char* program;
        Shape shape;
        bool gradient;  // the fused value-and-gradient kernel too (with respect to p, which no statistic reads)
    };
    const Case cases[] = {
        {"x / sqrt(sum(x^2))", {64, 100}, false},                          // a map (rows loop)
        {"mean((x - mean(x))^2)", {64, 100}, false},                       // a reduction
        {"x - logsumexp(x, -1) + mean(x)", {64, 100}, false},             // by rows, a map
        {"mean(logsumexp(x - mean(x), -1))", {64, 100}, false},           // by rows, a reduction
        {"sum(x) / sum(x - mean(x))", {64, 100}, false},                   // Composite
        {"param a = 2; (x - mean(x)) / (a * std(x, -1))", {64, 100}, false},  // a caller's parameter beside
    };
    for (const auto& c : cases) {
        CAPTURE(c.program);
        auto loss = compile(c.program);
        const TensorView views[] = {TensorView::contiguous(nullptr, c.shape, DType::float32)};
        const KernelBuild build = loss.compile_kernel(views, "compute_90");
        CHECK(build.image_bytes > 0);
        CHECK(build.source.find("const double* __restrict__ statistics") != std::string::npos);
    }
    Options options;
    options.inputs = {"p", "t"};
    for (const char* text : {"mean((p - mean(t))^2)", "mean(logsumexp(p - mean(t), -1))", "(p - mean(t))^2"}) {
        CAPTURE(text);
        auto loss = compile(text, options);
        const TensorView views[] = {TensorView::contiguous(nullptr, {64, 100}, DType::float32),
                                    TensorView::contiguous(nullptr, {64, 100}, DType::float32)};
        const std::vector<std::string> wrt{"p"};
        const std::string source = loss.cuda_source(views, wrt);
        CHECK(source.find("statistics[0]") != std::string::npos);
        CHECK(!compile_cuda(source, "compute_90").data.empty());
    }
}

TEST_CASE("a statistic computes in its program's type, whatever inputs it reads itself") {
    // mean(y * y + 0.25) reads only an integer, but the program reads a float64 input: unsplit it
    // would compute in float64, and so must its statistic's kernel (a float32 one rounded y * y above
    // 2^24: a float64 program off by 5e-8, GPU differential seed 111). The map's output dtype too.
    Options options;
    options.inputs = {"y", "b"};
    auto loss = compile("mean(y * y + 0.25) * b", options);
    auto map = compile("y * mean(b)", options);
    for (const DType data : {DType::float32, DType::float64}) {
        CAPTURE(to_string(data));
        const TensorView views[] = {TensorView::contiguous(nullptr, {64, 100}, DType::int32),
                                    TensorView::contiguous(nullptr, {64, 100}, data)};
        const auto statistics = loss.statistic_sources(views);
        REQUIRE(statistics.size() == 1);
        const bool f64 = data == DType::float64;
        CHECK((statistics[0].find("using Value = double;") != std::string::npos) == f64);
        CHECK((loss.cuda_source(views).find("using Value = double;") != std::string::npos) == f64);
        CHECK(map.output_dtype(views) == data);
        CHECK((map.cuda_source(views).find("using Value = double;") != std::string::npos) == f64);
    }
    // The reference: y * y + 0.25 is exact in float64 (16793604.25 for y = 4098), not in float32.
    auto reduction = compile("sum(mean(y * y + 0.25) * b)", options);
    const std::vector<std::int32_t> y{4098, 3};
    const std::vector<double> b{1, 2};
    const TensorView views[] = {TensorView::contiguous(y.data(), {2}, DType::int32), view(b, {2})};
    const double m = (4098.0 * 4098.0 + 0.25 + 9.25) / 2;
    CHECK(reduction.reference(views) == m * 3);
}

}  // TEST_SUITE

TEST_SUITE("gpu") {

TEST_CASE("statistics: values and gradients beside them match the reference" * doctest::skip(!lossjit_test::have_typed_gpu())) {
    using lossjit_test::Typed;
    const char* maps[] = {
        "x / sqrt(sum(x^2))",
        "(x - mean(x)) / sqrt(mean((x - mean(x))^2) + 1e-5)",
        "x - logsumexp(x, -1) + mean(x)",
        "where(sum(x) > 0, x, -x) * amax(x, -1)",
    };
    const char* reductions[] = {
        "mean((x - mean(x))^2)",
        "mean(logsumexp(x - mean(x), -1))",
        "sum(x) / sum(abs(x - mean(x)))",
    };
    for (DType dtype : {DType::float32, DType::bfloat16}) {
        for (const char* shape : {"300x1001", "4x64x96"}) {
            const Typed x(std::string(shape) + ":normal", dtype, 21);
            const TensorView views[] = {x.view()};
            const TensorView host[] = {x.host.view()};
            for (const char* text : maps) {
                CAPTURE(text);
                CAPTURE(shape);
                CAPTURE(to_string(dtype));
                auto loss = compile(text);
                const Shape out_shape = loss.output_shape(host);
                std::vector<double> want(static_cast<std::size_t>(element_count(out_shape)));
                loss.reference_map(host, OutputView{want.data(), DType::float64, out_shape, {}});
                DeviceBuffer out(want.size() * sizeof(float));
                loss.map(views, OutputView{out.data(), DType::float32, out_shape, {}});
                std::vector<float> got(want.size());
                out.download(got.data(), got.size() * sizeof(float));
                double largest = 0, worst = 0;
                for (std::size_t i = 0; i < want.size(); ++i) {
                    largest = std::max(largest, std::fabs(want[i]));
                    worst = std::max(worst, std::fabs(got[i] - want[i]));
                }
                CHECK(worst <= 2e-6 * std::max(largest, 1.0));
            }
            for (const char* text : reductions) {
                CAPTURE(text);
                CAPTURE(shape);
                auto loss = compile(text);
                const double want = loss.reference(host);
                CHECK(loss(views) == doctest::Approx(want).epsilon(2e-6));
            }
        }
    }
    // A gradient beside a statistic: with respect to p, which the statistic (of t) does not read.
    const Typed p("300x1001:normal", DType::float32, 31), t("300x1001:normal", DType::float32, 32);
    Options options;
    options.inputs = {"p", "t"};
    auto simple = compile("mean((p - mean(t))^2)", options);
    const TensorView views[] = {p.view(), t.view()};
    const TensorView host[] = {p.host.view(), t.host.view()};
    const std::vector<std::string> wrt{"p"};
    const auto want = simple.reference_grad(host, wrt);
    DeviceBuffer grad(want[0].values.size() * sizeof(float));
    const OutputView grads[] = {OutputView{grad.data(), DType::float32, want[0].shape, {}}};
    simple.grad(views, wrt, grads);
    std::vector<float> got(want[0].values.size());
    grad.download(got.data(), got.size() * sizeof(float));
    double largest = 0, worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        largest = std::max(largest, std::fabs(want[0].values[i]));
        worst = std::max(worst, std::fabs(got[i] - want[0].values[i]));
    }
    CHECK(worst <= 2e-6 * largest);
}

}  // TEST_SUITE
