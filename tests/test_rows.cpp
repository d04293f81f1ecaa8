// Programs that reduce along rows: the language (row reductions, x[y], several whole-tensor
// reductions), the CPU reference against values computed here by hand, and NVRTC compiles of their
// kernels. GPU runs are in test_gpu_rows.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "jit/compile.hpp"
#include "lossjit/lossjit.hpp"
#include "pipeline.hpp"
#include "lang/builtins.hpp"
#include "support.hpp"
#include "tools/host.hpp"

using namespace lossjit;

namespace {

// Logits [4, 5], their class indices (one ignored: -100), a second set of logits, class weights.
const std::vector<float> kLogits{0.5f, -1.25f, 2.0f, 0.0f, 1.5f,    3.0f, 2.5f, -0.5f, 1.0f, 0.25f,
                                 -2.0f, 0.75f, 0.5f, 1.75f, -1.0f,  0.0f, 0.0f, 1.0f, -3.0f, 2.25f};
const std::vector<float> kOther{1.0f, 0.5f, -0.5f, 2.0f, 0.0f,  -1.0f, 0.25f, 1.5f, 0.5f, 2.5f,
                                0.75f, -0.25f, 1.0f, 0.0f, 3.0f,  2.0f, -2.0f, 0.5f, 1.0f, -0.75f};
const std::vector<std::int64_t> kTargets{2, 0, 4, 1};
const std::vector<std::int64_t> kIgnored{2, -100, 4, 1};
const std::vector<float> kWeights{1.0f, 2.0f, 0.5f, 1.5f, 3.0f};
constexpr std::int64_t kRows = 4, kCols = 5;

double logit(const std::vector<float>& x, std::int64_t r, std::int64_t c) { return x[static_cast<std::size_t>(r * kCols + c)]; }
double lse(const std::vector<float>& x, std::int64_t r, double scale = 1.0) {
    double m = -INFINITY, s = 0;
    for (std::int64_t c = 0; c < kCols; ++c) m = std::max(m, logit(x, r, c) / scale);
    for (std::int64_t c = 0; c < kCols; ++c) s += std::exp(logit(x, r, c) / scale - m);
    return m + std::log(s);
}

struct Host {
    std::vector<float> x = kLogits, s = kOther, w = kWeights;
    std::vector<std::int64_t> y = kTargets, ignored = kIgnored;
    TensorView view(const std::vector<float>& v, Shape shape) const { return TensorView{v.data(), DType::float32, shape, {}}; }
    TensorView index(const std::vector<std::int64_t>& v) const { return TensorView{v.data(), DType::int64, {kRows}, {}}; }
};

double value_of(const std::string& program, std::vector<std::string> inputs, std::vector<TensorView> views) {
    Options options;
    options.inputs = std::move(inputs);
    return compile(program, options).reference(views);
}

}  // namespace

