// Reductions along any dimension (`sum(x, 0)`, `logsumexp(x, 1)`, `mean(x, (2, 3))`): the row
// layout that moves the reduced dimensions last, the shapes a map gives (torch's keepdim=False),
// what is refused, the CPU reference against values and central differences computed here, and the
// kernels' teams (strided rows side by side) compiled with NVRTC. Random programs against torch are
// tests/differential/ (axes.py); the GPU against the reference is test_gpu_rows.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "jit/compile.hpp"
#include "lossjit/errors.hpp"
#include "lossjit/lossjit.hpp"
#include "pipeline.hpp"
#include "host_views.hpp"

using namespace lossjit;
using lossjit_test::map_of;
using lossjit_test::view;

namespace {

Loss compile_with(const std::string& text, std::vector<std::string> inputs) {
    Options options;
    options.inputs = std::move(inputs);
    return compile(text, options);
}

std::vector<double> iota(std::size_t n, double scale = 1.0) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(0.7 * static_cast<double>(i) + 0.3) * scale;
    return v;
}

}  // namespace

TEST_SUITE("axes") {

TEST_CASE("the row layout walks the kept dimensions, then the reduced ones merged into one") {
    struct Row {
        Shape shape;
        std::vector<int> dims;
        std::vector<std::int64_t> walked;   // Layout::dims
        std::vector<std::int64_t> strides;  // x's, per walked dimension
        std::int64_t rows;
    };
    const Row table[] = {
        {{3, 4}, {}, {3, 4}, {4, 1}, 3},                               // the last, as always
        {{3, 4}, {0}, {4, 3}, {1, 4}, 4},                              // sum(x, 0): rows are columns
        {{2, 3, 4}, {1}, {2, 4, 3}, {12, 1, 4}, 8},                    // the middle one
        {{2, 3, 4}, {-2}, {2, 4, 3}, {12, 1, 4}, 8},                   // the same from the end
        {{2, 3, 4, 5}, {2, 3}, {6, 20}, {20, 1}, 6},                   // instance norm's planes
        {{2, 3, 4, 5}, {1, 2, 3}, {2, 60}, {60, 1}, 2},                // layer norm's samples
        {{2, 3, 4}, {0, 1}, {4, 6}, {1, 4}, 4},                        // two outer ones, merged
        {{5}, {0}, {1, 5}, {0, 1}, 1},                                 // one row
        {{3, 1, 4}, {1}, {12, 1}, {1, 0}, 12},                         // an extent-1 row
    };
    for (const auto& row : table) {
        CAPTURE(row.shape);
        CAPTURE(row.dims);
        const std::vector<OperandShape> ops{{"x", row.shape, {}}};
        const Layout layout = plan_row_layout(ops, {false}, nullptr, false, row.dims);
        CHECK(layout.shape == row.shape);
        CHECK(layout.dims == row.walked);
        CHECK(std::vector<std::int64_t>(layout.inputs[0].strides.begin(), layout.inputs[0].strides.begin() +
                                        static_cast<std::ptrdiff_t>(layout.dims.size())) == row.strides);
        CHECK(layout.rows == row.rows);
    }
}

TEST_CASE("one value per row: inputs of extent 1 along every reduced dimension, and indices") {
    // x [N, C, D] reduced along 1; w [N, 1, D] is one value per row, v [C, 1] is not; y [N, D] an
    // index, as if it were [N, 1, D].
    const std::vector<OperandShape> ops{{"x", {2, 3, 4}, {}}, {"w", {2, 1, 4}, {}}, {"v", {3, 1}, {}}, {"y", {2, 4}, {}}};
    const Layout layout = plan_row_layout(ops, {false, false, false, true}, nullptr, false, std::vector<int>{1});
    CHECK(layout.shape == Shape{2, 3, 4});
    CHECK_FALSE(layout.inputs[0].per_row);
    CHECK(layout.inputs[1].per_row);
    CHECK_FALSE(layout.inputs[2].per_row);
    CHECK(layout.inputs[3].per_row);
    CHECK(layout.inputs[3].strides[0] == 4);  // y walked with the rows: [N, D] -> (n, d)
    CHECK(layout.inputs[3].strides[1] == 1);
    CHECK(layout.inputs[3].strides[2] == 0);
}

TEST_CASE("a map's output: the rows' shape (keepdim=False) or with the reduced dimensions as 1") {
    auto loss = compile("sum(x, (0, 1))");
    const std::vector<double> x = iota(24);
    const std::vector<TensorView> in{view(x, {2, 3, 4})};
    CHECK(loss.output_shape(in) == Shape{4});
    CHECK(compile("logsumexp(x, 1)").output_shape(in) == Shape{2, 4});
    CHECK(compile("x - logsumexp(x, 1)").output_shape(in) == Shape{2, 3, 4});
    // Both output shapes are accepted, and hold the same values.
    std::vector<double> dropped(4), kept(4);
    loss.reference_map(in, OutputView{dropped.data(), DType::float64, {4}, {}});
    loss.reference_map(in, OutputView{kept.data(), DType::float64, {1, 1, 4}, {}});
    CHECK(dropped == kept);
    for (std::int64_t k = 0; k < 4; ++k) {
        double want = 0;
        for (std::int64_t i = 0; i < 2; ++i)
            for (std::int64_t j = 0; j < 3; ++j) want += x[static_cast<std::size_t>((i * 3 + j) * 4 + k)];
        CHECK(dropped[static_cast<std::size_t>(k)] == doctest::Approx(want).epsilon(1e-14));
    }
    CHECK_THROWS_WITH_AS(loss.reference_map(in, OutputView{dropped.data(), DType::float64, {4, 1}, {}}),
                         doctest::Contains("the output has shape [4, 1], but the program gives one value per row: [4]"),
                         UsageError);
}

TEST_CASE("dumps print the program's dimensions as written") {
    CHECK(compile("mean(logsumexp(x, 1) - x[y])").checked().find("logsumexp(x, 1) - x[y]") != std::string::npos);
    const std::string var = compile("mean(var(x, (-2, -1)))").checked();
    CHECK(var.find("sum((x - detach(mean(x, (-2, -1)))) ^ 2, (-2, -1))") != std::string::npos);
    CHECK(var.find("sum(1, (-2, -1))") != std::string::npos);  // the row's length, parseable
}

TEST_CASE("broadcast inputs' gradients: the CPU reference sums them into their own shapes; the GPU writes per-row ones") {
    // mean over rows of r * sum(x, 1) for x [2, 3, 4], r [2, 1, 4] (one weight per row): d/dr is the
    // row's sum over the 8 rows; d/dx the row's weight.
    const std::vector<double> x = iota(24), r = iota(8, 0.5);
    auto loss = compile_with("mean(r * sum(x, 1))", {"x", "r"});
    const std::vector<TensorView> in{view(x, {2, 3, 4}), view(r, {2, 1, 4})};
    const std::vector<std::string> wrt{"r", "x"};
    const auto grads = loss.reference_grad(in, wrt, 1.0);
    REQUIRE(grads.size() == 2);
    CHECK(grads[0].shape == Shape{2, 1, 4});
    for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t k = 0; k < 4; ++k) {
            double row = 0;
            for (std::int64_t j = 0; j < 3; ++j) row += x[static_cast<std::size_t>((i * 3 + j) * 4 + k)];
            CHECK(grads[0].values[static_cast<std::size_t>(i * 4 + k)] == doctest::Approx(row / 8).epsilon(1e-14));
            for (std::int64_t j = 0; j < 3; ++j)
                CHECK(grads[1].values[static_cast<std::size_t>((i * 3 + j) * 4 + k)] ==
                      doctest::Approx(r[static_cast<std::size_t>(i * 4 + k)] / 8).epsilon(1e-14));
        }
    // Class weights along dimension 1 ([C, 1]: the classes' dimension), summed over every row.
    const std::vector<std::int64_t> y{0, 2, 1, 1, 2, 0, 0, 1};
    const std::vector<double> w{0.5, 2.0, 1.5};
    auto weighted = compile_with("mean(w[y] * (logsumexp(x, 1) - x[y]))", {"x", "y", "w"});
    const std::vector<TensorView> wy{view(x, {2, 3, 4}), TensorView{y.data(), DType::int64, {2, 4}, {}}, view(w, {3, 1})};
    const std::vector<std::string> by_w{"w"};
    const auto gw = weighted.reference_grad(wy, by_w, 1.0);
    for (std::int64_t c = 0; c < 3; ++c) {
        double want = 0;  // the mean of the cross-entropy terms of the rows whose class is c
        for (std::int64_t i = 0; i < 2; ++i)
            for (std::int64_t k = 0; k < 4; ++k) {
                if (y[static_cast<std::size_t>(i * 4 + k)] != c) continue;
                double total = 0;
                for (std::int64_t j = 0; j < 3; ++j) total += std::exp(x[static_cast<std::size_t>((i * 3 + j) * 4 + k)]);
                want += std::log(total) - x[static_cast<std::size_t>((i * 3 + c) * 4 + k)];
            }
        CHECK(gw[0].values[static_cast<std::size_t>(c)] == doctest::Approx(want / 8).epsilon(1e-13));
    }
    // On the GPU: r holds one value for each row, so its gradient is written once per row (and
    // compiles); the class weights' are each row's one value, added into the classes by the scatter
    // kernels; a [C] bias inside the logsumexp would be summed across rows, which the GPU refuses,
    // saying where to go.
    std::vector<TensorView> unplaced{TensorView::contiguous(nullptr, {2, 3, 4}), TensorView::contiguous(nullptr, {2, 1, 4})};
    const std::string per_row = loss.cuda_source(unplaced, wrt);
    CHECK(per_row.find("gradients per row [1 0]") != std::string::npos);
    CHECK(!compile_cuda(per_row, "compute_90").data.empty());
    std::vector<TensorView> classes{TensorView::contiguous(nullptr, {2, 3, 4}),
                                    TensorView::contiguous(nullptr, {2, 4}, DType::int64),
                                    TensorView::contiguous(nullptr, {3, 1})};
    const std::string scattered = weighted.cuda_source(classes, by_w);
    CHECK(scattered.find("gradients per row [2]") != std::string::npos);
    CHECK(!compile_cuda(scattered, "compute_90").data.empty());
    auto biased = compile_with("mean(logsumexp(x + b, 1) - x[y])", {"x", "y", "b"});
    CHECK_THROWS_WITH_AS(biased.cuda_source(classes, std::vector<std::string>{"b"}),
                         doctest::Contains("the gradient of 'b' sums over a broadcast; for programs that reduce along rows, "
                                           "the GPU computes gradients of inputs of the full shape, of one value for "
                                           "each row ([N, 1] against [N, C]), of K values for each row"),
                         UnsupportedError);
}

