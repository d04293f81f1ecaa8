// Takes of K indices per row (`x[k]` with k [N, K], torch.gather's index: top-k distillation): the
// layout that tells the K gathered values from the row's by their extent, what is refused and where,
// the CPU reference against values computed here, and its gradients against central differences
// (repeated indices, an index out of range, strided views, the row along dimension 1). Against torch:
// python/tests/test_cpu.py. The kernels compile with NVRTC here; the GPU against the reference is
// test_gpu_rows.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
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

ir::Program checked(const std::string& text, std::vector<std::string> inputs) {
    CheckOptions options;
    options.inputs = std::move(inputs);
    return check(parse(text, "expr"), options);
}

Loss compile_with(const std::string& text, std::vector<std::string> inputs) {
    Options options;
    options.inputs = std::move(inputs);
    return compile(text, options);
}

TensorView index_view(const std::vector<std::int64_t>& v, Shape shape, std::vector<std::int64_t> strides = {}) {
    return TensorView{v.data(), DType::int64, shape, strides};
}

std::vector<double> wave(std::size_t n, double scale, double phase = 0.3) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(0.7 * static_cast<double>(i) + phase) * scale;
    return v;
}

// d loss / d values[i] by central differences, `inputs()` viewing `values` as they are.
template <class Inputs>
double central_difference(const Loss& loss, const Inputs& inputs, std::vector<double>& values, std::size_t i) {
    const double h = 1e-6, saved = values[i];
    values[i] = saved + h;
    const double up = loss.reference(inputs());
    values[i] = saved - h;
    const double down = loss.reference(inputs());
    values[i] = saved;
    return (up - down) / (2 * h);
}

constexpr std::int64_t kN = 4, kC = 9, kK = 3;
// Row 0 gathers column 2 twice; every row has K = 3 indices among C = 9 columns.
const std::vector<std::int64_t> kIndices{2, 2, 7, 0, 8, 4, 5, 1, 3, 6, 6, 6};

}  // namespace