TEST_SUITE("rows") {

TEST_CASE("mistakes in row reductions, indices and combined reductions point at their column") {
    struct Case {
        const char* program;
        const char* message;
        int column;
    };
    const Case cases[] = {
        {"mean(sum(x, 0) - amin(x, -1))", "the reductions inside one program go along the same dimensions", 26},
        {"mean(logsumexp(x))", "'logsumexp' takes 2 arguments", 6},
        {"mean(amax(x, 1, 2))", "'amax' takes 2 arguments", 6},
        {"mean(x[y + 1])", "an index must be an input", 10},  // at the index's operator
        {"mean(x[2])", "an index must be an input", 8},
        // Takes of what is the same at every column: they would ignore y.
        {"mean(2[y] * x[y])", "the same at every column of the row", 7},
        {"param w = 3; mean(w[y] * x[y])", "the same at every column of the row", 20},
        {"mean(logsumexp(x, -1)[y])", "the same at every column of the row", 22},
        {"mean(sum(x)[y] + x[y])", "the same at every column of the row", 12},
        {"mean((y * 2)[y] + x[y])", "the same at every column of the row", 13},
        {"mean(x[y", "expected ']'", 9},
        {"amax = 2; amax", "is a function name and cannot be bound", 1},
        {"sum(x, -1, 2)", "'sum' takes 1 argument (the whole tensor) or 2", 1},
        {"mean(logsumexpp(x, -1))", "did you mean 'logsumexp'", 6},
    };
    for (const auto& c : cases) {
        CAPTURE(c.program);
        try {
            compile(c.program);
            FAIL("compiled");
        } catch (const SourceError& e) {
            CHECK(std::string(e.what()).find(c.message) != std::string::npos);
            CHECK(e.where().column == c.column);
        }
    }
    // A take of a parameter behind 60 bindings that each use the one before twice: checked in time
    // linear in the program (a walk of the uses would take 2^60 steps).
    std::string chain = "param a = 1.5; t0 = a * a; ";
    for (int k = 1; k < 60; ++k)
        chain += "t" + std::to_string(k) + " = t" + std::to_string(k - 1) + " * t" + std::to_string(k - 1) + " + 1; ";
    chain += "mean(t59[y] * x[y])";
    CHECK_THROWS_WITH_AS(compile(chain), doctest::Contains("the same at every column of the row"), SourceError);
}

TEST_CASE("what a program is: kinds and output shapes") {
    Host h;
    const auto x = h.view(h.x, {kRows, kCols});
    const auto y = h.index(h.y);
    auto log_softmax = compile("x - logsumexp(x, -1)");
    CHECK(log_softmax.kind() == Kind::Map);
    CHECK(log_softmax.output_shape(std::vector<TensorView>{x}) == Shape{kRows, kCols});
    auto per_row = compile("logsumexp(x, -1) - x[y]");
    CHECK(per_row.kind() == Kind::Map);
    CHECK(per_row.output_shape(std::vector<TensorView>{x, y}) == Shape{kRows});
    auto ratio = compile("sum(x) / sum(x * x)");
    CHECK(ratio.kind() == Kind::Reduction);
    CHECK(ratio.reduction() == "composite");
    CHECK(compile("mean(logsumexp(x, -1))").reduction() == "mean");
    // A float index, and an index of the wrong shape, are refused when called.
    auto ce = compile("mean(logsumexp(x, -1) - x[y])");
    CHECK_THROWS_WITH_AS(ce.reference(std::vector<TensorView>{x, h.view(h.w, {kRows})}),
                         doctest::Contains("must be of an integer dtype"), UsageError);
    const std::vector<std::int64_t> three{0, 1, 2};
    CHECK_THROWS_AS(ce.reference(std::vector<TensorView>{x, TensorView{three.data(), DType::int64, {3}, {}}}),
                    UsageError);
}

TEST_CASE("the reference: cross-entropy and its variants against values computed here") {
    Host h;
    const auto x = h.view(h.x, {kRows, kCols});
    const auto y = h.index(h.y);
    double ce = 0;
    for (std::int64_t r = 0; r < kRows; ++r) ce += lse(h.x, r) - logit(h.x, r, h.y[static_cast<std::size_t>(r)]);
    ce /= kRows;
    CHECK(value_of("mean(logsumexp(x, -1) - x[y])", {"x", "y"}, {x, y}) == doctest::Approx(ce).epsilon(1e-12));
    // The same through a binding and log-softmax, and as an int32 index.
    const std::vector<std::int32_t> y32(h.y.begin(), h.y.end());
    CHECK(value_of("lp = x - logsumexp(x, -1); mean(-lp[y])", {"x", "y"},
                   {x, TensorView{y32.data(), DType::int32, {kRows}, {}}}) == doctest::Approx(ce).epsilon(1e-12));

    // ignore_index = -100: the mean over the rows that are not ignored; x[-100] is nan but unused.
    double ignored = 0;
    int kept = 0;
    for (std::int64_t r = 0; r < kRows; ++r) {
        const auto t = h.ignored[static_cast<std::size_t>(r)];
        if (t == -100) continue;
        ignored += lse(h.x, r) - logit(h.x, r, t);
        ++kept;
    }
    CHECK(value_of("l = logsumexp(x, -1) - x[y]; sum(where(y != -100, l, 0)) / sum(y != -100)", {"x", "y"},
                   {x, h.index(h.ignored)}) == doctest::Approx(ignored / kept).epsilon(1e-12));

    // Every row ignored: 0 / 0, nan, as torch gives.
    const std::vector<std::int64_t> all_ignored(kRows, -100);
    CHECK(std::isnan(value_of("l = logsumexp(x, -1) - x[y]; sum(where(y != -100, l, 0)) / sum(y != -100)", {"x", "y"},
                              {x, h.index(all_ignored)})));

    // label_smoothing = 0.1 (torch: (1 - e) * nll + e * mean over classes of -log p).
    double smooth = 0;
    for (std::int64_t r = 0; r < kRows; ++r) {
        double mean_lp = 0;
        for (std::int64_t c = 0; c < kCols; ++c) mean_lp += logit(h.x, r, c) - lse(h.x, r);
        mean_lp /= kCols;
        smooth += -(0.9 * (logit(h.x, r, h.y[static_cast<std::size_t>(r)]) - lse(h.x, r))) - 0.1 * mean_lp;
    }
    CHECK(value_of("lp = x - logsumexp(x, -1); mean(-0.9 * lp[y] - 0.1 * mean(lp, -1))", {"x", "y"}, {x, y}) ==
          doctest::Approx(smooth / kRows).epsilon(1e-7));  // constants round to float32 where they meet data

    // Class weights: torch's weighted mean, sum(w[y] * l) / sum(w[y]).
    double num = 0, den = 0;
    for (std::int64_t r = 0; r < kRows; ++r) {
        const auto t = h.y[static_cast<std::size_t>(r)];
        num += h.w[static_cast<std::size_t>(t)] * (lse(h.x, r) - logit(h.x, r, t));
        den += h.w[static_cast<std::size_t>(t)];
    }
    CHECK(value_of("l = logsumexp(x, -1) - x[y]; sum(w[y] * l) / sum(w[y])", {"x", "y", "w"},
                   {x, y, h.view(h.w, {kCols})}) == doctest::Approx(num / den).epsilon(1e-12));

    // Focal loss, gamma 2.
    double focal = 0;
    for (std::int64_t r = 0; r < kRows; ++r) {
        const double lp = logit(h.x, r, h.y[static_cast<std::size_t>(r)]) - lse(h.x, r);
        focal += -std::pow(1 - std::exp(lp), 2) * lp;
    }
    CHECK(value_of("lp = (x - logsumexp(x, -1))[y]; mean(-(1 - exp(lp))^2 * lp)", {"x", "y"}, {x, y}) ==
          doctest::Approx(focal / kRows).epsilon(1e-12));
}

TEST_CASE("the reference: row reductions, nested ones, and maps per row and per element") {
    Host h;
    const auto x = h.view(h.x, {kRows, kCols});
    const auto s = h.view(h.s, {kRows, kCols});
    // amax - amin, and a mean along the row.
    double spread = 0, means = 0;
    for (std::int64_t r = 0; r < kRows; ++r) {
        double hi = -INFINITY, lo = INFINITY, sum = 0;
        for (std::int64_t c = 0; c < kCols; ++c) {
            hi = std::max(hi, logit(h.x, r, c));
            lo = std::min(lo, logit(h.x, r, c));
            sum += logit(h.x, r, c);
        }
        spread += hi - lo;
        means += sum / kCols;
    }
    CHECK(value_of("mean(amax(x, -1) - amin(x, -1))", {"x"}, {x}) == doctest::Approx(spread / kRows).epsilon(1e-12));
    CHECK(value_of("sum(mean(x, -1))", {"x"}, {x}) == doctest::Approx(means).epsilon(1e-12));

    // Cosine similarity loss, and distillation KL at temperature 2 (batchmean, times T^2).
    double cosine = 0, kl = 0;
    for (std::int64_t r = 0; r < kRows; ++r) {
        double ab = 0, aa = 0, bb = 0;
        for (std::int64_t c = 0; c < kCols; ++c) {
            ab += logit(h.x, r, c) * logit(h.s, r, c);
            aa += logit(h.x, r, c) * logit(h.x, r, c);
            bb += logit(h.s, r, c) * logit(h.s, r, c);
        }
        cosine += 1 - ab / std::max(std::sqrt(aa) * std::sqrt(bb), 1e-8);
        for (std::int64_t c = 0; c < kCols; ++c) {
            const double log_q = logit(h.x, r, c) / 2 - lse(h.x, r, 2);  // teacher: x
            const double log_p = logit(h.s, r, c) / 2 - lse(h.s, r, 2);  // student: s
            kl += std::exp(log_q) * (log_q - log_p);
        }
    }
    CHECK(value_of("mean(1 - sum(a * b, -1) / max(sqrt(sum(a * a, -1)) * sqrt(sum(b * b, -1)), 1e-8))", {"a", "b"},
                   {x, s}) == doctest::Approx(cosine / kRows).epsilon(1e-12));
    CHECK(value_of("param T = 2; q = t / T - logsumexp(t / T, -1); p = s / T - logsumexp(s / T, -1);"
                   "batchmean(sum(exp(q) * (q - p), -1)) * T^2",
                   {"t", "s"}, {x, s}) == doctest::Approx(kl / kRows * 4).epsilon(1e-12));

    // Maps: log-softmax (per element) and the loss per row (reduction='none').
    auto log_softmax = compile("x - logsumexp(x, -1)");
    std::vector<float> out(static_cast<std::size_t>(kRows * kCols));
    log_softmax.reference_map(std::vector<TensorView>{x}, OutputView{out.data(), DType::float32, {kRows, kCols}, {}});
    for (std::int64_t r = 0; r < kRows; ++r)
        for (std::int64_t c = 0; c < kCols; ++c)
            CHECK(out[static_cast<std::size_t>(r * kCols + c)] == doctest::Approx(logit(h.x, r, c) - lse(h.x, r)).epsilon(1e-6));
    Options options;
    options.inputs = {"x", "y"};
    auto none = compile("logsumexp(x, -1) - x[y]", options);
    std::vector<double> rows(kRows);
    none.reference_map(std::vector<TensorView>{x, h.index(h.ignored)}, OutputView{rows.data(), DType::float64, {kRows}, {}});
    CHECK(std::isnan(rows[1]));  // y = -100: no such column
    CHECK(rows[0] == doctest::Approx(lse(h.x, 0) - logit(h.x, 0, 2)).epsilon(1e-6));
    // The output may also be [N, 1], as keepdim gives it.
    none.reference_map(std::vector<TensorView>{x, h.index(h.y)}, OutputView{rows.data(), DType::float64, {kRows, 1}, {}});
    CHECK(rows[1] == doctest::Approx(lse(h.x, 1) - logit(h.x, 1, 0)).epsilon(1e-6));
    CHECK_THROWS_WITH_AS(
        none.reference_map(std::vector<TensorView>{x, h.index(h.y)}, OutputView{out.data(), DType::float32, {kRows, kCols}, {}}),
        doctest::Contains("one value per row"), UsageError);
}

TEST_CASE("the reference: edge rows (empty, infinite, nan) as torch gives them") {
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> x{-inf, -inf, inf, 1.0f, NAN, 2.0f};
    const TensorView view{x.data(), DType::float32, {3, 2}, {}};
    std::vector<double> out(3);
    compile("logsumexp(x, -1)").reference_map(std::vector<TensorView>{view}, OutputView{out.data(), DType::float64, {3}, {}});
    CHECK(out[0] == -INFINITY);
    CHECK(out[1] == INFINITY);
    CHECK(std::isnan(out[2]));
    compile("amax(x, -1)").reference_map(std::vector<TensorView>{view}, OutputView{out.data(), DType::float64, {3}, {}});
    CHECK(out[0] == -INFINITY);
    CHECK(out[1] == INFINITY);
    CHECK(std::isnan(out[2]));
    // Rows of no elements: sum 0, mean nan, logsumexp -inf.
    const TensorView empty{x.data(), DType::float32, {3, 0}, {}};
    compile("sum(x, -1) + logsumexp(x, -1)").reference_map(std::vector<TensorView>{empty}, OutputView{out.data(), DType::float64, {3}, {}});
    CHECK(out[0] == -INFINITY);
}

TEST_CASE("gradients through rows: softmax minus one-hot, ties, and finite differences") {
    Host h;
    const auto x = h.view(h.x, {kRows, kCols});
    const auto y = h.index(h.y);
    Options options;
    options.inputs = {"x", "y"};
    auto ce = compile("mean(logsumexp(x, -1) - x[y])", options);
    const std::vector<std::string> wrt{"x"};
    const auto grads = ce.reference_grad(std::vector<TensorView>{x, y}, wrt);
    REQUIRE(grads.size() == 1);
    for (std::int64_t r = 0; r < kRows; ++r)
        for (std::int64_t c = 0; c < kCols; ++c) {
            const double softmax = std::exp(logit(h.x, r, c) - lse(h.x, r));
            const double expected = (softmax - (c == h.y[static_cast<std::size_t>(r)] ? 1.0 : 0.0)) / kRows;
            CHECK(grads[0].values[static_cast<std::size_t>(r * kCols + c)] == doctest::Approx(expected).epsilon(1e-12));
        }
    // An index has no gradient.
    CHECK_THROWS_AS(ce.reference_grad(std::vector<TensorView>{x, y}, std::vector<std::string>{"y"}), UsageError);
    // An input reaching two whole-tensor reductions: d (S1 / S2) / d x_i = 1 / S2 - 2 x_i S1 / S2^2.
    double s1 = 0, s2 = 0;
    for (double v : h.x) {
        s1 += v;
        s2 += v * v;
    }
    const auto ratio = compile("sum(x) / sum(x * x)").reference_grad(std::vector<TensorView>{x}, wrt);
    for (std::size_t i = 0; i < h.x.size(); ++i)
        CHECK(ratio[0].values[i] == doctest::Approx(1.0 / s2 - 2.0 * h.x[i] * s1 / (s2 * s2)).epsilon(1e-12));
    // A reduction the input reaches only through what passes no gradient (a condition, floor): no
    // factor, no seed; the others' gradients as ever.
    struct Piecewise {
        const char* program;
        double (*expected)(double x, double s1, double s2);
    };
    const Piecewise piecewise[] = {
        {"a = sum(x * x); b = sum(x); where(a > 1, b, 0)", [](double, double, double s2) { return s2 > 1 ? 1.0 : 0.0; }},
        {"floor(sum(x)) + sum(x * x)", [](double v, double, double) { return 2 * v; }},
        {"a = sum(x * x); b = sum(x); a * (b > 0)", [](double v, double s1, double) { return s1 > 0 ? 2 * v : 0.0; }},
    };
    for (const auto& p : piecewise) {
        CAPTURE(p.program);
        const auto loss = compile(p.program);
        const auto g = loss.reference_grad(std::vector<TensorView>{x}, wrt);
        for (std::size_t i = 0; i < h.x.size(); ++i) CHECK(g[0].values[i] == doctest::Approx(p.expected(h.x[i], s1, s2)).epsilon(1e-12));
        CHECK(!compile(p.program).compile_kernel(std::vector<TensorView>{x}, wrt, "compute_90").source.empty());
    }

    // amax: torch gives ties equal shares.
    const std::vector<double> tied{1.0, 3.0, 3.0, -1.0};
    const TensorView tied_view{tied.data(), DType::float64, {1, 4}, {}};
    const auto shares = compile("sum(amax(x, -1))").reference_grad(std::vector<TensorView>{tied_view}, wrt);
    CHECK(shares[0].values == std::vector<double>{0.0, 0.5, 0.5, 0.0});

    // Every differentiable row loss against central differences of its own value (float64 inputs).
    struct Loss {
        const char* program;
        std::vector<std::string> inputs;
    };
    const Loss losses[] = {
        {"lp = x - logsumexp(x, -1); mean(-0.9 * lp[y] - 0.1 * mean(lp, -1))", {"x", "y"}},
        {"lp = (x - logsumexp(x, -1))[y]; mean(-(1 - exp(lp))^2 * lp)", {"x", "y"}},
        {"mean(1 - sum(x * s, -1) / (max(sqrt(sum(x * x, -1)), 1e-8) * max(sqrt(sum(s * s, -1)), 1e-8)))", {"x", "s"}},
        {"mean(max(sqrt(sum((x - s + 1e-6)^2, -1)) - sqrt(sum((x - 0.5 * s)^2, -1)) + 1, 0))", {"x", "s"}},
        {"q = s / 2 - logsumexp(s / 2, -1); p = x / 2 - logsumexp(x / 2, -1); batchmean(sum(exp(q) * (q - p), -1) * 4)",
         {"x", "s"}},
        {"mean(amax(x * s, -1) + amin(x, -1) + mean(x^2, -1))", {"x", "s"}},
        // Several whole-tensor reductions, one of them reached by x: weighted and ignore_index CE.
        {"l = logsumexp(x, -1) - x[y]; sum(where(y != 2, l, 0)) / sum(y != 2)", {"x", "y"}},
        {"l = logsumexp(x, -1) - x[y]; 2 * sum((y + 1) * l) / sum(y + 1) + sum(y)", {"x", "y"}},
    };
    std::vector<double> x64(h.x.begin(), h.x.end()), s64(h.s.begin(), h.s.end());
    for (const auto& l : losses) {
        CAPTURE(l.program);
        Options o;
        o.inputs = l.inputs;
        auto loss = compile(l.program, o);
        auto views = [&](const std::vector<double>& xs) {
            std::vector<TensorView> v{TensorView{xs.data(), DType::float64, {kRows, kCols}, {}}};
            if (l.inputs[1] == "y") v.push_back(h.index(h.y));
            else v.push_back(TensorView{s64.data(), DType::float64, {kRows, kCols}, {}});
            return v;
        };
        const auto g = loss.reference_grad(views(x64), wrt);
        double largest = 0;
        for (double v : g[0].values) largest = std::max(largest, std::fabs(v));
        for (std::size_t i = 0; i < x64.size(); ++i) {
            CAPTURE(i);
            auto up = x64, down = x64;
            const double step = 1e-6;
            up[i] += step;
            down[i] -= step;
            const double numeric = (loss.reference(views(up)) - loss.reference(views(down))) / (2 * step);
            CHECK(std::fabs(g[0].values[i] - numeric) <= 1e-6 * std::max(largest, 1.0));
        }
    }
}

TEST_CASE("every row program's kernel compiles with NVRTC, in every dtype and team") {
    const char* programs[] = {
        "mean(logsumexp(x, -1) - x[y])",
        "l = logsumexp(x, -1) - x[y]; sum(where(y != -100, l, 0)) / sum(y != -100)",
        "lp = x - logsumexp(x, -1); mean(-0.9 * lp[y] - 0.1 * mean(lp, -1))",
        "lp = (x - logsumexp(x, -1))[y]; mean(-(1 - exp(lp))^2 * lp)",
        "mean(amax(x, -1) - amin(x, -1) + sum(x, -1))",
        "x - logsumexp(x, -1)",
        "logsumexp(x, -1) - x[y]",
        "param T = 2; mean(exp(x / T - logsumexp(x / T, -1))[y]) + T * sum(x) / sum(x * x)",
    };
    for (const char* text : programs) {
        CAPTURE(text);
        const bool indexed = std::string(text).find("[y]") != std::string::npos;
        Options options;
        options.inputs = indexed ? std::vector<std::string>{"x", "y"} : std::vector<std::string>{"x"};
        auto loss = compile(text, options);
        for (DType dtype : {DType::float32, DType::bfloat16, DType::float64}) {
            for (std::int64_t columns : {std::int64_t{1024}, std::int64_t{1023}, std::int64_t{20000}}) {
                CAPTURE(to_string(dtype));
                CAPTURE(columns);
                std::vector<TensorView> views{TensorView::contiguous(nullptr, {64, columns}, dtype)};
                if (indexed) views.push_back(TensorView::contiguous(nullptr, {64}, DType::int64));
                const KernelBuild build = loss.compile_kernel(views, "compute_90");
                CHECK(build.image_bytes > 0);
                // Rows of 1023 (not a multiple of 4): vectors from each row's first aligned column.
                CHECK((loss.cuda_source(views).find("vectors from each row's first aligned column") != std::string::npos) ==
                      (columns == 1023));
                // The fused value-and-gradient kernel of a single reduction.
                if (!loss.reduction().empty() && loss.reduction() != "composite") {
                    const std::vector<std::string> wrt{"x"};
                    const std::string source = loss.cuda_source(views, wrt);
                    CHECK(!compile_cuda(source, "compute_90").data.empty());
                }
            }
        }
    }
    // Any unroll the knob allows: a tile of 3 x 4 or 5 x 8 values is not a power of 2, which
    // logsumexp's pairwise tile add pads (it failed to compile with unroll 3 before stop 46).
    for (const char* text : {"mean(logsumexp(x, -1) - x[y])",
                             "l = logsumexp(x, -1); loss = mean(l - x[y]); acc = mean(argmax(x, -1) == y); loss, acc"}) {
        for (int unroll : {3, 5, 6}) {
            for (DType dtype : {DType::float32, DType::bfloat16}) {
                CAPTURE(text);
                CAPTURE(unroll);
                CAPTURE(to_string(dtype));
                Options options;
                options.inputs = {"x", "y"};
                options.knobs.unroll = unroll;
                auto loss = compile(text, options);
                const std::vector<TensorView> views{TensorView::contiguous(nullptr, {64, 20000}, dtype),
                                                    TensorView::contiguous(nullptr, {64}, DType::int64)};
                CHECK(loss.cuda_source(views).find("unroll " + std::to_string(unroll) + ",") != std::string::npos);
                CHECK(loss.compile_kernel(views, "compute_90").image_bytes > 0);
            }
        }
    }
    // With a row cache, a take the first walk does not need is filled after it (by_rows_emit.cpp,
    // row_body), and what its argument uses is defined before: `w * 2`, one value per row; and a
    // take that argument uses (`x[w_i]` in the last) is not deferred, so it is defined before too.
    for (const char* text : {"mean(logsumexp(x, -1) - (x * (w * 2))[y])",
                             "s = w * 2; l = logsumexp(x, -1) - (x * s)[y]; sum(s * l) / sum(s)",
                             "mean(logsumexp(x, -1) - (x * (x[y] * 2))[y])"}) {
        CAPTURE(text);
        Options options;
        options.inputs = {"x", "y", "w"};
        options.knobs.row_cache = true;
        auto loss = compile(text, options);
        const std::vector<TensorView> views{TensorView::contiguous(nullptr, {64, 20000}, DType::float32),
                                            TensorView::contiguous(nullptr, {64}, DType::int64),
                                            TensorView::contiguous(nullptr, {64, 1}, DType::float32)};
        const std::string source = loss.cuda_source(views, std::vector<std::string>{"x"});
        CHECK(source.find("row cache of 1 input") != std::string::npos);
        CHECK(!compile_cuda(source, "compute_90").data.empty());
        // The outer take is filled after the first walk's loop; everything it reads comes before
        // that walk: the only `if (i_y` after "pass 1" is the outer take's.
        const auto walk = source.find("// pass 1 over the row");
        REQUIRE(walk != std::string::npos);
        const auto first_fill = source.find("if (i_y >= 0 && i_y < C)", walk);
        REQUIRE(first_fill != std::string::npos);
        CHECK(source.find("if (i_y >= 0 && i_y < C)", first_fill + 1) == std::string::npos);
    }
}

TEST_CASE("a mean and the squared deviations from it take one walk over the row") {
    struct Row {
        const char* program;
        int walks;      // "// pass N over the row" in the value's kernel
        int centered;   // accumulators of a mean and its squared deviations
    };
    const Row table[] = {
        // Layer norm: the mean and the variance in one walk, the elements in a second.
        {"m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)", 2, 1},
        {"m = mean(x, -1); d = m - x; d / sqrt(mean(d * d, -1) + 1e-5)", 2, 1},
        {"x / sqrt(sum((x - mean(x, -1))^2, -1))", 2, 1},
        {"sum((2 * x - mean(2 * x, -1))^2, -1)", 1, 1},  // arguments that print alike
        // var and std: their expansions' detach(mean), with amax and amin beside it.
        {"var(x, -1)", 1, 1},
        {"std(x, -1) + var(x, -1)", 1, 2},
        {"mean(std(x, -1))", 1, 1},
        // Of a value per row: its two copies in std's expansion are one value (compared by form, not
        // printed: the printer names per-row values only after the walks are planned).
        {"sum(std(mean(x, -1), -1))", 2, 1},
        // The mean of x - amax is mean(x) - amax (split_row_sums), in amax's walk: its deviations are
        // summed in a walk of their own, two as before.
        {"mean((x - amax(x, -1) - mean(x - amax(x, -1), -1))^2, -1)", 2, 0},
        {"mean((logsumexp(x, -1) - mean(x, -1))^2, -1)", 2, 0},  // of another argument
        // Nested: the inner variance shares its mean's walk; the outer one, whose mean is that
        // variance, takes a walk of its own.
        {"var((x - mean(x, -1))^2, -1)", 2, 1},
        {"m = mean(x, -1); d = (x - m)^2; v = mean(d, -1); mean((d - v)^2, -1)", 2, 1},
        // Not of this form: each reduction of what depends on another takes a walk of its own.
        {"m = mean(x, -1); mean(abs(x - m)^2, -1)", 2, 0},
        {"m = mean(x, -1); mean((x - m)^3, -1)", 2, 0},
        {"mean((x - amax(x, -1))^2, -1)", 2, 0},
        {"mean((x - mean(2 * x, -1))^2, -1)", 2, 0},
        {"m = sum(x, -1); mean((x - m)^2, -1)", 2, 0},
        // One mean, two sums of its squared deviations: the first shares its accumulator.
        {"m = mean(x, -1); mean((x - m)^2, -1) + sum((x - m)^2, -1)", 2, 1},
    };
    for (const Row& row : table) {
        CAPTURE(row.program);
        auto loss = compile(row.program, Options{});
        const std::vector<TensorView> views{TensorView::contiguous(nullptr, {64, 20000}, DType::float32)};
        const std::string source = loss.cuda_source(views);
        int walks = 0, centered = 0;
        for (auto at = source.find(" over the row\n"); at != std::string::npos; at = source.find(" over the row\n", at + 1)) ++walks;
        for (auto at = source.find("lj::CenteredAcc a"); at != std::string::npos; at = source.find("lj::CenteredAcc a", at + 1))
            ++centered;
        CHECK(walks == row.walks);
        CHECK(centered == row.centered);
        CHECK(!compile_cuda(source, "compute_90").data.empty());
        // Its gradient's kernel too, where the value is a reduction.
        if (!loss.reduction().empty()) {
            const std::string grad = loss.cuda_source(views, std::vector<std::string>{"x"});
            CHECK(!compile_cuda(grad, "compute_90").data.empty());
        }
    }
    // Rows side by side (a reduction over dimension 0 of a contiguous [R, C]) keep a walk each: the
    // accumulator is larger than a side-by-side team's shared memory holds for one.
    auto outer = compile("m = mean(x, 0); (x - m) / sqrt(mean((x - m)^2, 0) + 1e-5)", Options{});
    const std::string source = outer.cuda_source(std::vector<TensorView>{TensorView::contiguous(nullptr, {4096, 8192}, DType::float32)});
    CHECK(source.find("SideTeam") != std::string::npos);
    CHECK(source.find("CenteredAcc a") == std::string::npos);
}

}  // TEST_SUITE

