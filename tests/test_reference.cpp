// reference: the CPU evaluator on small hand-made tensors with known answers.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <set>

#include "lang/builtins.hpp"

#include "tools/host.hpp"
#include "lossjit/lossjit.hpp"

using namespace lossjit;

namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

HostTensor tensor(Shape shape, std::vector<float> values) { return HostTensor::from_floats(std::move(shape), std::move(values)); }

double reduce(const std::string& text, const std::vector<HostTensor>& inputs, std::vector<Param> params = {}) {
    Options options;
    options.params = std::move(params);
    auto loss = compile(text, options);
    std::vector<TensorView> views;
    for (const auto& t : inputs) views.push_back(t.view());
    return loss.reference(views);
}

std::vector<float> map(const std::string& text, const std::vector<HostTensor>& inputs) {
    auto loss = compile(text);
    std::vector<TensorView> views;
    for (const auto& t : inputs) views.push_back(t.view());
    const Shape shape = loss.output_shape(views);
    std::vector<float> out(static_cast<std::size_t>(element_count(shape)), -12345.0f);
    loss.reference_map(views, OutputView::contiguous(out.data(), shape));
    return out;
}

}  // namespace

TEST_SUITE("reference") {

TEST_CASE("the reference losses on tiny inputs") {
    const auto p = tensor({2, 3}, {0.1f, 0.5f, 2.0f, -1.0f, 0.0f, 0.25f});
    const auto t3 = tensor({3}, {1.0f, -1.0f, 1.0f});
    // hinge: t[j] applies to column j. Row 0: max(0,1-0.1)=0.9, max(0,1+0.5)=1.5, max(0,1-2)=0;
    // row 1: max(0,1+1)=2, 1, 0.75.
    CHECK(reduce("mean(max(0, 1 - p*t))", {p, t3}) == doctest::Approx((0.9 + 1.5 + 0 + 2 + 1 + 0.75) / 6).epsilon(1e-7));

    const auto t = tensor({2, 3}, {0.0f, 1.0f, 1.0f, 1.0f, 0.5f, 0.25f});
    CHECK(reduce("mean((p - t)^2)", {p, t}) ==
          doctest::Approx((0.01 + 0.25 + 1 + 4 + 0.25 + 0) / 6).epsilon(1e-7));

    // smooth L1 with beta 1: |d| = .1 .5 1 2 .5 0.
    const double sl1 = (0.5 * 0.01 + 0.5 * 0.25 + 0.5 + 1.5 + 0.5 * 0.25 + 0) / 6;
    const std::string smooth_l1 = "param beta = 1; d = abs(p - t); mean(d < beta ? 0.5 * d^2 / beta : d - 0.5 * beta)";
    CHECK(reduce(smooth_l1, {p, t}) == doctest::Approx(sl1).epsilon(1e-7));
    const double sl1_half = (0.01 + 0.25 + 0.75 + 1.75 + 0.25 + 0) / 6;  // beta 0.5
    CHECK(reduce(smooth_l1, {p, t}, {{"beta", 0.5}}) == doctest::Approx(sl1_half).epsilon(1e-7));

    // KL batchmean: t*log(t) is 0 where t == 0; divided by dim 0 (2 rows), not by 4 elements.
    const auto kp = tensor({2, 2}, {0.25f, 0.75f, 0.5f, 0.5f});
    const auto kt = tensor({2, 2}, {0.0f, 1.0f, 0.5f, 0.5f});
    const double kl = (std::log(1 / 0.75) + 0.0) / 2;
    // Inputs come in order of first appearance: t, then p.
    CHECK(reduce("batchmean(xlogy(t, t) - t * log(p))", {kt, kp}) == doctest::Approx(kl).epsilon(1e-7));

    const auto x = tensor({5}, {-4.0f, -3.0f, 0.0f, 1.5f, 4.0f});
    const auto hs = map("clamp(x + 3, 0, 6) / 6", {x});
    CHECK(hs == std::vector<float>{0.0f, 0.0f, 0.5f, 0.75f, 1.0f});
}

TEST_CASE("reductions of empty tensors: mean is nan, sum is 0") {
    const auto empty = tensor({0, 4}, {});
    CHECK(std::isnan(reduce("mean(x)", {empty})));
    CHECK(reduce("sum(x)", {empty}) == 0.0);
    CHECK(map("x + 1", {empty}).empty());
}

TEST_CASE("nan propagates through min, max, clamp and relu, as in torch") {
    const auto x = tensor({4}, {kNan, 1.0f, -1.0f, kInf});
    const auto out = map("max(x, 0) + min(x, 0) + clamp(x, -1, 1) + relu(x)", {x});
    CHECK(std::isnan(out[0]));
    CHECK(out[1] == 1.0f + 0.0f + 1.0f + 1.0f);
    CHECK(out[2] == 0.0f - 1.0f - 1.0f + 0.0f);
    CHECK(std::isinf(out[3]));
    const auto e = map("xlogy(x, 1) + sign(x) + (x % 3)", {tensor({3}, {0.0f, kNan, -7.0f})});
    CHECK(e[0] == 0.0f);  // xlogy(0, 0) = 0, sign(0) = 0, 0 % 3 = 0
    CHECK(std::isnan(e[1]));
    CHECK(e[2] == -1.0f + 2.0f);  // xlogy(-7, 1) = -0, sign(-7) = -1, -7 % 3 = 2
    CHECK(std::isinf(map("xlogy(x, 0)", {tensor({1}, {-7.0f})})[0]));
    CHECK(map("x % 3", {tensor({1}, {-7.0f})})[0] == 2.0f);
    CHECK(map("round(x)", {tensor({4}, {0.5f, 1.5f, 2.5f, -0.5f})}) == std::vector<float>{0.0f, 2.0f, 2.0f, -0.0f});
}

TEST_CASE("broadcasting and strides in the reference") {
    const auto col = tensor({2, 1}, {10.0f, 20.0f});
    const auto row = tensor({3}, {1.0f, 2.0f, 3.0f});
    CHECK(map("a + b", {col, row}) == std::vector<float>{11, 12, 13, 21, 22, 23});

    // A transposed view of [[1,2,3],[4,5,6]] read as shape [3,2] with strides [1,3].
    const std::vector<float> data{1, 2, 3, 4, 5, 6};
    auto loss = compile("x * 1");
    const TensorView transposed{data.data(), DType::float32, {3, 2}, {1, 3}};
    const std::vector<TensorView> views{transposed};
    std::vector<float> out(6);
    loss.reference_map(views, OutputView::contiguous(out.data(), {3, 2}));
    CHECK(out == std::vector<float>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("a large reduction is accurate and independent of threading") {
    const auto x = generate(parse_generator("3000001:range"), 0);
    // sum of 0..n-1 = n(n-1)/2 exactly representable in float64; the inputs are exact in float32 up to 2^24.
    const double n = 3000001;
    const double expected = n * (n - 1) / 2;
    const double got = reduce("sum(x)", {x});
    CHECK(std::fabs(got - expected) / expected < 1e-6);  // inputs above 2^24 are rounded to float32
    CHECK(reduce("sum(x)", {x}) == got);                   // same bits again
}

TEST_CASE("API misuse is a clear UsageError") {
    auto loss = compile("mean(p - t)");
    const auto a = tensor({3}, {1, 2, 3});
    const auto b = tensor({4}, {1, 2, 3, 4});
    const std::vector<TensorView> one{a.view()};
    CHECK_THROWS_WITH_AS(loss.reference(one), doctest::Contains("takes 2 inputs (p, t), but 1 was given"), UsageError);
    const std::vector<TensorView> mismatched{a.view(), b.view()};
    CHECK_THROWS_WITH_AS(loss.reference(mismatched), doctest::Contains("do not broadcast"), UsageError);
    TensorView unknown = a.view();
    unknown.dtype = static_cast<DType>(42);  // a stale ABI, a bad cast
    const std::vector<TensorView> wrong_type{unknown, a.view()};
    CHECK_THROWS_WITH_AS(loss.reference(wrong_type), doctest::Contains("'p' has an unknown dtype (42)"), UsageError);
    TensorView null = a.view();
    null.data = nullptr;
    const std::vector<TensorView> null_data{null, a.view()};
    CHECK_THROWS_WITH_AS(loss.reference(null_data), doctest::Contains("null pointer"), UsageError);
    CHECK_THROWS_WITH_AS(loss.set_param("beta", 1), doctest::Contains("no parameter 'beta'"), UsageError);
    CHECK_THROWS_AS(loss.reference_map(one, OutputView{}), UsageError);
    CHECK_THROWS_WITH_AS(compile("batchmean(x)").reference(std::vector<TensorView>{tensor({}, {1}).view()}),
                         doctest::Contains("batchmean divides by the size of dimension 0"), UsageError);
}

}  // TEST_SUITE

TEST_SUITE("reference") {
TEST_CASE("min, max and clamp order -0 below +0, as torch does on CUDA (found by the GPU parity run)") {
    const auto x = tensor({2}, {0.0f, -0.0f});
    const auto y = tensor({2}, {-0.0f, 0.0f});
    const auto max = map("max(a, b)", {x, y});
    const auto min = map("min(a, b)", {x, y});
    CHECK_FALSE(std::signbit(max[0]));  // torch.maximum(0, -0) = 0
    CHECK_FALSE(std::signbit(max[1]));  // torch.maximum(-0, 0) = 0
    CHECK(std::signbit(min[0]));        // torch.minimum(0, -0) = -0
    CHECK(std::signbit(min[1]));        // torch.minimum(-0, 0) = -0
    CHECK(std::signbit(map("clamp(a, a, b)", {x, y})[0]));  // torch.clamp(0, min=0, max=-0) = -0
}

TEST_CASE("every builtin's float64 meaning, at values torch agrees on") {
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    constexpr double inf = std::numeric_limits<double>::infinity();
    constexpr double pi = std::numbers::pi;
    struct Value {
        Builtin fn;
        std::array<double, 3> args;
        double expected;
    };
    // At least one value per row of the builtins table (checked below): a new row adds its own.
    const Value values[] = {
        {Builtin::Neg, {2}, -2}, {Builtin::Not, {0}, 1}, {Builtin::Not, {nan}, 0}, {Builtin::Add, {1, 2}, 3},
        {Builtin::Sub, {1, 2}, -1}, {Builtin::Mul, {2, 3}, 6}, {Builtin::Div, {1, 0}, inf}, {Builtin::Mod, {-3, 2}, 1},
        {Builtin::Mod, {3, -2}, -1}, {Builtin::Pow, {2, 0.5}, std::numbers::sqrt2}, {Builtin::Lt, {1, 2}, 1},
        {Builtin::Le, {2, 2}, 1}, {Builtin::Gt, {1, 2}, 0}, {Builtin::Ge, {1, 2}, 0}, {Builtin::Eq, {nan, nan}, 0},
        {Builtin::Ne, {nan, nan}, 1}, {Builtin::And, {1, nan}, 1}, {Builtin::Or, {0, 0}, 0},
        {Builtin::Select, {0, 1, 2}, 2}, {Builtin::Abs, {-2}, 2}, {Builtin::Sign, {nan}, 0}, {Builtin::Sign, {-3}, -1},
        {Builtin::Sqrt, {4}, 2}, {Builtin::Rsqrt, {4}, 0.5}, {Builtin::Exp, {1}, std::numbers::e},
        {Builtin::Exp2, {3}, 8}, {Builtin::Expm1, {0}, 0}, {Builtin::Log, {0}, -inf}, {Builtin::Log2, {8}, 3},
        {Builtin::Log10, {1000}, 3}, {Builtin::Log1p, {-1}, -inf}, {Builtin::Sin, {pi / 2}, 1}, {Builtin::Cos, {0}, 1},
        {Builtin::Tan, {pi / 4}, 1}, {Builtin::Tanh, {0}, 0}, {Builtin::Sigmoid, {0}, 0.5},
        {Builtin::Softplus, {30}, 30}, {Builtin::Softplus, {0}, std::numbers::ln2}, {Builtin::Relu, {-1}, 0},
        {Builtin::Relu, {nan}, nan}, {Builtin::Erf, {0}, 0}, {Builtin::Erfc, {0}, 1}, {Builtin::Floor, {-1.5}, -2},
        {Builtin::Ceil, {-1.5}, -1}, {Builtin::Round, {2.5}, 2}, {Builtin::Trunc, {-1.7}, -1},
        {Builtin::Min, {nan, 1}, nan}, {Builtin::Min, {1, 2}, 1}, {Builtin::Max, {1, 2}, 2},
        {Builtin::Clamp, {5, 0, 3}, 3}, {Builtin::IsNan, {nan}, 1}, {Builtin::IsInf, {-inf}, 1},
        {Builtin::Xlogy, {0, 0}, 0}, {Builtin::Xlogy, {0, nan}, nan}, {Builtin::Xlogy, {2, std::numbers::e}, 2},
        {Builtin::Cosh, {1}, 1.5430806348152437}, {Builtin::Sinh, {1}, 1.1752011936438014},
        {Builtin::Asinh, {1}, 0.88137358701954303}, {Builtin::Acosh, {2}, 1.3169578969248166},
        {Builtin::Acosh, {0.5}, nan}, {Builtin::Atanh, {0.5}, 0.54930614433405489}, {Builtin::Atanh, {1}, inf},
        {Builtin::Asin, {1}, pi / 2}, {Builtin::Acos, {-1}, pi}, {Builtin::Atan, {1}, pi / 4},
        {Builtin::Atan2, {1, -1}, 3 * pi / 4}, {Builtin::Atan2, {-0.0, -1}, -pi}, {Builtin::Hypot, {3, 4}, 5},
        {Builtin::Hypot, {1e200, 1e200}, 1.4142135623730951e200}, {Builtin::Lgamma, {0.5}, 0.57236494292470008},
        {Builtin::Lgamma, {-1}, inf}, {Builtin::Lgamma, {-0.5}, 1.2655121234846454},
        {Builtin::Digamma, {1}, -0.57721566490153286}, {Builtin::Digamma, {-0.5}, 0.036489973978576520},
        {Builtin::Digamma, {0}, -inf}, {Builtin::Digamma, {-2}, nan}, {Builtin::Digamma, {100}, 4.6001618527380874},
        {Builtin::Trigamma, {1}, pi * pi / 6}, {Builtin::Trigamma, {-0.5}, 8.9348022005446793},
        {Builtin::Trigamma, {0}, inf},
        {Builtin::FloorDiv, {7, 2}, 3}, {Builtin::FloorDiv, {-7, 2}, -4}, {Builtin::FloorDiv, {1, 0.1}, 9},
        {Builtin::FloorDiv, {inf, 2}, nan}, {Builtin::FloorDiv, {1, 0}, inf}, {Builtin::FloorDiv, {-0.5, 2}, -1},
        {Builtin::Detach, {2.5}, 2.5}, {Builtin::Detach, {nan}, nan},
    };
    std::set<Builtin> covered;
    for (const auto& v : values) {
        const auto& row = builtin_info(v.fn);
        CAPTURE(row.is_operator() ? row.op : row.name);
        CAPTURE(v.args[0]);
        CAPTURE(v.args[1]);
        const double got = apply_builtin(v.fn, v.args[0], v.args[1], v.args[2]);
        if (std::isnan(v.expected) || std::isinf(v.expected)) {
            CHECK((std::isnan(got) ? std::isnan(v.expected) : got == v.expected));
        } else {
            CHECK(got == doctest::Approx(v.expected).epsilon(1e-14));
        }
        covered.insert(v.fn);
    }
    for (const auto& row : builtin_table()) {
        CAPTURE(row.is_operator() ? row.op : row.name);
        CHECK(covered.count(row.id) == 1);
    }
}

// Every reduction along rows, on rows chosen for its edges (ties, nan, inf, one element): the
// values torch gives (torch.var and torch.std with correction 1; torch.argmax, where a nan is the
// largest). A table row without a line here fails the coverage check below.
TEST_CASE("every reduction along rows has a value, on rows chosen for its edges") {
    struct Value {
        std::string name;
        std::vector<double> row;
        double expected;
    };
    const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
    const std::vector<Value> values{
        {"sum", {1, 2, 3.5}, 6.5}, {"sum", {inf, 1}, inf}, {"mean", {1, 2, 3, 6}, 3}, {"mean", {2}, 2},
        {"amax", {1, 5, 5, -2}, 5}, {"amax", {1, nan, 3}, nan}, {"amin", {1, 5, -2, -2}, -2}, {"amin", {-inf, 1}, -inf},
        {"logsumexp", {0, 0}, std::log(2.0)}, {"logsumexp", {inf, 1}, inf}, {"logsumexp", {-inf, -inf}, -inf},
        {"var", {1, 2, 3, 4}, 5.0 / 3}, {"var", {2}, nan}, {"var", {1e8 + 1, 1e8 + 2, 1e8 + 3}, 1},
        {"var", {}, nan}, {"var", {inf, inf}, nan}, {"var", {nan, 1}, nan},
        {"std", {1, 2, 3, 4}, std::sqrt(5.0 / 3)}, {"std", {5, 5, 5}, 0}, {"std", {}, nan}, {"std", {7}, nan},
        {"argmax", {1, 7, 3, 7}, 1}, {"argmax", {1, nan, 9, nan}, 1}, {"argmax", {-inf, -inf}, 0},
        {"argmin", {4, 2, 2, 9}, 1}, {"argmin", {nan, -1}, 0}, {"argmin", {3}, 0},
    };
    std::set<std::string> covered;
    for (const auto& v : values) {
        CAPTURE(v.name);
        CAPTURE(v.row.size());
        const auto loss = compile(v.name + "(x, -1)");
        const TensorView x{v.row.data(), DType::float64, {1, static_cast<std::int64_t>(v.row.size())}, {}};
        double got = 0;
        const OutputView out{&got, DType::float64, {1}, {}};
        loss.reference_map(std::vector<TensorView>{x}, out);
        if (std::isnan(v.expected) || std::isinf(v.expected)) CHECK((std::isnan(got) ? std::isnan(v.expected) : got == v.expected));
        else CHECK(got == doctest::Approx(v.expected).epsilon(1e-14));
        covered.insert(v.name);
    }
    for (const auto& row : row_reduction_table()) {
        CAPTURE(row.name);
        CHECK(covered.count(std::string(row.name)) == 1);
    }

    // A row of equal values: variance exactly 0, as torch's Welford gives, however the mean of the
    // copies rounds (0.1 seven times sums to 0.7000000000000001), and no gradient (torch's 0).
    for (const char* name : {"var", "std"}) {
        CAPTURE(name);
        for (double v : {0.1, 1e8 + 1, -3.3, 1e-300}) {
            const std::vector<double> row(7, v);
            const TensorView x{row.data(), DType::float64, {1, 7}, {}};
            double got = -1;
            const Loss loss = compile(std::string(name) + "(x, -1)");
            loss.reference_map(std::vector<TensorView>{x}, OutputView{&got, DType::float64, {1}, {}});
            CHECK(got == 0.0);
            const double up = 1.0;
            const auto g = loss.reference_grad(std::vector<TensorView>{x}, std::vector<std::string>{"x"},
                                               TensorView{&up, DType::float64, {1}, {}});
            for (double d : g[0].values) CHECK(d == 0.0);
        }
    }
}

TEST_CASE("reference_grad of no inputs is no gradients, for a map that reduces along rows too") {
    // (Before, such a map's upstream was passed as one input too many: "takes 2 inputs, but 3 were given".)
    const std::vector<double> x(12, 0.5), up(3, 1.0);
    const std::vector<std::int64_t> y{0, 3, 1};
    const TensorView xv{x.data(), DType::float64, {3, 4}, {}}, yv{y.data(), DType::int64, {3}, {}};
    const Loss map = compile("logsumexp(x, -1) - x[y]");
    CHECK(map.reference_grad(std::vector<TensorView>{xv, yv}, std::vector<std::string>{},
                             TensorView{up.data(), DType::float64, {3}, {}})
              .empty());
    const Loss reduction = compile("mean(logsumexp(x, -1) - x[y])");
    CHECK(reduction.reference_grad(std::vector<TensorView>{xv, yv}, std::vector<std::string>{}).empty());
}

}  // TEST_SUITE