TEST_CASE("rows of two strides: reductions over dimensions apart, and inputs broadcast along part of the row") {
    // (0, 2) of a contiguous [2, 3, 4]: for each c, x[n, c, k] over n and k, two runs of 4, 12 apart.
    const std::vector<double> x = iota(24);
    const std::vector<TensorView> in{view(x, {2, 3, 4})};
    const std::vector<OperandShape> ops{{"x", {2, 3, 4}, {}}};
    const Layout layout = plan_row_layout(ops, {false}, nullptr, false, std::vector<int>{0, 2});
    CHECK(layout.dims == std::vector<std::int64_t>{3, 8});
    CHECK(layout.row_inner == 4);
    CHECK(layout.inputs[0].strides[1] == 1);
    CHECK(layout.inputs[0].row_outer_stride == 12);
    CHECK(column_offset(layout, layout.inputs[0], 5) == 12 + 1);
    auto at = [&](std::int64_t n, std::int64_t c, std::int64_t k) { return x[static_cast<std::size_t>((n * 3 + c) * 4 + k)]; };
    std::vector<double> sums(3, 0.0), maxima(3, -INFINITY);
    for (std::int64_t c = 0; c < 3; ++c)
        for (std::int64_t n = 0; n < 2; ++n)
            for (std::int64_t k = 0; k < 4; ++k) {
                sums[static_cast<std::size_t>(c)] += at(n, c, k);
                maxima[static_cast<std::size_t>(c)] = std::max(maxima[static_cast<std::size_t>(c)], at(n, c, k));
            }
    const auto got = map_of(compile("sum(x, (0, 2))"), in);
    const auto got_max = map_of(compile("amax(x, (0, 2))"), in);
    for (std::size_t c = 0; c < 3; ++c) {
        CHECK(got[c] == doctest::Approx(sums[c]).epsilon(1e-14));
        CHECK(got_max[c] == maxima[c]);
    }
    // Batch norm's statistics over (0, 2): each element minus its channel's mean, written in place.
    const auto centered = map_of(compile("x - mean(x, (0, 2))"), in);
    for (std::int64_t n = 0; n < 2; ++n)
        for (std::int64_t c = 0; c < 3; ++c)
            for (std::int64_t k = 0; k < 4; ++k)
                CHECK(centered[static_cast<std::size_t>((n * 3 + c) * 4 + k)] ==
                      doctest::Approx(at(n, c, k) - sums[static_cast<std::size_t>(c)] / 8).epsilon(1e-14));
    // Transposed memory: (0, 1) of strides [1, 4, 12] is two runs too, walked in the dimensions' order.
    const TensorView transposed{x.data(), DType::float64, {4, 3, 2}, {1, 4, 12}};
    const auto t = map_of(compile("sum(x, (0, 1))"), std::vector<TensorView>{transposed});
    for (std::int64_t k = 0; k < 2; ++k) {
        double want = 0;
        for (std::int64_t i = 0; i < 4; ++i)
            for (std::int64_t j = 0; j < 3; ++j) want += x[static_cast<std::size_t>(i + 4 * j + 12 * k)];
        CHECK(t[static_cast<std::size_t>(k)] == doctest::Approx(want).epsilon(1e-14));
    }
    // g [W] beside (2, 3) of [N, C, H, W]: x is one run, g runs along W and repeats along H.
    const std::vector<double> big = iota(120), g = iota(5);
    const double weighted = compile_with("sum(mean(x * g, (2, 3)))", {"x", "g"})
                                .reference(std::vector<TensorView>{view(big, {2, 3, 4, 5}), view(g, {5})});
    double want = 0;
    for (std::size_t i = 0; i < 120; ++i) want += big[i] * g[i % 5] / 20;
    CHECK(weighted == doctest::Approx(want).epsilon(1e-13));
    // Gradients land where each element lives: d sum((x - mean(x, (0, 2)))^2) / dx = 2 (x - mean).
    auto variance = compile("sum((x - mean(x, (0, 2)))^2)");
    const auto grads = variance.reference_grad(in, std::vector<std::string>{"x"});
    for (std::size_t i = 0; i < 24; ++i) CHECK(grads[0].values[i] == doctest::Approx(2 * centered[i]).epsilon(1e-12));
}