TEST_CASE("logsumexp's and argmax's row accumulators, compiled on the host, match long double") {
    // The kernels' accumulator texts (the builtins table's) with tests/row_accumulators_host.cpp,
    // which walks rows as a team's lanes do and merges them as Team::all_reduce does (two phases)
    // and as clusters do (combine): ties, nan, -inf rows, +inf, ramps, rows far below 0, masks;
    // warps and blocks, vectors of 1, 4 and 8, unroll 1, 2, 3 and 5. What CI checks of the kernels'
    // logsumexp and argmax without a GPU.
    lossjit_test::TempDir dir("lossjit-accumulators");
    const auto header = dir.path / "accumulators.cuh";
    {
        std::ofstream out(header);
        out << row_reduction_info(RowReduction::LogSumExp).cuda_helper
            << row_reduction_info(RowReduction::ArgMax).cuda_helper;
        for (const auto& shared : shared_accumulators()) out << shared.cuda_helper;
    }
    const auto binary = dir.path / "accumulators";
    const auto built = lossjit_test::run_shell(host_cxx() + " -std=c++17 -O1 -DLJ_ACCUMULATORS='\"" + header.string() + "\"' " +
                                               source_dir() + "/tests/row_accumulators_host.cpp -o " + binary.string());
    INFO(built.output);
    REQUIRE(built.status == 0);
    const auto ran = lossjit_test::run_shell(binary.string());
    INFO(ran.output);
    CHECK(ran.status == 0);
    CHECK(ran.output == "0 failures\n");
}