TEST_SUITE("k_takes") {

TEST_CASE("an index of extent K along the row gathers K values; inputs of extent K hold K per row") {
    const auto program = checked("sum(q * x[k], -1) + w", {"x", "k", "q", "w"});
    const std::vector<OperandShape> shapes{{"x", {kN, kC}, {}}, {"k", {kN, kK}, {}}, {"q", {kN, kK}, {}}, {"w", {kN, 1}, {}}};
    const Layout layout = plan_program_layout(program, shapes, nullptr);
    CHECK(layout.k_columns == kK);
    CHECK(layout.dims.back() == kC);
    CHECK(layout.rows == kN);
    CHECK_FALSE(layout.inputs[0].per_k);
    CHECK((layout.inputs[1].per_k && layout.inputs[1].k_stride == 1 && !layout.inputs[1].per_row));
    CHECK((layout.inputs[2].per_k && layout.inputs[2].k_stride == 1 && !layout.inputs[2].per_row));
    CHECK((layout.inputs[3].per_row && !layout.inputs[3].per_k));
    CHECK(k_inputs(layout) == std::vector<bool>{false, true, true, false});
    CHECK(per_row_inputs(program, layout) == std::vector<bool>{false, false, false, true});

    // q's K shared by every row ([K], broadcast along the rows), and a transposed q ([K, N] viewed as [N, K]).
    const std::vector<OperandShape> shared{{"x", {kN, kC}, {}}, {"k", {kN, kK}, {}}, {"q", {kK}, {}}, {"w", {1}, {}}};
    const Layout broadcast = plan_program_layout(program, shared, nullptr);
    CHECK((broadcast.inputs[2].per_k && broadcast.inputs[2].k_stride == 1 && broadcast.inputs[2].strides[0] == 0));
    const std::vector<OperandShape> transposed{{"x", {kN, kC}, {}}, {"k", {kN, kK}, {}}, {"q", {kN, kK}, {1, kN}}, {"w", {1}, {}}};
    CHECK(plan_program_layout(program, transposed, nullptr).inputs[2].k_stride == kN);

    // One index per row (the rows' shape, or extent 1 along the row): no K.
    for (const Shape& y : {Shape{kN}, Shape{kN, 1}}) {
        const auto ce = checked("mean(logsumexp(x, -1) - x[y])", {"x", "y"});
        const std::vector<OperandShape> one{{"x", {kN, kC}, {}}, {"y", y, {}}};
        CHECK(plan_program_layout(ce, one, nullptr).k_columns == 0);
    }
}

TEST_CASE("what is refused, at the construct that does it") {
    struct Case {
        const char* program;
        const char* message;
    };
    const Case cases[] = {
        {"sum(q * x[k] + x, -1)", "expr:1:14: '+' combines values of K per row (x[k]"},
        {"mean(mean(q * x[k], -1))", "expr:1:6: mean, var and std of values of K per row (x[k]"},
        {"mean(var(x[k], -1))", "expr:1:6: mean, var and std of values of K per row (x[k]"},
        {"mean(logsumexp(x, -1) - q[k])", "expr:1:26: x[y] takes from values of K per row (x[k]"},
        {"q * x[k]", "expr:1:3: a map of values of K per row (x[k] with k of extent K = 3 along the row, or an input "
                     "of that extent) (an output [.., K]) is not supported"},
    };
    const std::vector<double> x = wave(kN * kC, 1.0), q = wave(kN * kK, 0.5);
    for (const auto& c : cases) {
        CAPTURE(c.program);
        auto loss = compile(c.program);
        std::vector<TensorView> in;
        for (const auto& name : loss.inputs()) {
            if (name == "x") in.push_back(view(x, {kN, kC}));
            if (name == "q") in.push_back(view(q, {kN, kK}));
            if (name == "k") in.push_back(index_view(kIndices, {kN, kK}));
        }
        if (loss.kind() == Kind::Map) CHECK_THROWS_WITH_AS(loss.output_shape(in), doctest::Contains(c.message), UsageError);
        else CHECK_THROWS_WITH_AS(loss.reference_values(in), doctest::Contains(c.message), UsageError);
    }
    // K as long as the row: which inputs hold K values could not be told.
    auto ce = compile("mean(logsumexp(x, -1) - x[k])");
    const std::vector<std::int64_t> square(kC * kC, 0), two(kN * 2, 0);
    const std::vector<double> xc = wave(kC * kC, 1.0);
    CHECK_THROWS_WITH_AS(ce.reference(std::vector<TensorView>{view(xc, {kC, kC}), index_view(square, {kC, kC})}),
                         doctest::Contains("the index 'k' [9, 9] has the values' shape"), UsageError);
    // Two counts in one program.
    auto two_counts = compile_with("sum(sum(x[k], -1) + sum(x[j], -1))", {"x", "k", "j"});
    CHECK_THROWS_WITH_AS(two_counts.reference(std::vector<TensorView>{view(x, {kN, kC}), index_view(kIndices, {kN, kK}),
                                                                      index_view(two, {kN, 2})}),
                         doctest::Contains("the indices gather 3 and 2 values per row ('j' [4, 2])"), UsageError);
}

TEST_CASE("the reference: top-k distillation against a loop written here; repeats count, an index out of range is nan") {
    const std::vector<double> x = wave(kN * kC, 2.0), q = wave(kN * kK, 0.4, 1.1);
    std::vector<double> qp(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) qp[i] = 0.5 + q[i];  // positive: log(q)
    auto loss = compile_with("lse = logsumexp(x, -1); mean(sum(q * (log(q) - (x[k] - lse)), -1))", {"x", "k", "q"});
    const std::vector<TensorView> in{view(x, {kN, kC}), index_view(kIndices, {kN, kK}), view(qp, {kN, kK})};
    double expected = 0.0;
    for (std::int64_t r = 0; r < kN; ++r) {
        double s = 0.0;
        for (std::int64_t c = 0; c < kC; ++c) s += std::exp(x[static_cast<std::size_t>(r * kC + c)]);
        const double lse = std::log(s);
        for (std::int64_t j = 0; j < kK; ++j) {
            const double qj = qp[static_cast<std::size_t>(r * kK + j)];
            const double xj = x[static_cast<std::size_t>(r * kC + kIndices[static_cast<std::size_t>(r * kK + j)])];
            expected += qj * (std::log(qj) - (xj - lse));
        }
    }
    CHECK(loss.reference(in) == doctest::Approx(expected / kN).epsilon(1e-14));
    // A whole-tensor reduction of the K values reduces the [N, K] they are: mean divides by N K.
    auto flat = compile_with("lse = logsumexp(x, -1); mean(q * (log(q) - (x[k] - lse)))", {"x", "k", "q"});
    CHECK(flat.reference(in) == doctest::Approx(expected / (kN * kK)).epsilon(1e-14));
    // ... also as a statistic used per row (mean(q) beside each row's sum): q's own mean.
    double mean_q = 0.0;
    for (double v : qp) mean_q += v / static_cast<double>(qp.size());
    auto statistic = compile_with("sum(x[k], -1) * mean(q)", {"x", "k", "q"});
    const auto scaled = map_of(statistic, in);
    double row0 = 0.0;
    for (std::int64_t j = 0; j < kK; ++j) row0 += x[static_cast<std::size_t>(kIndices[static_cast<std::size_t>(j)])];
    CHECK(scaled[0] == doctest::Approx(row0 * mean_q).epsilon(1e-14));

    // Per row (reduction='none'), with x [N, C] strided (every other column of [N, 2C]) and k transposed.
    std::vector<double> wide(static_cast<std::size_t>(kN * 2 * kC), std::numeric_limits<double>::quiet_NaN());
    for (std::int64_t r = 0; r < kN; ++r)
        for (std::int64_t c = 0; c < kC; ++c) wide[static_cast<std::size_t>(r * 2 * kC + 2 * c)] = x[static_cast<std::size_t>(r * kC + c)];
    std::vector<std::int64_t> kt(kIndices.size());
    for (std::int64_t r = 0; r < kN; ++r)
        for (std::int64_t j = 0; j < kK; ++j) kt[static_cast<std::size_t>(j * kN + r)] = kIndices[static_cast<std::size_t>(r * kK + j)];
    auto gathered = compile_with("sum(x[k], -1)", {"x", "k"});
    const auto per_row = map_of(gathered, std::vector<TensorView>{TensorView{wide.data(), DType::float64, {kN, kC}, {2 * kC, 2}},
                                                                   index_view(kt, {kN, kK}, {1, kN})});
    REQUIRE(per_row.size() == static_cast<std::size_t>(kN));
    for (std::int64_t r = 0; r < kN; ++r) {
        double s = 0.0;
        for (std::int64_t j = 0; j < kK; ++j) s += x[static_cast<std::size_t>(r * kC + kIndices[static_cast<std::size_t>(r * kK + j)])];
        CHECK(per_row[static_cast<std::size_t>(r)] == doctest::Approx(s).epsilon(1e-15));
    }

    // An index outside [0, C) gives nan, as the one-index take does; its row's gradient is not touched.
    std::vector<std::int64_t> outside = kIndices;
    outside[4] = kC;  // row 1
    const auto values = map_of(gathered, std::vector<TensorView>{view(x, {kN, kC}), index_view(outside, {kN, kK})});
    CHECK(std::isnan(values[1]));
    CHECK_FALSE(std::isnan(values[0]));
}

TEST_CASE("gradients against central differences: x through the take, q, K copies of a value per row") {
    const char* programs[] = {
        "lse = logsumexp(x, -1); mean(sum(q * (log(q) - (x[k] - lse)), -1))",
        "sum(sum(x[k] + logsumexp(x, -1), -1))",  // logsumexp reaches the K values: K times its gradient
        "mean(amax(q * x[k], -1) + sum(x, -1))",
        "sum(sum(where(q > 0.9, x[k] * logsumexp(x, -1), 0), -1))",
        "mean(logsumexp(x[k] / q, -1))",
        "s = x[k] - logsumexp(x, -1); sum(sum(exp(s) * q + s, -1) * amax(x, -1))",
        "l = sum(q * x[k], -1); sum(l) / sum(sum(q, -1) + 1)",  // through two reductions (a factor program)
        "mean(q * x[k])",  // over the [N, K] values: divided by N K
        "mean(sum(q * (x - logsumexp(x, -1))[k], -1))",  // log_softmax taken: lse through the take
        "sum(sum((sin(x) * amax(x, -1))[k] * q, -1))",  // amax through the take
        // A binding inside the take, and one of K values read twice (differentiate's copy of the
        // program looks through bindings while it is made: they must point into the copy already).
        "r = logsumexp(x, -1); e = (x - r)[k]; mean(sum(q * e + exp(e), -1) * r)",
        "batchmean(q * (log(q) - x[k])) - mean(logsumexp(x, -1))",
    };
    std::vector<double> x = wave(kN * kC, 1.5), q = wave(kN * kK, 0.4, 1.1);
    for (auto& v : q) v += 0.8;  // in (0.4, 1.2): log(q) defined, the where's both sides used
    for (const char* text : programs) {
        CAPTURE(text);
        auto loss = compile_with(text, {"x", "k", "q"});
        const bool reads_q = loss.inputs().size() == 3;
        auto inputs = [&] {
            std::vector<TensorView> in{view(x, {kN, kC}), index_view(kIndices, {kN, kK})};
            if (reads_q) in.push_back(view(q, {kN, kK}));
            return in;
        };
        std::vector<std::string> wrt{"x"};
        if (reads_q) wrt.push_back("q");
        const auto grads = loss.reference_grad(inputs(), wrt, 1.0);
        REQUIRE(grads.size() == wrt.size());
        for (std::size_t g = 0; g < wrt.size(); ++g) {
            std::vector<double>& values = g == 0 ? x : q;
            for (std::size_t i = 0; i < values.size(); ++i) {
                CAPTURE(wrt[g]);
                CAPTURE(i);
                CHECK(grads[g].values[i] == doctest::Approx(central_difference(loss, inputs, values, i)).epsilon(1e-6).scale(1.0));
            }
        }
    }
}

TEST_CASE("a map's vector-Jacobian product; an index out of range adds nothing") {
    const std::vector<double> x = wave(kN * kC, 1.0), q = wave(kN * kK, 0.7), up = wave(kN, 1.3, 2.0);
    std::vector<std::int64_t> outside = kIndices;
    outside[5] = -1;  // row 1's third
    auto loss = compile_with("sum(q * x[k], -1)", {"x", "k", "q"});
    const std::vector<TensorView> in{view(x, {kN, kC}), index_view(outside, {kN, kK}), view(q, {kN, kK})};
    const std::vector<std::string> wrt{"x", "q"};
    const auto grads = loss.reference_grad(in, wrt, view(up, {kN}));
    REQUIRE(grads.size() == 2);
    std::vector<double> dx(static_cast<std::size_t>(kN * kC), 0.0);
    for (std::int64_t r = 0; r < kN; ++r)
        for (std::int64_t j = 0; j < kK; ++j) {
            const std::int64_t c = outside[static_cast<std::size_t>(r * kK + j)];
            if (c >= 0) dx[static_cast<std::size_t>(r * kC + c)] += up[static_cast<std::size_t>(r)] * q[static_cast<std::size_t>(r * kK + j)];
            const double xj = c >= 0 ? x[static_cast<std::size_t>(r * kC + c)] : std::numeric_limits<double>::quiet_NaN();
            const double dq = grads[1].values[static_cast<std::size_t>(r * kK + j)];
            if (c >= 0) CHECK(dq == doctest::Approx(up[static_cast<std::size_t>(r)] * xj).epsilon(1e-15));
            else CHECK(std::isnan(dq));  // torch's too: d q_j = up * x[k_j], and x[k_j] is nan
        }
    for (std::size_t i = 0; i < dx.size(); ++i) CHECK(grads[0].values[i] == doctest::Approx(dx[i]).epsilon(1e-15));
}

TEST_CASE("along dimension 1 of [N, C, D]: k [N, K, D]") {
    constexpr std::int64_t N = 2, C = 5, D = 3, K = 2;
    std::vector<double> x = wave(N * C * D, 1.2);
    std::vector<std::int64_t> k(N * K * D);
    for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<std::int64_t>((i * 3 + 1) % C);
    auto loss = compile_with("sum(logsumexp(x, 1) * 2 - sum(x[k], 1))", {"x", "k"});
    auto inputs = [&] { return std::vector<TensorView>{view(x, {N, C, D}), index_view(k, {N, K, D})}; };
    double expected = 0.0;
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t d = 0; d < D; ++d) {
            double s = 0.0;
            for (std::int64_t c = 0; c < C; ++c) s += std::exp(x[static_cast<std::size_t>((n * C + c) * D + d)]);
            expected += 2 * std::log(s);
            for (std::int64_t j = 0; j < K; ++j)
                expected -= x[static_cast<std::size_t>((n * C + k[static_cast<std::size_t>((n * K + j) * D + d)]) * D + d)];
        }
    CHECK(loss.reference(inputs()) == doctest::Approx(expected).epsilon(1e-14));
    const std::vector<std::string> wrt{"x"};
    const auto grads = loss.reference_grad(inputs(), wrt, 1.0);
    for (std::size_t i = 0; i < x.size(); ++i)
        CHECK(grads[0].values[i] == doctest::Approx(central_difference(loss, inputs, x, i)).epsilon(1e-6));
}