TEST_CASE("what is refused, and why") {
    const std::vector<double> x = iota(24), w = iota(4);
    const std::vector<TensorView> in{view(x, {2, 3, 4})};
    CHECK_THROWS_WITH_AS(compile("sum(x, 3)").output_shape(in),
                         doctest::Contains("reduces along dimension 3, but its inputs have 3 dimensions (the largest: [2, 3, 4])"), UsageError);
    CHECK_THROWS_WITH_AS(compile("x - sum(x, (0, -3))").output_shape(in),
                         doctest::Contains("name dimension 0 twice"), UsageError);
    // A row walks at most two runs of memory (Layout::row_inner): dimensions 0, 2 and 4 of a
    // contiguous tensor are three.
    const std::vector<double> five = iota(2 * 3 * 2 * 3 * 2);
    CHECK_THROWS_WITH_AS(compile("sum(x, (0, 2, 4))").output_shape(std::vector<TensorView>{view(five, {2, 3, 2, 3, 2})}),
                         doctest::Contains("but 'x' [2, 3, 2, 3, 2] does not lie in memory as one or two runs along them"),
                         UnsupportedError);
    // So is an input broadcast along the middle of such a row (g [3, 1] beside (0, 2, 3) of [2, 3, 3, 2]).
    const std::vector<double> four = iota(36), g = iota(3);
    CHECK_THROWS_WITH_AS(compile_with("x - mean(x * g, (0, 2, 3))", {"x", "g"})
                             .output_shape(std::vector<TensorView>{view(four, {2, 3, 3, 2}), view(g, {3, 1})}),
                         doctest::Contains("but 'g' [3, 1] does not lie in memory as one or two runs"), UnsupportedError);
    const TensorView transposed{x.data(), DType::float64, {4, 3, 2}, {1, 4, 12}};
    CHECK(compile("sum(x, 2)").output_shape(std::vector<TensorView>{transposed}) == Shape{4, 3});
    // Counted from the front, for an argument of lower rank than the inputs' (a scalar too): torch
    // would count its own dimensions.
    auto front = compile_with("x - sum(w, 0)", {"x", "w"});
    CHECK_THROWS_WITH_AS(front.output_shape(std::vector<TensorView>{view(x, {2, 3, 4}), view(w, {4})}),
                         doctest::Contains("expr:1:5: 'sum' reduces along dimension (0) counted from the front"), UsageError);
    CHECK_THROWS_WITH_AS(front.output_shape(std::vector<TensorView>{view(x, {6, 4}), view(w, {})}),
                         doctest::Contains("its argument has 0 dimensions"), UsageError);
    // From the end it means the same in both.
    auto back = compile_with("x - sum(w, -1)", {"x", "w"});
    CHECK(back.output_shape(std::vector<TensorView>{view(x, {6, 4}), view(w, {4})}) == Shape{6, 4});
    // An input of exactly the rows' shape is read from the last dimension, so not as one value per
    // row where the row is elsewhere: refused (accuracy along dimension 1 needs y [N, 1, D]).
    const std::vector<double> y = iota(8);
    auto accuracy = compile_with("mean(argmax(x, 1) == y)", {"x", "y"});
    CHECK_THROWS_WITH_AS(accuracy.reference(std::vector<TensorView>{in[0], view(y, {2, 4})}),
                         doctest::Contains("'y' [2, 4] has the rows' shape; inputs broadcast from the last dimension, "
                                           "so it would be read as [1, 2, 4], which is not one value per row: give it "
                                           "the shape meant, [2, 1, 4] for one value per row"), UsageError);
    CHECK_NOTHROW(accuracy.reference(std::vector<TensorView>{in[0], view(y, {2, 1, 4})}));
    // Where the reduced dimensions lead, the rows' shape read from the end is where the rows are.
    const std::vector<double> w5 = iota(4), x54 = iota(20);
    auto leading = compile_with("mean(w * logsumexp(x, 0))", {"x", "w"});
    CHECK_NOTHROW(leading.reference(std::vector<TensorView>{view(x54, {5, 4}), view(w5, {4})}));
    // x[y] of a value constant along the row (class weights w [C] aligned with D, not with C).
    const std::vector<std::int64_t> index(8, 1);
    const std::vector<double> w4 = iota(4);
    auto weighted = compile_with("mean(w[y] * (logsumexp(x, 1) - x[y]))", {"x", "y", "w"});
    CHECK_THROWS_WITH_AS(weighted.reference(std::vector<TensorView>{in[0], TensorView{index.data(), DType::int64, {2, 4}, {}}, view(w4, {4})}),
                         doctest::Contains("expr:1:7: x[y] takes along dimension 1, but 'w' has extent 1 there"), UsageError);
    // An index of the values' rank with extent 1 along the row is torch's gather index; one of the
    // values' shape is refused (as rows of its own it would pair every row with every other).
    auto ce = compile_with("mean(logsumexp(x, 1) - x[y])", {"x", "y"});
    const std::vector<std::int64_t> wide(24, 0);
    CHECK_THROWS_WITH_AS(ce.reference(std::vector<TensorView>{in[0], TensorView{wide.data(), DType::int64, {2, 3, 4}, {}}}),
                         doctest::Contains("the index 'y' [2, 3, 4] has the values' shape"), UsageError);
    // The values' broadcast shape, whatever input comes first (s [1, 4] before x [4, 4]).
    const std::vector<double> s14 = iota(4), x44 = iota(16);
    const std::vector<std::int64_t> y44(16, 0);
    auto scaled = compile_with("mean(logsumexp(s * x, -1) - x[y])", {"s", "x", "y"});
    CHECK_THROWS_WITH_AS(scaled.reference(std::vector<TensorView>{view(s14, {1, 4}), view(x44, {4, 4}),
                                                                  TensorView{y44.data(), DType::int64, {4, 4}, {}}}),
                         doctest::Contains("the index 'y' [4, 4] has the values' shape"), UsageError);
    CHECK(ce.reference(std::vector<TensorView>{in[0], TensorView{index.data(), DType::int64, {2, 1, 4}, {}}}) ==
          ce.reference(std::vector<TensorView>{in[0], TensorView{index.data(), DType::int64, {2, 4}, {}}}));
}

