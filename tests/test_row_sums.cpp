// A program's own row sums and means split where that saves a walk (split_row_sums, ir/row_sums.cpp):
// which programs are split and into what, the walks of their kernels (compiled with NVRTC), rows of
// no elements, and values and gradients against formulas computed here in float64.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "host_views.hpp"
#include "jit/compile.hpp"
#include "lossjit/errors.hpp"
#include "lossjit/lossjit.hpp"
#include "pipeline.hpp"

using namespace lossjit;
using lossjit_test::map_of;
using lossjit_test::view;

namespace {

constexpr std::int64_t kRows = 64, kColumns = 1000;

// The program's inputs by name: x and t [64, 1000] float32, y [64] and k [64, 4] int64, q [64, 4]
// float32 (K values per row beside x[k]).
std::vector<TensorView> shapes_of(const Loss& loss) {
    std::vector<TensorView> views;
    for (const std::string& name : loss.inputs()) {
        if (name == "y") views.push_back(TensorView::contiguous(nullptr, {kRows}, DType::int64));
        else if (name == "k") views.push_back(TensorView::contiguous(nullptr, {kRows, 4}, DType::int64));
        else if (name == "q") views.push_back(TensorView::contiguous(nullptr, {kRows, 4}, DType::float32));
        else views.push_back(TensorView::contiguous(nullptr, {kRows, kColumns}, DType::float32));
    }
    return views;
}

int walks_of(const std::string& source) {
    int walks = 0;  // the emitter heads each walk "// pass N over the row"
    const std::string head = " over the row\n";
    for (auto at = source.find(head); at != std::string::npos; at = source.find(head, at + 1)) ++walks;
    return walks;
}

std::vector<double> wave(std::size_t n, double phase, double scale) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.61 * static_cast<double>(i) + phase) + 0.3;
    return v;
}

}  // namespace

