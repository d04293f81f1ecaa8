// Several results from one program (`loss, z, acc`): the list parsed and checked (mistakes point at the
// name), the CPU reference against each result computed alone and against values computed here, the
// gradient of the first, the kernels compiled with NVRTC, and the API's refusals. The GPU against the
// reference: the case at the end (gpu suite).
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "jit/compile.hpp"
#include "lossjit/errors.hpp"
#include "lossjit/lossjit.hpp"
#include "gpu_support.hpp"
#include "host_views.hpp"
#include "tools/host.hpp"

using namespace lossjit;
using lossjit_test::view;

namespace {

// Logits [N, C] and targets [N] (int64), on the host.
struct HostBatch {
    HostTensor x, y;
    HostBatch(const char* logits, const char* targets, DType dtype, std::uint64_t seed)
        : x(generate(parse_generator(logits), seed).converted(dtype)),
          y(generate(parse_generator(targets), seed + 1).converted(DType::int64)) {}
};

// The views of `loss`'s inputs, by name, from x and y. A program that takes no x[y] reads y as a value
// per row: [N, 1], what an index of [N] is in a program that does.
std::vector<TensorView> inputs_of(const Loss& loss, const TensorView& x, const TensorView& y, const char* text = "") {
    TensorView per_row = y;
    if (std::string(text).find("[y]") == std::string::npos) per_row.shape = Dims{y.shape[0], 1};
    std::vector<TensorView> out;
    for (const auto& name : loss.inputs()) out.push_back(name == "x" ? x : per_row);
    return out;
}

// Cross-entropy, z-loss and accuracy from one pass (the example), and variants that mix
// results of other kinds of reductions.
const char* const kCrossEntropy =
    "lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc";

struct Listed {
    const char* program;
    std::vector<const char*> alone;  // each result as a program of its own
};
const Listed kListed[] = {
    {kCrossEntropy,
     {"lse = logsumexp(x, -1); mean(lse - x[y])", "lse = logsumexp(x, -1); mean(lse^2)", "mean(argmax(x, -1) == y)"}},
    // The first a combination (what gradients are of), the others its parts.
    {"lse = logsumexp(x, -1); ce = mean(lse - x[y]); z = mean(lse^2); total = ce + 1e-4 * z; total, ce, z",
     {"lse = logsumexp(x, -1); mean(lse - x[y]) + 1e-4 * mean(lse^2)", "lse = logsumexp(x, -1); mean(lse - x[y])",
      "lse = logsumexp(x, -1); mean(lse^2)"}},
    // Factors of the data: each reduction's factor from a kernel of their own.
    {"lse = logsumexp(x, -1); ce = mean(lse - x[y]); z = mean(lse^2); r = ce / z; r, ce, z",
     {"lse = logsumexp(x, -1); mean(lse - x[y]) / mean(lse^2)", "lse = logsumexp(x, -1); mean(lse - x[y])",
      "lse = logsumexp(x, -1); mean(lse^2)"}},
    // Whole-tensor reductions of elements, a statistic read inside another result, a sum and a max.
    {"m = mean(x); v = mean((x - m)^2); s = sum(abs(x)); top = mean(amax(x, -1)); v, m, s, top",
     {"mean((x - mean(x))^2)", "mean(x)", "sum(abs(x))", "mean(amax(x, -1))"}},
};

// The partials of a vocabulary-parallel cross-entropy (docs/python.md): one value per row each.
const char* const kPartials =
    "param C = 10; m = amax(x, -1); s = sum(exp(x - m), -1); t = where(y >= 0 && y < C, x[y], 0); m, s, t";
const char* const kPartialsAlone[] = {"amax(x, -1)", "m = amax(x, -1); sum(exp(x - m), -1)",
                                      "param C = 10; where(y >= 0 && y < C, x[y], 0)"};

}  // namespace