TEST_CASE("the kernels compile with NVRTC: a walk over the K, the scatter written again; what they cannot do is refused") {
    struct Case {
        const char* program;
        Shape x;
        std::int64_t k;
        std::vector<std::string> wrt;
        const char* team;  // what the kernel's team is
    };
    const char* distill = "lse = logsumexp(x, -1); mean(sum(q * (log(q) - (x[k] - lse)), -1))";
    const Case cases[] = {
        {distill, {64, 512}, 8, {"x", "q"}, "lj::Team<512, 32>"},        // a warp per row
        {distill, {4096, 32768}, 64, {"x"}, "lj::Team<256, 256>"},        // a block per row
        {distill, {4, 1 << 20}, 16, {"x", "q"}, ""},                     // few long rows
        {"sum(sum(x[k] + logsumexp(x, -1), -1))", {8, 1000}, 5, {"x"}, ""},
        {"mean(q * x[k]) + mean(amax(x, -1))", {8, 1000}, 5, {"x", "q"}, ""},
        {"sum(q * x[k], -1)", {8, 1000}, 5, {}, ""},  // a map of one value per row
        // A binding of K values per row, read twice (defined once in each walk over the K).
        {"s = x[k] - logsumexp(x, -1); mean(sum(exp(s) * q + s, -1) * amax(s, -1))", {8, 100}, 5, {"x", "q"}, ""},
        // A take of an expression of a per-row value: differentiated at the K gathered columns.
        {"mean(sum(q * (x - logsumexp(x, -1))[k], -1))", {300, 2000}, 16, {"x", "q"}, ""},
        {"sum(sum(where((x > 0)[k], q, 1) * (x * logsumexp(x, -1))[k], -1))", {8, 1000}, 5, {"x", "q"}, ""},
    };
    for (const auto& c : cases) {
        CAPTURE(c.program);
        CAPTURE(c.x);
        auto loss = compile_with(c.program, {"x", "k", "q"});
        const bool reads_q = loss.inputs().size() == 3;
        std::vector<TensorView> views{TensorView::contiguous(nullptr, c.x, DType::float32),
                                      TensorView::contiguous(nullptr, {c.x[0], c.k}, DType::int64)};
        if (reads_q) views.push_back(TensorView::contiguous(nullptr, {c.x[0], c.k}, DType::float32));
        const KernelBuild build = loss.compile_kernel(views, "compute_90");
        CHECK(build.image_bytes > 0);
        CHECK(build.source.find("for (long long jk = (long long)Team::lane(); jk < K; jk += Team::kTeam)") != std::string::npos);
        if (*c.team) CHECK(build.source.find(std::string("using Team = ") + c.team) != std::string::npos);
        if (c.wrt.empty()) continue;
        std::vector<std::string> wrt;
        for (const auto& name : c.wrt)
            if (name != "q" || reads_q) wrt.push_back(name);
        const std::string source = loss.cuda_source(views, wrt);
        CHECK(source.find("Team::barrier();") != std::string::npos);  // x's scatter, written again
        CHECK(!compile_cuda(source, "compute_90").data.empty());
    }

    // What the kernels do not do, refused with the reason.
    struct Refused {
        const char* program;
        std::vector<std::string> inputs;
        std::vector<Shape> shapes;
        std::vector<std::string> wrt;
        const char* message;
    };
    const Refused refused[] = {
        {"sum(sum(x[k] * x[j], -1))", {"x", "k", "j"}, {{8, 100}, {8, 4}, {8, 4}}, {"x"}, "the gradient scatters by two indices"},
        {"sum(sum(q * x[k], 1))", {"x", "k", "q"}, {{8, 100, 3}, {8, 4, 3}, {8, 4, 3}}, {"q"},
         "the gradient of 'q', K values per row beside x[k]: the GPU writes it where"},
    };
    for (const auto& r : refused) {
        CAPTURE(r.program);
        auto loss = compile_with(r.program, r.inputs);
        std::vector<TensorView> views;
        for (std::size_t i = 0; i < r.shapes.size(); ++i)
            views.push_back(TensorView::contiguous(nullptr, r.shapes[i], r.inputs[i] == "k" || r.inputs[i] == "j" ? DType::int64
                                                                                                              : DType::float32));
        CHECK_THROWS_WITH_AS(loss.cuda_source(views, r.wrt), doctest::Contains(r.message), UnsupportedError);
    }
}

}  // TEST_SUITE