TEST_SUITE("row sums") {

TEST_CASE("a row sum that waits for another reduction of its row is split where that saves a walk") {
    struct Row {
        const char* program;
        const char* body;  // as dump_checked prints it
        int walks;         // of the value's kernel ("// pass N over the row"); -1: not counted
    };
    const Row table[] = {
        // Label smoothing's mean of log_softmax: mean(x) beside the logsumexp, one walk (two before).
        {"lp = x - logsumexp(x, -1); mean(-0.9 * lp[y] - 0.1 * mean(lp, -1))",
         "-0.9 * lp[y] - 0.1 * (mean(x, -1) - logsumexp(x, -1))", 1},
        // A per-row term sums to C times it; a row of no elements keeps its 0 (the where).
        {"mean(sum(x - mean(x, -1), -1))", "sum(1, -1) > 0 ? sum(x, -1) - mean(x, -1) * sum(1, -1) : 0", 1},
        // A quotient by a value per row and a product: the factor out of the sum.
        {"mean(sum(x / sqrt(sum(x * x, -1)) * t, -1))",
         "sum(1, -1) > 0 ? 1 / sqrt(sum(x * x, -1)) * sum(x * t, -1) : 0", 1},
        // A map's per-row value (reduction='none'), then its elements: two walks (three before).
        {"x - logsumexp(x, -1) - mean(x - logsumexp(x, -1), -1)",
         "x - logsumexp(x, -1) - (mean(x, -1) - logsumexp(x, -1))", 2},
        // Left as written: the expansion sum(t * x) - lse * sum(t), whose terms can be far larger than
        // the sum, is never done.
        {"mean(-sum(t * (x - logsumexp(x, -1)), -1))", "-sum(t * (x - logsumexp(x, -1)), -1)", 2},
        // ... nor a split that saves the program no walk (the softmax's sum needs the second anyway).
        {"mean(sum(x - logsumexp(x, -1), -1) + sum(exp(x - logsumexp(x, -1)), -1))",
         "sum(x - logsumexp(x, -1), -1) + sum(exp(x - logsumexp(x, -1)), -1)", 2},
        // ... nor one that reaches a take: with k [N, 4] it sums over a take's K values, no walk to save.
        {"mean(sum(x[k] - logsumexp(x, -1), -1))", "sum(x[k] - logsumexp(x, -1), -1)", -1},
        // ... nor, in a program with takes, a sum: here q holds K values per row, and sum(q - r, -1)
        // is sum(q, -1) - K * r, not C * r. (A mean is the same over either; one of K values is
        // refused, below.)
        {"r = amax(x, -1); mean(sum(q * x[k], -1) + sum(q - r, -1))", "sum(q * x[k], -1) + sum(q - r, -1)", -1},
        // ... nor a reduction of a value per row (var's sum(1, -1): no walk; nor a product, a power).
        {"mean(sum(logsumexp(x, -1), -1))", "sum(logsumexp(x, -1), -1)", -1},
        {"mean(sum((x - mean(x, -1))^2, -1))", "sum((x - mean(x, -1)) ^ 2, -1)", 1},
    };
    for (const Row& row : table) {
        CAPTURE(std::string(row.program));
        const std::string dump = dump_checked(check(parse(row.program, "expr"), {}));
        CHECK(dump.find(std::string("body: ") + row.body + "\n") != std::string::npos);
        const Loss loss = compile(row.program);
        const std::vector<TensorView> shapes = shapes_of(loss);
        const std::string value = loss.cuda_source(shapes);
        if (row.walks >= 0) CHECK(walks_of(value) == row.walks);
        CHECK(!compile_cuda(value, "compute_90").data.empty());
        const std::vector<std::string> wrt{"x"};
        if (!loss.reduction().empty()) CHECK(!compile_cuda(loss.cuda_source(shapes, wrt), "compute_90").data.empty());
    }
}

TEST_CASE("a row of no elements keeps the value it had as written") {
    // Taken apart, the empty row's sum would be 0 - 0 * logsumexp = 0 * -inf, nan; as written it is 0.
    // A mean of no elements is nan either way.
    const struct {
        const char* program;
        double empty;  // each row's value
    } table[] = {
        {"sum(x - logsumexp(x, -1), -1)", 0.0},
        {"sum(x - mean(x, -1), -1)", 0.0},
        {"sum(x / sqrt(sum(x * x, -1)), -1)", 0.0},
        {"mean(x - logsumexp(x, -1), -1)", std::nan("")},
    };
    const std::vector<double> none;
    for (const auto& row : table) {
        CAPTURE(std::string(row.program));
        const Loss loss = compile(row.program);
        const TensorView views[] = {view(none, {3, 0})};
        const std::vector<double> out = map_of(loss, views);
        REQUIRE(out.size() == 3);
        for (double v : out) {
            if (std::isnan(row.empty)) CHECK(std::isnan(v));
            else CHECK(v == row.empty);
        }
    }
}

TEST_CASE("split, the values and gradients are those of the program as written") {
    const std::int64_t n = 5, c = 7;
    const std::vector<double> x = wave(static_cast<std::size_t>(n * c), 0.2, 3.0);
    const std::vector<double> t = wave(static_cast<std::size_t>(n * c), 1.3, 1.0);
    std::vector<std::int64_t> y{3, 0, 6, 2, 5};
    const TensorView xv = view(x, {n, c}), tv = view(t, {n, c});
    const TensorView yv = TensorView::contiguous(y.data(), {n}, DType::int64);
    auto at = [&](const std::vector<double>& v, std::int64_t i, std::int64_t j) {
        return v[static_cast<std::size_t>(i * c + j)];
    };
    std::vector<double> lse(static_cast<std::size_t>(n)), norm(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        double top = -INFINITY, sum = 0, squares = 0;
        for (std::int64_t j = 0; j < c; ++j) top = std::max(top, at(x, i, j));
        for (std::int64_t j = 0; j < c; ++j) {
            sum += std::exp(at(x, i, j) - top);
            squares += at(x, i, j) * at(x, i, j);
        }
        lse[static_cast<std::size_t>(i)] = top + std::log(sum);
        norm[static_cast<std::size_t>(i)] = std::sqrt(squares);
    }
    // The reference's d/dx against `expected(i, j)`, computed here.
    auto check_gradient = [&](const Loss& loss, std::span<const TensorView> views, const auto& expected) {
        const auto grad = loss.reference_grad(views, std::vector<std::string>{"x"})[0].values;
        for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t j = 0; j < c; ++j) {
                CAPTURE(i);
                CAPTURE(j);
                CHECK(grad[static_cast<std::size_t>(i * c + j)] == doctest::Approx(expected(i, j)).epsilon(1e-13));
            }
    };

    SUBCASE("label smoothing: the value and d/dx = (-0.9 (onehot - p) - 0.1 (1 / C - p)) / N") {
        Options options;
        options.inputs = {"x", "y"};
        const Loss loss = compile("lp = x - logsumexp(x, -1); mean(-0.9 * lp[y] - 0.1 * mean(lp, -1))", options);
        const TensorView views[] = {xv, yv};
        double expected = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            const auto r = static_cast<std::size_t>(i);
            double lp_mean = 0;
            for (std::int64_t j = 0; j < c; ++j) lp_mean += (at(x, i, j) - lse[r]) / static_cast<double>(c);
            expected += (-0.9 * (at(x, i, y[r]) - lse[r]) - 0.1 * lp_mean) / static_cast<double>(n);
        }
        CHECK(loss.reference(views) == doctest::Approx(expected).epsilon(1e-14));
        check_gradient(loss, views, [&](std::int64_t i, std::int64_t j) {
            const double p = std::exp(at(x, i, j) - lse[static_cast<std::size_t>(i)]);
            const double hot = j == y[static_cast<std::size_t>(i)] ? 1.0 : 0.0;
            return (-0.9 * (hot - p) - 0.1 * (1.0 / static_cast<double>(c) - p)) / static_cast<double>(n);
        });
    }
    SUBCASE("with takes of K indices, a sum over the K values left whole") {
        // q [5, 2] beside x[k], k [5, 2]: sum(q - r, -1) adds 2 values, 2 r's (not 7). A mean of K
        // values, split, is still refused at the mean the user wrote.
        Options options;
        options.inputs = {"x", "k", "q"};
        const std::vector<double> q = wave(static_cast<std::size_t>(n * 2), 2.1, 1.0);
        std::vector<std::int64_t> k{0, 6, 3, 3, 1, 5, 2, 0, 4, 6};
        const TensorView views[] = {xv, TensorView::contiguous(k.data(), {n, 2}, DType::int64), view(q, {n, 2})};
        double sum_form = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            double top = -INFINITY, gathered = 0, qs = 0;
            for (std::int64_t j = 0; j < c; ++j) top = std::max(top, at(x, i, j));
            for (std::int64_t m = 0; m < 2; ++m) {
                const auto e = static_cast<std::size_t>(i * 2 + m);
                gathered += q[e] * at(x, i, k[e]);
                qs += q[e];
            }
            sum_form += (gathered + qs - 2.0 * top) / static_cast<double>(n);
        }
        const Loss sum_loss = compile("r = amax(x, -1); mean(sum(q * x[k], -1) + sum(q - r, -1))", options);
        const Loss mean_loss = compile("r = amax(x, -1); mean(sum(q * x[k], -1) + mean(q - r, -1))", options);
        CHECK(sum_loss.reference(views) == doctest::Approx(sum_form).epsilon(1e-14));
        try {
            (void)mean_loss.reference(views);
            FAIL("a mean of K values was computed");
        } catch (const UsageError& e) {
            CHECK(std::string(e.what()).find("expr:1:43: mean, var and std of values of K per row") != std::string::npos);
        }
    }
    SUBCASE("deviations from the row's mean sum to 0; their gradient is 0") {
        const Loss loss = compile("sum(sum(x - mean(x, -1), -1))");
        const TensorView views[] = {xv};
        CHECK(std::abs(loss.reference(views)) < 1e-13);
        const auto grad = loss.reference_grad(views, std::vector<std::string>{"x"})[0].values;
        for (double d : grad) CHECK(std::abs(d) < 1e-15);
    }
    SUBCASE("a normalized row times t: the value, and d/dx = (t - (x.t) x / |x|^2) / |x|") {
        Options options;
        options.inputs = {"x", "t"};
        const Loss loss = compile("sum(sum(x / sqrt(sum(x * x, -1)) * t, -1))", options);
        const TensorView views[] = {xv, tv};
        double expected = 0;
        std::vector<double> dot(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i) {
            for (std::int64_t j = 0; j < c; ++j) dot[static_cast<std::size_t>(i)] += at(x, i, j) * at(t, i, j);
            expected += dot[static_cast<std::size_t>(i)] / norm[static_cast<std::size_t>(i)];
        }
        CHECK(loss.reference(views) == doctest::Approx(expected).epsilon(1e-14));
        check_gradient(loss, views, [&](std::int64_t i, std::int64_t j) {
            const auto r = static_cast<std::size_t>(i);
            return (at(t, i, j) - dot[r] * at(x, i, j) / (norm[r] * norm[r])) / norm[r];
        });
    }
}

}  // TEST_SUITE