TEST_SUITE("results") {

TEST_CASE("a list of results parses and checks; each mistake points at its name") {
    struct Bad {
        const char* program;
        const char* message;
        int column;
    };
    const Bad table[] = {
        {"a = mean(x); b = sum(x); a, b, c", "'c' is not a binding", 32},
        {"a = mean(x); a, a", "'a' is listed twice among the results", 17},
        {"a = mean(x); b = x * 2; a, b", "result 'b' is one value per element", 28},
        {"a = mean(x); b = sum(x, -1); a, b", "result 'b' is one value per row, but 'a' is one number", 33},
        {"a = sum(x, -1); b = mean(x); a, b", "result 'b' is one number, but 'a' is one value per row", 33},
        {"a = 2; b = mean(x); b, a", "result 'a' is a constant", 24},
        {"a = mean(x); a,", "expected the name of a result after ','", 16},
        {"a = mean(x); a, 2", "expected the name of a result after ','", 17},
        {"a=mean(x);b=a;c=a;d=a;e=a;f=a;g=a;h=a;i=a; a,b,c,d,e,f,g,h,i", "at most 8 results", 60},
    };
    for (const auto& row : table) {
        CAPTURE(row.program);
        try {
            (void)compile(row.program);
            FAIL("accepted");
        } catch (const SourceError& e) {
            CHECK(std::string(e.what()).find(row.message) != std::string::npos);
            CHECK(e.where().column == row.column);
        }
    }
    const auto loss = compile(kCrossEntropy);
    CHECK(loss.results() == std::vector<std::string>{"loss", "z", "acc"});
    CHECK(loss.result_count() == 3);
    // Accuracy has no gradient at all: autograd treats it as a constant.
    CHECK(loss.result_differentiable(0));
    CHECK(loss.result_differentiable(1));
    CHECK(!loss.result_differentiable(2));
    CHECK_THROWS_AS((void)loss.result_differentiable(3), UsageError);
    CHECK(loss.kind() == Kind::Reduction);
    // One result alone is a program of one result, as ever.
    const auto one = compile("lse = logsumexp(x, -1); loss = mean(lse - x[y]); loss");
    CHECK(one.results().empty());
    CHECK(one.result_count() == 1);
}

TEST_CASE("every result equals its program alone; values computed here agree") {
    const HostBatch batch("64x10:normal", "64:integers[0,9]", DType::float32, 5);
    for (const auto& listed : kListed) {
        CAPTURE(listed.program);
        const auto loss = compile(listed.program);
        const auto host = inputs_of(loss, batch.x.view(), batch.y.view());
        const std::vector<double> values = loss.reference_values(host);
        REQUIRE(values.size() == listed.alone.size());
        CHECK(loss.reference(host) == values[0]);
        for (std::size_t k = 0; k < values.size(); ++k) {
            CAPTURE(listed.alone[k]);
            const auto alone = compile(listed.alone[k]);
            CHECK(values[k] ==
                  doctest::Approx(alone.reference(inputs_of(alone, batch.x.view(), batch.y.view(), listed.alone[k]))).epsilon(1e-12));
        }
    }
    // By hand: mean, sum and sum of squares of known numbers.
    const std::vector<double> data{1, 2, 3, 4, 5, 6};
    const TensorView x[] = {view(data, {2, 3})};
    const auto loss = compile("m = mean(x); s = sum(x); q = sum(x^2) / s; s, m, q");
    CHECK(loss.reference_values(x) == std::vector<double>{21.0, 3.5, 91.0 / 21.0});
}

TEST_CASE("the gradient is of the first result, whatever the others reach") {
    const HostBatch batch("32x7:normal", "32:integers[0,6]", DType::float32, 9);
    const std::vector<std::string> wrt{"x"};
    int computed = 0;
    for (const auto& listed : kListed) {
        CAPTURE(listed.program);
        const auto loss = compile(listed.program);
        const auto first = compile(listed.alone[0]);
        const auto host = inputs_of(loss, batch.x.view(), batch.y.view());
        const auto its = inputs_of(first, batch.x.view(), batch.y.view());
        try {
            const auto got = loss.reference_grad(host, wrt, 0.5);
            const auto want = first.reference_grad(its, wrt);
            REQUIRE(got.size() == 1);
            for (std::size_t i = 0; i < want[0].values.size(); ++i)
                CHECK(got[0].values[i] == doctest::Approx(0.5 * want[0].values[i]).epsilon(1e-12));
            ++computed;
        } catch (const UnsupportedError&) {
            // The first result's own limits (a gradient through a statistic) hold for the list too.
            CHECK_THROWS_AS((void)first.reference_grad(its, wrt), UnsupportedError);
        }
    }
    CHECK(computed >= 1);
    // The others' reductions do not count against the first: z reaches x through a second
    // reduction, and the gradient of loss alone is still computed.
    const auto loss = compile(kCrossEntropy);
    CHECK_NOTHROW((void)loss.reference_grad(inputs_of(loss, batch.x.view(), batch.y.view(), "[y]"), wrt));
}

TEST_CASE("the kernels of several results compile with NVRTC, value and gradient") {
    const TensorView x = TensorView::contiguous(nullptr, {64, 100}, DType::float32);
    const TensorView y = TensorView::contiguous(nullptr, {64}, DType::int64);
    const TensorView views[] = {x, y};
    for (const auto& listed : kListed) {
        CAPTURE(listed.program);
        auto loss = compile(listed.program);
        const KernelBuild build = loss.compile_kernel(inputs_of(loss, x, y), "compute_90");
        CHECK(build.image_bytes > 0);
        CHECK(build.source.find(fmt::format("kResults = {}", listed.alone.size())) != std::string::npos);
    }
    // The accuracy's argmax shares the logsumexp's accumulator (one running maximum, one more select).
    const std::string shared = compile(kCrossEntropy).cuda_source(views);
    CHECK(shared.find("lj::LogSumExpArgMaxAcc<Value> a") != std::string::npos);
    CHECK(shared.find("ArgExtremeAcc<Value, true> a") == std::string::npos);
    // Arguments of the same form written twice share it too, per-row values in them included (the
    // same comparison as the one-walk variance's, by_rows_emit.cpp same_value).
    const std::string twice =
        compile("m = logsumexp(x - amax(x, -1), -1); i = argmax(x - amax(x, -1), -1); m, i").cuda_source(std::vector<TensorView>{x});
    CHECK(twice.find("lj::LogSumExpArgMaxAcc<Value> a") != std::string::npos);
    CHECK(twice.find("ArgExtremeAcc<Value, true> a") == std::string::npos);
    CHECK(!compile_cuda(twice, "compute_90").data.empty());
    // The gradient kernel computes every result beside the gradients of the first.
    Options options;
    options.inputs = {"x", "y"};
    auto loss = compile(kCrossEntropy, options);
    const std::vector<std::string> wrt{"x"};
    const std::string source = loss.cuda_source(views, wrt);
    CHECK(source.find("kResults = 3") != std::string::npos);
    CHECK(!compile_cuda(source, "compute_90").data.empty());
    // Factors that are constants (loss alone: 1; ce + 1e-4 * z: 1 and 1e-4) are folded into the
    // derivatives: one kernel.
    CHECK(!loss.factor_source(views, wrt));
    auto total = compile(kListed[1].program);
    CHECK(!total.factor_source(views, wrt));
    CHECK(total.cuda_source(views, wrt).find("seed_1 = (Value)grads.total_scale(1)") != std::string::npos);
    // So are factors of the caller's parameters (distillation's `batchmean(...) * T^2`): no factor
    // kernel launched before the gradient's.
    Options distill_options;
    distill_options.inputs = {"s", "t"};
    auto distill = compile("param T = 2; q = t / T - logsumexp(t / T, -1); p = s / T - logsumexp(s / T, -1); "
                           "batchmean(sum(exp(q) * (q - p), -1)) * T^2",
                           distill_options);
    const std::vector<TensorView> logits{views[0], views[0]};
    const std::vector<std::string> student{"s"};
    CHECK(!distill.factor_source(logits, student));
    CHECK(!compile_cuda(distill.cuda_source(logits, student), "compute_90").data.empty());
    // Factors of the data (ce / z: 1 / z and -ce / z^2): their kernel first, a result per reduction.
    auto ratio = compile("lse = logsumexp(x, -1); ce = mean(lse - x[y]); z = mean(lse^2); r = ce / z; r, ce, z");
    const auto factor = ratio.factor_source(views, wrt);
    REQUIRE(factor);
    CHECK(factor->find("kResults = 2") != std::string::npos);
    const auto built = ratio.compile_factor(views, wrt, "compute_90");
    REQUIRE(built);
    CHECK(built->image_bytes > 0);
    CHECK(!compile_cuda(ratio.cuda_source(views, wrt), "compute_90").data.empty());
    // A binding of a whole-tensor reduction used in a combination (printed as its total, not again).
    auto combined = compile("a = mean(x); a * 2 + sum(x)");
    const TensorView one[] = {views[0]};
    CHECK(combined.compile_kernel(one, "compute_90").image_bytes > 0);
}

TEST_CASE("results of one value per row: an output [R, rows...], each as its program alone") {
    const HostBatch batch("64x10:normal", "64:integers[-3,12]", DType::float32, 3);
    const auto loss = compile(kPartials);
    CHECK(loss.kind() == Kind::Map);
    const auto host = inputs_of(loss, batch.x.view(), batch.y.view(), "[y]");
    CHECK(loss.output_shape(host) == Shape{3, 64});
    std::vector<double> out(3 * 64);
    loss.reference_map(host, OutputView{out.data(), DType::float64, {3, 64}, {}});
    for (std::size_t r = 0; r < 3; ++r) {
        CAPTURE(kPartialsAlone[r]);
        const auto alone = compile(kPartialsAlone[r]);
        std::vector<double> want(64);
        alone.reference_map(inputs_of(alone, batch.x.view(), batch.y.view(), "[y]"), OutputView{want.data(), DType::float64, {64}, {}});
        for (std::size_t i = 0; i < 64; ++i) CHECK(out[r * 64 + i] == want[i]);
    }
    // A strided output: the results interleaved, [3, 64] with strides (1, 3).
    std::vector<double> interleaved(3 * 64);
    loss.reference_map(host, OutputView{interleaved.data(), DType::float64, {3, 64}, {1, 3}});
    for (std::size_t r = 0; r < 3; ++r)
        for (std::size_t i = 0; i < 64; ++i) CHECK(interleaved[i * 3 + r] == out[r * 64 + i]);
    // Results may not share a location (a zero stride from one to the next).
    CHECK_THROWS_WITH_AS(loss.reference_map(host, OutputView{out.data(), DType::float64, {3, 64}, {0, 1}}),
                         doctest::Contains("zero stride"), UsageError);
    // Nor overlap with the rows' own (result r's row i at r + i).
    CHECK_THROWS_WITH_AS(loss.reference_map(host, OutputView{out.data(), DType::float64, {3, 64}, {1, 1}}),
                         doctest::Contains("at one location"), UsageError);
    // The output must hold every result; no gradient yet.
    CHECK_THROWS_WITH_AS(loss.reference_map(host, OutputView{out.data(), DType::float64, {64}, {}}),
                         doctest::Contains("need [3, ...]"), UsageError);
    std::vector<double> upstream(3 * 64, 1.0);
    CHECK_THROWS_WITH_AS((void)loss.reference_grad(host, std::vector<std::string>{"x"},
                                                   TensorView{upstream.data(), DType::float64, {3, 64}, {}}),
                         doctest::Contains("no gradient of a list of results of one value per row"), UnsupportedError);
    // Its kernel compiles with NVRTC, storing each result.
    const TensorView shapes[] = {TensorView::contiguous(nullptr, {64, 100}, DType::float32),
                                 TensorView::contiguous(nullptr, {64}, DType::int64)};
    const KernelBuild build = compile(kPartials).compile_kernel(shapes, "compute_90");
    CHECK(build.image_bytes > 0);
    CHECK(build.source.find("out_base + 2 * out.strides[R - 1]") != std::string::npos);
}

TEST_CASE("a float pointer cannot receive several results") {
    auto loss = compile(kCrossEntropy);
    const TensorView views[] = {TensorView::contiguous(nullptr, {4, 3}, DType::float32),
                                TensorView::contiguous(nullptr, {4}, DType::int64)};
    float value = 0;
    CHECK_THROWS_WITH_AS(loss.evaluate(views, &value), doctest::Contains("has 3 results"), UsageError);
    const std::vector<std::string> wrt{"x"};
    CHECK_THROWS_AS(loss.value_and_grad(views, wrt, {}, &value), UsageError);
}

}  // TEST_SUITE