TEST_CASE("the reference: softmax along dimension 0, K-dimensional cross-entropy, norms") {
    const std::vector<double> x = iota(24, 2.0);
    const std::vector<TensorView> in{view(x, {2, 3, 4})};
    auto at = [&](std::int64_t i, std::int64_t j, std::int64_t k) { return x[static_cast<std::size_t>((i * 3 + j) * 4 + k)]; };
    // Softmax over dimension 1 (the classes of a [N, C, D] tensor).
    const auto softmax = map_of(compile("exp(x - logsumexp(x, 1))"), in);
    for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t k = 0; k < 4; ++k) {
            double total = 0;
            for (std::int64_t j = 0; j < 3; ++j) total += std::exp(at(i, j, k));
            for (std::int64_t j = 0; j < 3; ++j)
                CHECK(softmax[static_cast<std::size_t>((i * 3 + j) * 4 + k)] == doctest::Approx(std::exp(at(i, j, k)) / total).epsilon(1e-14));
        }
    // torch's cross_entropy of x [N, C, D] and y [N, D]: the class along dimension 1.
    const std::vector<std::int64_t> y{0, 2, 1, 1, 2, 0, 0, 1};
    auto ce = compile_with("mean(logsumexp(x, 1) - x[y])", {"x", "y"});
    double want = 0;
    for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t k = 0; k < 4; ++k) {
            double total = 0;
            for (std::int64_t j = 0; j < 3; ++j) total += std::exp(at(i, j, k));
            want += std::log(total) - at(i, y[static_cast<std::size_t>(i * 4 + k)], k);
        }
    const std::vector<TensorView> with_y{in[0], TensorView{y.data(), DType::int64, {2, 4}, {}}};
    CHECK(ce.reference(with_y) == doctest::Approx(want / 8).epsilon(1e-14));
    // RMS norm over dimension 1, per element.
    const auto rms = map_of(compile("x / sqrt(mean(x^2, 1) + 1e-5)"), in);
    for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t k = 0; k < 4; ++k) {
            double squares = 0;
            for (std::int64_t j = 0; j < 3; ++j) squares += at(i, j, k) * at(i, j, k);
            for (std::int64_t j = 0; j < 3; ++j)
                CHECK(rms[static_cast<std::size_t>((i * 3 + j) * 4 + k)] ==
                      doctest::Approx(at(i, j, k) / std::sqrt(squares / 3 + 1e-5)).epsilon(1e-13));
        }
}