TEST_SUITE("gpu") {

TEST_CASE("several results: values, and value and gradient, match the reference" * doctest::skip(!lossjit_test::have_typed_gpu())) {
    for (DType dtype : {DType::float32, DType::bfloat16}) {
        // A few rows (one block), many short rows, long rows.
        for (const auto& [logits, targets] : {std::pair{"8x10:normal", "8:integers[0,9]"},
                                              std::pair{"4099x37:normal", "4099:integers[0,36]"},
                                              std::pair{"300x5000:normal", "300:integers[0,4999]"}}) {
            const lossjit_test::Typed x(logits, dtype, 17), y(targets, DType::int64, 18);
            for (const auto& listed : kListed) {
                CAPTURE(listed.program);
                CAPTURE(logits);
                CAPTURE(to_string(dtype));
                auto loss = compile(listed.program);
                const auto host = inputs_of(loss, x.host.view(), y.host.view());
                const auto device = inputs_of(loss, x.view(), y.view());
                const std::vector<double> want = loss.reference_values(host);
                const std::vector<float> got = loss.values(device);
                REQUIRE(got.size() == want.size());
                for (std::size_t k = 0; k < want.size(); ++k)
                    CHECK(got[k] == doctest::Approx(want[k]).epsilon(3e-6).scale(1e-6));
                // Into a float64 vector of the results; a view of the wrong size is refused.
                DeviceBuffer results(sizeof(double) * want.size());
                loss.evaluate(device, OutputView::contiguous(results.data(), Dims{static_cast<std::int64_t>(want.size())},
                                                             DType::float64));
                std::vector<double> got64(want.size());
                results.download(got64.data(), sizeof(double) * got64.size());
                for (std::size_t k = 0; k < want.size(); ++k)
                    CHECK(got64[k] == doctest::Approx(want[k]).epsilon(3e-6).scale(1e-6));
                CHECK_THROWS_AS(loss.evaluate(device, OutputView{results.data(), DType::float64, {}, {}}), UsageError);

                // The gradient of the first result, and every result beside it.
                const std::vector<std::string> wrt{"x"};
                std::vector<ReferenceGradient> want_grad;
                try {
                    want_grad = loss.reference_grad(host, wrt);
                } catch (const UnsupportedError&) {
                    continue;  // the first result's own limit: the GPU refuses it as well
                }
                const std::size_t n = want_grad[0].values.size();
                DeviceBuffer grad(n * sizeof(float));
                const OutputView grads[] = {OutputView{grad.data(), DType::float32, want_grad[0].shape, {}}};
                DeviceBuffer values(sizeof(float) * want.size());
                loss.value_and_grad(device, wrt, grads,
                                    OutputView::contiguous(values.data(), Dims{static_cast<std::int64_t>(want.size())}));
                std::vector<float> got_grad(n), got_values(want.size());
                grad.download(got_grad.data(), n * sizeof(float));
                values.download(got_values.data(), sizeof(float) * want.size());
                for (std::size_t k = 0; k < want.size(); ++k)
                    CHECK(got_values[k] == doctest::Approx(want[k]).epsilon(3e-6).scale(1e-6));
                double largest = 0, worst = 0;
                for (std::size_t i = 0; i < n; ++i) {
                    largest = std::max(largest, std::fabs(want_grad[0].values[i]));
                    worst = std::max(worst, std::fabs(got_grad[i] - want_grad[0].values[i]));
                }
                CHECK(worst <= 2e-6 * std::max(largest, 1e-30));
            }
            // Results of one value per row, into [3, N] and into its transpose's view.
            auto partials = compile(kPartials);
            partials.set_param("C", static_cast<double>(x.host.shape[1]));
            const auto host = inputs_of(partials, x.host.view(), y.host.view(), "[y]");
            const auto device = inputs_of(partials, x.view(), y.view(), "[y]");
            const std::int64_t rows = x.host.shape[0];
            std::vector<double> want(static_cast<std::size_t>(3 * rows));
            partials.reference_map(host, OutputView{want.data(), DType::float64, {3, rows}, {}});
            for (const bool interleaved : {false, true}) {
                CAPTURE(interleaved);
                DeviceBuffer out(want.size() * sizeof(float));
                const Dims strides = interleaved ? Dims{1, 3} : Dims{rows, 1};
                partials.map(device, OutputView{out.data(), DType::float32, {3, rows}, strides});
                std::vector<float> got(want.size());
                out.download(got.data(), got.size() * sizeof(float));
                for (std::int64_t r = 0; r < 3; ++r)
                    for (std::int64_t i = 0; i < rows; ++i) {
                        const double w = want[static_cast<std::size_t>(r * rows + i)];
                        const float g = got[static_cast<std::size_t>(interleaved ? i * 3 + r : r * rows + i)];
                        CHECK(g == doctest::Approx(w).epsilon(3e-6).scale(1e-6));
                    }
            }
        }
    }
}

}  // TEST_SUITE