TEST_CASE("gradients along other dimensions match central differences") {
    struct Case {
        const char* program;
        Shape shape;
    };
    const Case cases[] = {
        {"mean(logsumexp(x, 0))", {5, 3}},
        {"sum(sin(x) * (x - logsumexp(x, 1)))", {2, 3, 4}},
        {"m = mean(x, (2, 3)); sum(cos((x - m) / sqrt(mean((x - m)^2, (2, 3)) + 1e-5)))", {2, 2, 3, 2}},
        {"sum(x / sqrt(sum(x^2, (0, 1))) * cos(x))", {3, 2, 2}},
        {"sum(var(x, 0) * amax(x, 0))", {4, 3}},
    };
    for (const auto& c : cases) {
        CAPTURE(c.program);
        auto loss = compile(c.program);
        std::vector<double> x = iota(static_cast<std::size_t>(element_count(c.shape)), 1.5);
        const std::vector<std::string> wrt{"x"};
        const auto grads = loss.reference_grad(std::vector<TensorView>{view(x, c.shape)}, wrt, 1.0);
        REQUIRE(grads.size() == 1);
        for (std::size_t i = 0; i < x.size(); ++i) {
            const double h = 1e-6, saved = x[i];
            x[i] = saved + h;
            const double up = loss.reference(std::vector<TensorView>{view(x, c.shape)});
            x[i] = saved - h;
            const double down = loss.reference(std::vector<TensorView>{view(x, c.shape)});
            x[i] = saved;
            CHECK(grads[0].values[i] == doctest::Approx((up - down) / (2 * h)).epsilon(1e-6));
        }
    }
}

TEST_CASE("strided rows side by side where they lie so; the kernels compile with NVRTC") {
    struct Case {
        const char* program;
        Shape shape;
        bool side_by_side;
    };
    const Case cases[] = {
        {"sum(x, 0)", {64, 100000}, true},              // 100000 columns side by side
        {"sum(x, 0)", {100000, 64}, false},             // 64 rows: too few; a block per strided row
        {"sum(x, -1)", {64, 100000}, false},            // contiguous rows, as always
        {"x / sqrt(mean(x^2, 1) + 1e-5)", {8, 64, 4096}, true},  // RMS norm over the features
        {"mean(logsumexp(x, 1) - x[y])", {32, 100, 1024}, true}, // K-dimensional cross-entropy
        {"argmax(x, 1)", {1, 4096, 2000}, false},       // 2000 rows: below the threshold (32 a SM)
        {"argmax(x, 1)", {4, 4096, 4095}, true},
        {"mean(x, 1)", {3, 8, 100000}, true},           // 300000 rows: a thread per row
    };
    for (const auto& c : cases) {
        CAPTURE(c.program);
        CAPTURE(c.shape);
        const bool indexed = std::string(c.program).find("[y]") != std::string::npos;
        auto loss = compile_with(c.program, indexed ? std::vector<std::string>{"x", "y"} : std::vector<std::string>{"x"});
        std::vector<TensorView> views{TensorView::contiguous(nullptr, c.shape, DType::float32)};
        if (indexed) views.push_back(TensorView::contiguous(nullptr, {c.shape[0], c.shape[2]}, DType::int64));
        const KernelBuild build = loss.compile_kernel(views, "compute_90");
        CHECK(build.image_bytes > 0);
        CHECK((build.source.find("using Team = lj::SideTeam<") != std::string::npos) == c.side_by_side);
        if (loss.kind() == Kind::Reduction) {  // the fused value-and-gradient kernel too
            const std::vector<std::string> wrt{"x"};
            CHECK(!compile_cuda(loss.cuda_source(views, wrt), "compute_90").data.empty());
        }
    }
}

TEST_CASE("rows of two strides: the kernels walk their segments, in vectors where every segment allows") {
    struct Case {
        const char* program;
        std::vector<std::string> inputs;
        std::vector<Shape> shapes;
        bool vector;  // four elements an access
        bool run_constant = false;  // an input the same along each run (loaded once a vector)
    };
    const Case cases[] = {
        // Batch norm's statistics, (0, 2, 3) of [N, C, H, W]: segments of H * W.
        {"m = mean(x, (0, 2, 3)); (x - m) / sqrt(mean((x - m)^2, (0, 2, 3)) + 1e-5)", {"x"}, {{8, 64, 32, 32}}, true},
        {"sum(x, (0, 2))", {"x"}, {{16, 100, 1000}}, true},
        {"sum(x, (0, 2))", {"x"}, {{16, 100, 999}}, false},  // segments not a multiple of 4
        {"mean(x * g, (2, 3))", {"x", "g"}, {{8, 16, 64, 64}, {64}}, true},  // g: each segment (a W) again
        // Group norm: the per-channel weight [8, 8, 1, 1] is the same along each plane (a run).
        {"m = mean(x, (2, 3, 4)); (x - m) / sqrt(mean((x - m)^2, (2, 3, 4)) + 1e-5) * w + b", {"x", "w", "b"},
         {{4, 8, 8, 16, 16}, {8, 8, 1, 1}, {8, 8, 1, 1}}, true, true},
        {"mean((x - mean(x, (0, 2)))^2)", {"x"}, {{16, 100, 1000}}, true},    // and its gradient
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.program));
        auto loss = compile_with(c.program, c.inputs);
        std::vector<TensorView> views;
        for (const auto& shape : c.shapes) views.push_back(TensorView::contiguous(nullptr, shape, DType::float32));
        const KernelBuild build = loss.compile_kernel(views, "compute_90");
        CHECK(build.image_bytes > 0);
        CHECK(build.source.find("rows of two strides") != std::string::npos);
        CHECK(build.source.find("lj::column_offset<R>(j, runs, in.strides[0])") != std::string::npos);
        CHECK((build.source.find("lj::load_run_constant<VW>") != std::string::npos) == c.run_constant);
        CHECK((build.source.find(", vector 4,") != std::string::npos) == c.vector);
        if (loss.kind() == Kind::Reduction) {
            const std::string grad = loss.cuda_source(views, std::vector<std::string>{"x"});
            CHECK(grad.find("rows of two strides") != std::string::npos);
            CHECK(!compile_cuda(grad, "compute_90").data.empty());
        }
    }
}

TEST_CASE("side by side with several threads per row, the accumulators' shared memory stays within a block's") {
    // Six kinds of accumulator (sum, amax, amin, logsumexp, argmax, argmin) along dimension 0: at 1024
    // threads (the knob) or 512 (the default) their shared arrays would pass the 48 KB ptxas allows.
    const char* text = "logsumexp(x, 0) + amax(x, 0) + amin(x, 0) + argmax(x, 0) + argmin(x, 0) + var(x, 0)";
    for (int block : {0, 1024}) {
        CAPTURE(block);
        Options options;
        options.knobs.block_threads = block;
        options.use_tuning = false;
        auto loss = compile(text, options);
        const std::vector<TensorView> views{TensorView::contiguous(nullptr, {64, 5000}, DType::float32)};
        const KernelBuild build = loss.compile_kernel(views, "sm_90");  // CUBIN: ptxas checks shared memory
        CHECK(build.image_bytes > 0);
        CHECK(build.source.find("using Team = lj::SideTeam<256, 8>") != std::string::npos);
    }
}

}  // TEST_SUITE
