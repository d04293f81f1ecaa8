// differentiate: every operator and function against central finite differences in float64, the
// non-smooth conventions at their kinks (PyTorch's autograd), the reference losses' gradients
// (broadcast inputs included), simplification and common-subexpression elimination, and dumps.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <limits>
#include <random>
#include <set>

#include <fmt/format.h>

#include "jit/compile.hpp"
#include "tools/host.hpp"
#include "lossjit/lossjit.hpp"
#include "builtin_calls.hpp"
#include "paths.hpp"
#include "codegen/kernel_spec.hpp"
#include "pipeline.hpp"
#include "ir/simplify.hpp"

#include <fstream>
#include <sstream>

using namespace lossjit;

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

ir::Program checked(const std::string& text, std::vector<std::string> inputs = {"x", "y", "z"}) {
    CheckOptions options;
    options.inputs = std::move(inputs);
    return check(parse(text, "expr"), options);
}

std::vector<int> all_slots(const ir::Program& p) {
    std::vector<int> slots;
    for (std::size_t k = 0; k < p.inputs.size(); ++k) slots.push_back(static_cast<int>(k));
    return slots;
}

// Every node's float64 value at one element, front to back, as the reference computes it.
std::vector<double> evaluate(const ir::Program& p, const std::vector<double>& inputs) {
    std::vector<double> v(p.nodes.size());
    for (std::size_t id = 0; id < p.nodes.size(); ++id) {
        const ir::Node& n = p.nodes[id];
        switch (n.kind) {
            case ir::NodeKind::Constant: v[id] = n.value; break;
            case ir::NodeKind::Input: v[id] = inputs[static_cast<std::size_t>(n.slot)]; break;
            case ir::NodeKind::Param: v[id] = p.params[static_cast<std::size_t>(n.slot)].default_value; break;
            case ir::NodeKind::Binding: v[id] = v[static_cast<std::size_t>(p.bindings[static_cast<std::size_t>(n.slot)].node)]; break;
            case ir::NodeKind::Seed: v[id] = 1.0; break;  // an upstream gradient of 1 for this one element
            case ir::NodeKind::Apply: {
                auto arg = [&](int i) { return i < n.arity ? v[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])] : 0.0; };
                v[id] = apply_builtin(n.fn, arg(0), arg(1), arg(2));
                break;
            }
        }
    }
    return v;
}

double body_at(const ir::Program& p, const std::vector<double>& inputs) {
    return evaluate(p, inputs)[static_cast<std::size_t>(p.body)];
}

double central_difference(const std::function<double(double)>& f, double at) {
    const double h = 1e-5 * std::max(1.0, std::fabs(at));
    return (f(at + h) - f(at - h)) / (2 * h);
}

// The central difference of a loss's forward reference in element i of an input's data, `values`,
// which the views `views()` returns read.
double reference_difference(const Loss& loss, const std::function<std::vector<TensorView>()>& views,
                            std::vector<double>& values, std::size_t i) {
    return central_difference(
        [&](double v) {
            const double saved = values[i];
            values[i] = v;
            const double out = loss.reference(views());
            values[i] = saved;
            return out;
        },
        values[i]);
}

// Away from every kink the table's expressions have: multiples of 0.5, ties between variables,
// integer quotients (%), softplus's threshold.
bool away_from_kinks(const std::vector<double>& v) {
    constexpr double gap = 1e-3;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (std::fabs(v[i] * 2 - std::nearbyint(v[i] * 2)) < 2 * gap || std::fabs(v[i] - 20) < gap) return false;
        for (std::size_t j = 0; j < v.size(); ++j) {
            if (i == j) continue;
            if (std::fabs(v[i] - v[j]) < gap || std::fabs(v[i] + v[j]) < gap) return false;
            const double q = v[i] / v[j];
            if (std::fabs(q - std::nearbyint(q)) < gap) return false;
        }
    }
    return true;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The whole loss in float64 at double inputs, broadcasting by hand: what finite differences move.
// A map counts as sum(upstream * map).
double loss_at(const ir::Program& p, const std::vector<Shape>& shapes, const std::vector<std::vector<double>>& values,
               const std::vector<double>& upstream) {
    std::vector<OperandShape> operands;
    for (const auto& s : shapes) operands.push_back({"x", s, {}});
    const Shape shape = broadcast_shapes(operands);
    const std::int64_t count = element_count(shape);
    double total = 0;
    for (std::int64_t i = 0; i < count; ++i) {
        std::vector<double> at;
        for (std::size_t k = 0; k < shapes.size(); ++k) {
            std::int64_t rest = i, offset = 0, stride = 1;
            for (std::size_t d = shape.size(); d-- > 0;) {
                const std::int64_t coord = rest % shape[d];
                rest /= shape[d];
                const std::size_t lead = shape.size() - shapes[k].size();
                if (d < lead) continue;
                const std::int64_t extent = shapes[k][d - lead];
                if (extent != 1) offset += coord * stride;
                stride *= extent;
            }
            at.push_back(values[k][static_cast<std::size_t>(offset)]);
        }
        const double v = body_at(p, at);
        total += p.is_map() ? v * upstream[static_cast<std::size_t>(i)] : v;
    }
    if (p.reduction == ir::Reduction::Mean) total /= static_cast<double>(count);
    if (p.reduction == ir::Reduction::BatchMean) total /= static_cast<double>(shape[0]);
    return total;
}

}  // namespace

TEST_SUITE("differentiate") {

TEST_CASE("every operator and function matches central differences away from its kinks") {
    struct Row {
        std::string text;
        double lo, hi;    // x
        double ylo, yhi;  // y and z
    };
    std::vector<Row> table;
    for (const auto& row : builtin_table()) {  // every row of the language table
        if (row.gradient == Gradient::Refused) continue;  // "a gradient through it is refused"
        if (row.gradient == Gradient::Stopped) continue;  // detach: 0 by definition, not by slope
        const auto d = builtin_domain(row);
        table.push_back({builtin_call(row, {"x", "y", "z"}), d.lo, d.hi, d.ylo, d.yhi});
    }
    for (Row row : std::initializer_list<Row>{
        // Beyond one call per row: the other sign of a divisor, pow's constant exponents (printed
        // and differentiated specially), variadic min / max, constant bounds, and compositions.
        {"x / y", -3, 3, -3, -0.5}, {"x % y", -5, 5, -2, -0.5}, {"pow(x, y)", 0.2, 3, -2, 2}, {"y ^ x", -2, 2, 0.2, 3},
        {"x ^ 2", -3, 3, 0, 1}, {"x ^ 3", -3, 3, 0, 1}, {"x ^ 0.5", 0.1, 4, 0, 1}, {"x ^ -0.5", 0.1, 4, 0, 1},
        {"x ^ -1", 0.3, 4, 0, 1}, {"x ^ -2", -4, -0.3, 0, 1}, {"x ^ 2.5", 0.1, 3, 0, 1}, {"x ^ 0", -3, 3, 0, 1},
        {"2 ^ x", -3, 3, 0, 1}, {"x > y ? x * z : y * z", -3, 3, -3, 3},
        {"where(x > y, sin(x), cos(y) * z)", -3, 3, -3, 3}, {"min(x, y, z)", -3, 3, -3, 3},
        {"max(z, x, y)", -3, 3, -3, 3}, {"clamp(x, -1, 1)", -3, 3, 0, 1}, {"xlogy(x, x)", 0.1, 3, 0, 1},
        {"d = x - y; d * d + sin(d) * z", -3, 3, -3, 3}, {"param k = 2.5; k * x ^ k + k", 0.1, 3, 0, 1},
        {"sigmoid(x) * log1p(y ^ 2) / (1 + z ^ 2)", -3, 3, -3, 3}, {"softplus(x * y) - relu(y - z)", -3, 3, -3, 3},
        {"exp(-x) * erf(y) + x * tanh(x) - rsqrt(z * z + 1)", -3, 3, -3, 3},
        {"a = x * y; b = a + z; a * b - b / (1 + a * a)", -2, 2, -2, 2},
    })
        table.push_back(row);
    std::mt19937_64 random(4);
    for (const auto& row : table) {
        const std::string text = row.text;
        CAPTURE(text);
        const auto program = checked(text);
        const auto grad = differentiate(program, all_slots(program), {});
        REQUIRE(grad.derivatives.size() == 3);
        CHECK(same(body_at(grad, {0.7, -0.3, 1.9}), body_at(program, {0.7, -0.3, 1.9})));  // the value is untouched
        int tested = 0;
        for (int attempt = 0; attempt < 200 && tested < 12; ++attempt) {
            std::uniform_real_distribution<double> ux(row.lo, row.hi), uy(row.ylo, row.yhi);
            const std::vector<double> at{ux(random), uy(random), uy(random)};
            if (!away_from_kinks(at)) continue;
            ++tested;
            const auto values = evaluate(grad, at);
            for (int k = 0; k < 3; ++k) {
                CAPTURE(k);
                CAPTURE(at[0]);
                CAPTURE(at[1]);
                CAPTURE(at[2]);
                const double symbolic = values[static_cast<std::size_t>(grad.derivatives[static_cast<std::size_t>(k)].node)];
                const double numeric = central_difference(
                    [&](double v) {
                        auto moved = at;
                        moved[static_cast<std::size_t>(k)] = v;
                        return body_at(program, moved);
                    },
                    at[static_cast<std::size_t>(k)]);
                const double f = std::fabs(body_at(program, at));
                CHECK(std::fabs(symbolic - numeric) <= 1e-6 * (1 + std::fabs(symbolic) + f));
            }
        }
        CHECK(tested >= 10);
    }
}

TEST_CASE("non-smooth points follow PyTorch's autograd") {
    struct Row {
        const char* text;
        double x, y, z;
        double dx, dy, dz;
        const char* why;
    };
    const double ln2 = std::log(2.0);
    const double sp20 = std::exp(20.0) / (std::exp(20.0) + 1);
    const Row table[] = {
        {"abs(x)", 0, 0, 0, 0, 0, 0, "abs'(0) = 0 (grad * sgn(x))"},
        {"relu(x)", 0, 0, 0, 0, 0, 0, "relu'(0) = 0 (threshold_backward: result <= 0)"},
        {"relu(x)", kNan, 0, 0, 1, 0, 0, "a nan result is not <= 0: the gradient passes"},
        {"sqrt(x)", 0, 0, 0, kInf, 0, 0, "grad / (2 * result)"},
        {"rsqrt(x)", 0, 0, 0, -kInf, 0, 0, "-0.5 * grad * result^3"},
        {"log(x)", 0, 0, 0, kInf, 0, 0, "grad / x"},
        {"max(x, y)", 1, 1, 0, 0.5, 0.5, 0, "torch.maximum splits a tie evenly"},
        {"min(x, y)", 1, 1, 0, 0.5, 0.5, 0, "torch.minimum splits a tie evenly"},
        {"max(x, y)", 2, 1, 0, 1, 0, 0, "the larger side takes it all"},
        {"min(x, y)", 2, 1, 0, 0, 1, 0, "the smaller side takes it all"},
        {"max(x, y)", kNan, 1, 0, 1, 1, 0, "neither x < y nor x > y with a nan: both sides get it"},
        {"max(0, x)", 0, 0, 0, 0.5, 0, 0, "a tie with a constant: half (unlike relu and clamp)"},
        {"max(x, y, z)", 1, 1, 1, 0.25, 0.25, 0.5, "several arguments fold pairwise: max(max(x, y), z)"},
        {"clamp(x, y, z)", -1, -1, 1, 1, 0, 0, "x == lo: closed interval, x gets it"},
        {"clamp(x, y, z)", 1, -1, 1, 1, 0, 0, "x == hi: x gets it"},
        {"clamp(x, y, z)", -2, -1, 1, 0, 1, 0, "below lo: lo gets it"},
        {"clamp(x, y, z)", 2, -1, 1, 0, 0, 1, "above hi: hi gets it"},
        {"clamp(x, y, z)", 0, 1, -1, 0, 0, 1, "lo > hi: the result is hi, and so is the gradient"},
        {"clamp(x, y, z)", 1, 1, 1, 1, 0, 0, "lo == hi == x: x"},
        {"clamp(x, y, z)", kNan, -1, 1, 0, 0, 0, "nan x: no comparison holds"},
        {"clamp(x, 0, 6)", 0, 0, 0, 1, 0, 0, "hardsigmoid's kink: 1"},
        {"clamp(x, 0, inf)", 0, 0, 0, 1, 0, 0, "torch.clamp(min=0) at 0: 1 (max(0, x) gives 0.5, relu 0)"},
        {"sign(x) + floor(x) + ceil(x) + round(x) + trunc(x)", 2, 0, 0, 0, 0, 0, "piecewise constant: 0"},
        {"round(x)", 2.5, 0, 0, 0, 0, 0, "at a half: 0"},
        {"(x < y) + (x == y) + (x && y) + !x + isnan(x) + isinf(x)", 1, 1, 0, 0, 0, 0, "comparisons and logic: 0"},
        {"x % y", 3, 2, 0, 1, -1, 0, "torch.remainder: 1 and -floor(x / y)"},
        {"x % y", 4, 2, 0, 1, -2, 0, "at a jump: the same formula"},
        {"x % y", -3, 2, 0, 1, 2, 0, "-floor(-1.5) = 2"},
        {"where(x > 0, x, 2 * x)", 0, 0, 0, 2, 0, 0, "where: the selected branch; the condition gets none"},
        {"x > 0 ? y : z", 1, 5, 7, 0, 1, 0, "?: the same"},
        {"pow(x, y)", 0, 2, 0, 0, 0, 0, "0^y, y >= 0: d/dy masked to 0"},
        {"pow(x, y)", 0, 0, 0, 0, 0, 0, "0^0: d/dx masked (exponent 0), d/dy masked"},
        {"pow(x, y)", 0, -1, 0, -kInf, -kInf, 0, "0^-1: -1 * 0^-2 and inf * log(0)"},
        {"pow(x, y)", -2, 2, 0, -4, kNan, 0, "negative base: log(x) is nan"},
        {"x ^ 0", 0, 0, 0, 0, 0, 0, "constant exponent 0: 0"},
        {"x ^ 0.5", 0, 0, 0, kInf, 0, 0, "like sqrt"},
        {"2 ^ x", 3, 0, 0, 8 * ln2, 0, 0, "constant base"},
        {"xlogy(x, y)", 0, 0, 0, 0, kNan, 0, "x == 0, y <= 0: d/dx masked; d/dy = x / y = nan"},
        {"xlogy(x, y)", 0, 2, 0, ln2, 0, 0, "x == 0, y > 0: d/dx = log(y)"},
        {"xlogy(x, y)", 0, -1, 0, 0, -0.0, 0, "x == 0, y < 0: d/dx masked"},
        {"xlogy(x, y)", 1, kNan, 0, kNan, kNan, 0, "nan y"},
        {"xlogy(x, x)", 0, 0, 0, kNan, 0, 0, "KL's t log t at t = 0: 0 + 0/0"},
        {"softplus(x)", 20, 0, 0, sp20, 0, 0, "threshold 20: at 20 still e^x / (e^x + 1)"},
        {"softplus(x)", 20.5, 0, 0, 1, 0, 0, "above 20: exactly 1"},
        {"x * 0 + y", kInf, 1, 0, 0, 1, 0, "d/dx of x * 0 is 0 * 1; inf elsewhere does not leak"},
        {"x * y", kInf, 0, 0, 0, kInf, 0, "y's gradient is x"},
        {"exp(x) * 0", 1000, 0, 0, kNan, 0, 0, "0 * inf, as torch (exp overflows)"},
        {"sigmoid(x)", 0, 0, 0, 0.25, 0, 0, "(1 - s) * s"},
        {"tanh(x)", 0, 0, 0, 1, 0, 0, "1 - t^2"},
    };
    for (const auto& row : table) {
        const std::string text = row.text, why = row.why;
        CAPTURE(text);
        CAPTURE(why);
        const auto program = checked(row.text);
        const auto grad = differentiate(program, all_slots(program), {});
        const auto values = evaluate(grad, {row.x, row.y, row.z});
        const double expected[3] = {row.dx, row.dy, row.dz};
        for (int k = 0; k < 3; ++k) {
            CAPTURE(k);
            const double got = values[static_cast<std::size_t>(grad.derivatives[static_cast<std::size_t>(k)].node)];
            CAPTURE(got);
            if (std::isnan(expected[k]) || std::isinf(expected[k]) || expected[k] == 0) CHECK(same(got, expected[k]));
            else CHECK(got == doctest::Approx(expected[k]).epsilon(1e-12));
        }
    }
}

TEST_CASE("the reference losses' gradients match finite differences, broadcast inputs included") {
    struct Case {
        std::string program;  // text or an example file
        std::vector<std::pair<std::string, std::string>> inputs;  // name, SHAPE:GENERATOR
        double upstream = 1.0;
    };
    const std::vector<Case> cases = {
        {"hinge.loss", {{"p", "3x4:uniform[-2,2]"}, {"t", "4:sign"}}},
        {"mse.loss", {{"p", "3x4:normal"}, {"t", "3x4:normal"}}},
        {"kl.loss", {{"p", "3x4:softmax"}, {"t", "3x4:softmax"}}},
        {"smooth_l1.loss", {{"p", "3x4:normal"}, {"t", "3x4:normal"}}},
        {"hardsigmoid.loss", {{"x", "2x5:normal[0,3]"}}},
        {"sum(a * b + sin(a) * b^2)", {{"a", "2x1:normal"}, {"b", "3:normal"}}, 2.5},
        {"batchmean(softplus(a - b) * c)", {{"a", "2x3:normal"}, {"b", "3:normal"}, {"c", "scalar:normal"}}},
        {"a * exp(b) - clamp(a, -1, b)", {{"a", "2x1:normal"}, {"b", "3:normal"}}},
    };
    for (const auto& c : cases) {
        CAPTURE(c.program);
        const bool file = c.program.ends_with(".loss");
        Options options;
        std::vector<HostTensor> host;
        std::vector<TensorView> views;
        std::vector<Shape> shapes;
        std::vector<std::vector<double>> values;
        std::vector<std::string> names;
        for (const auto& [name, spec] : c.inputs) {
            options.inputs.push_back(name);
            names.push_back(name);
            host.push_back(generate(parse_generator(spec), seed_for(7, name)));
            shapes.push_back(host.back().shape);
            const auto elements = host.back().floats();
            values.emplace_back(elements.begin(), elements.end());
        }
        for (const auto& h : host) views.push_back(h.view());
        const std::string text = file ? read_file(source_dir() + "/examples/" + c.program) : c.program;
        const auto loss = compile(text, options);
        const ir::Program program = checked(text, options.inputs);

        std::vector<ReferenceGradient> grads;
        std::vector<double> upstream;
        if (loss.kind() == Kind::Map) {
            const HostTensor up = generate(parse_generator(format_shape(loss.output_shape(views)) + ":normal"), 99);
            const auto elements = up.floats();
            upstream.assign(elements.begin(), elements.end());
            grads = loss.reference_grad(views, names, up.view());
        } else {
            grads = loss.reference_grad(views, names, c.upstream);
        }
        REQUIRE(grads.size() == names.size());
        for (std::size_t k = 0; k < names.size(); ++k) {
            CAPTURE(names[k]);
            CHECK(grads[k].input == names[k]);
            CHECK(grads[k].shape == shapes[k]);
            REQUIRE(grads[k].values.size() == values[k].size());
            for (std::size_t i = 0; i < values[k].size(); ++i) {
                CAPTURE(i);
                const double numeric = c.upstream * central_difference(
                    [&](double v) {
                        auto moved = values;
                        moved[k][i] = v;
                        return loss_at(program, shapes, moved, upstream);
                    },
                    values[k][i]);
                CHECK(grads[k].values[i] == doctest::Approx(numeric).epsilon(1e-6).scale(1.0));
            }
        }
    }
}

TEST_CASE("gradients of strided inputs land in the input's own shape, row-major") {
    // p is the transpose of [[1, 2, 3], [4, 5, 6]]: shape [3, 2], strides [1, 3].
    const std::vector<float> data{1, 2, 3, 4, 5, 6};
    const std::vector<float> dense{1, 4, 2, 5, 3, 6};
    const auto loss = compile("sum(p * p * t)");
    const HostTensor t = HostTensor::from_floats({2}, {10, 100});
    const std::vector<TensorView> strided{TensorView{data.data(), DType::float32, {3, 2}, {1, 3}}, t.view()};
    const std::vector<TensorView> contiguous{TensorView::contiguous(dense.data(), {3, 2}), t.view()};
    const std::vector<std::string> wrt{"p", "t"};
    const auto a = loss.reference_grad(strided, wrt);
    const auto b = loss.reference_grad(contiguous, wrt);
    CHECK(a[0].values == std::vector<double>{20, 800, 40, 1000, 60, 1200});  // 2 * p * t
    CHECK(a[0].values == b[0].values);
    CHECK(a[1].values == std::vector<double>{1 + 4 + 9, 16 + 25 + 36});  // summed over the rows
}

TEST_CASE("gradient requests: errors, unread inputs, empty tensors") {
    Options options;
    options.inputs = {"p", "t", "unused"};
    const auto loss = compile("param beta = 2; mean(beta * (p - t)^2)", options);
    const HostTensor p = HostTensor::from_floats({2}, {1, 2}), t = HostTensor::from_floats({2}, {0, 0}),
                     u = HostTensor::from_floats({1}, {1});
    const std::vector<TensorView> views{p.view(), t.view(), u.view()};
    const auto g = loss.reference_grad(views, std::vector<std::string>{"unused", "p"});
    CHECK(g[0].values == std::vector<double>{0});
    CHECK(g[1].values == std::vector<double>{2, 4});  // beta * 2 * (p - t) / 2
    CHECK_THROWS_WITH_AS(loss.reference_grad(views, std::vector<std::string>{"beta"}),
                         doctest::Contains("'beta' is a parameter"), UsageError);
    CHECK_THROWS_WITH_AS(loss.reference_grad(views, std::vector<std::string>{"q"}),
                         doctest::Contains("not an input of the program (p, t, unused)"), UsageError);
    CHECK_THROWS_WITH_AS(loss.reference_grad(views, std::vector<std::string>{"p", "p"}),
                         doctest::Contains("asked for twice"), UsageError);
    CHECK_THROWS_WITH_AS(loss.reference_grad(views, std::vector<std::string>{"p"}, p.view()),
                         doctest::Contains("upstream gradient is a number"), UsageError);

    const auto map = compile("a + b");
    const HostTensor a = HostTensor::from_floats({2, 1}, {1, 2}), b = HostTensor::from_floats({3}, {1, 2, 3});
    const std::vector<TensorView> map_views{a.view(), b.view()};
    const std::vector<std::string> wrt{"a", "b"};
    CHECK_THROWS_WITH_AS(map.reference_grad(map_views, wrt), doctest::Contains("needs an upstream tensor"), UsageError);
    CHECK_THROWS_WITH_AS(map.reference_grad(map_views, wrt, b.view()),
                         doctest::Contains("upstream gradient has shape [3], but the output's shape is [2, 3]"), UsageError);
    // An upstream broadcast by a zero stride is fine: it is only read.
    const float one = 1.0f;
    const auto sums = map.reference_grad(map_views, wrt, TensorView{&one, DType::float32, {2, 3}, {0, 0}});
    CHECK(sums[0].values == std::vector<double>{3, 3});
    CHECK(sums[1].values == std::vector<double>{2, 2, 2});

    // No elements: zeros of each input's own shape, even where the broadcast shape is empty.
    const HostTensor none = HostTensor::from_floats({0, 3}, {}), row = HostTensor::from_floats({3}, {1, 2, 3});
    const std::vector<TensorView> empty{none.view(), row.view()};
    const auto z = compile("sum(a * b)").reference_grad(empty, wrt);
    CHECK(z[0].values.empty());
    CHECK(z[1].values == std::vector<double>{0, 0, 0});
}

TEST_CASE("simplification rewrites only what is exact in IEEE arithmetic") {
    ir::Program p = checked("x + y");
    NodeBuilder b(p);
    const int x = p.body == 2 ? 0 : -1;  // x, y, x + y
    REQUIRE(x == 0);
    const int y = 1;
    auto is = [&](int id, Builtin fn) { return p.node(id).kind == ir::NodeKind::Apply && p.node(id).fn == fn; };
    CHECK(b.mul(x, b.constant(1)) == x);
    CHECK(b.mul(b.constant(1), x) == x);
    CHECK(b.div(x, b.constant(1)) == x);
    CHECK(b.sub(x, b.constant(0.0)) == x);           // x - 0 is x, -0 included
    CHECK(b.add(x, b.constant(-0.0)) == x);          // x + (-0) is x
    CHECK(is(b.add(x, b.constant(0.0)), Builtin::Add));  // x + 0 turns -0 into +0: kept
    CHECK(is(b.mul(x, b.constant(0.0)), Builtin::Mul));  // inf * 0 is nan: kept
    const int bool_node = b.binary(Builtin::Lt, x, y);
    CHECK(b.mul(bool_node, b.constant(0.0)) == b.constant(0.0));  // a bool is finite
    CHECK(is(b.sub(x, x), Builtin::Sub));            // inf - inf is nan: kept
    CHECK(b.neg(b.neg(x)) == x);
    CHECK(b.mul(x, b.constant(-1)) == b.neg(x));
    CHECK(b.mul(b.neg(x), b.neg(y)) == b.mul(x, y));
    CHECK(b.mul(b.neg(x), y) == b.neg(b.mul(x, y)));
    CHECK(b.add(x, b.neg(y)) == b.sub(x, y));
    CHECK(b.sub(x, b.neg(y)) == b.add(x, y));
    CHECK(b.mul(x, y) == b.mul(y, x));               // commutative: one node
    CHECK(b.add(y, x) == p.body);                    // and it finds the checker's node
    CHECK(b.constant(0.0) != b.constant(-0.0));
    CHECK(b.constant(kNan) == b.constant(-kNan));
    CHECK(p.node(b.mul(b.constant(2), b.constant(3))).value == 6);  // folded with apply_builtin
    CHECK(b.select(b.constant(1, ValueType::Bool), x, y) == x);
    CHECK(b.select(b.constant(kNan), x, y) == x);    // nan is true
    CHECK(b.select(bool_node, x, x) == x);
    CHECK(b.binary(Builtin::Pow, x, b.constant(1)) == x);
    CHECK(b.binary(Builtin::And, b.constant(1, ValueType::Bool), bool_node) == bool_node);
    CHECK(b.binary(Builtin::Or, bool_node, b.constant(1, ValueType::Bool)) == b.constant(1, ValueType::Bool));
    CHECK(is(b.binary(Builtin::And, b.constant(1, ValueType::Bool), x), Builtin::And));  // x is no bool
    CHECK(b.binary(Builtin::Xlogy, b.constant(1), y) == b.unary(Builtin::Log, y));
    const std::size_t before = p.nodes.size();
    const int first = b.mul(b.add(x, b.constant(7)), b.div(y, x));
    const std::size_t after = p.nodes.size();
    CHECK(after == before + 4);
    CHECK(b.mul(b.div(y, x), b.add(b.constant(7), x)) == first);
    CHECK(p.nodes.size() == after);  // the second time everything exists already
}

TEST_CASE("derivatives share subexpressions: no repeated node") {
    const auto grad = differentiate(checked("mean((p - t)^2)", {"p", "t"}), std::vector<int>{0, 1}, {});
    int differences = 0;
    for (const auto& n : grad.nodes) differences += n.kind == ir::NodeKind::Apply && n.fn == Builtin::Sub;
    CHECK(differences == 1);
    const ir::Node& dt = grad.node(grad.derivatives[1].node);
    CHECK(dt.fn == Builtin::Neg);
    CHECK(dt.args[0] == grad.derivatives[0].node);  // d/dt is -(d/dp), not a second 2 * (p - t)
    CHECK(print_expression(grad, grad.derivatives[0].node) == "(seed_ * (2.0f * (x_p - x_t)))");

    // Every node at most once, across value and derivatives.
    for (const char* text : {"mean(max(0, 1 - p*t))", "param beta = 1; d = abs(p - t); mean(d < beta ? 0.5 * d^2 / beta : d - 0.5 * beta)",
                             "batchmean(xlogy(t, t) - t * log(p))", "sigmoid(p * t) * tanh(p * t) + exp(p * t)"}) {
        CAPTURE(std::string(text));
        const auto g = differentiate(checked(text, {"p", "t"}), std::vector<int>{0, 1}, {});
        for (std::size_t i = 0; i < g.nodes.size(); ++i)
            for (std::size_t j = 0; j < i; ++j) {
                const auto& a = g.nodes[i];
                const auto& c = g.nodes[j];
                const bool equal = a.kind == c.kind && a.type == c.type && a.fn == c.fn && a.slot == c.slot &&
                                   a.args == c.args && std::bit_cast<std::uint64_t>(a.value) == std::bit_cast<std::uint64_t>(c.value);
                CHECK_FALSE(equal);
            }
        for (std::size_t i = 0; i < g.nodes.size(); ++i)  // arguments before users
            for (int a = 0; a < g.nodes[i].arity; ++a) CHECK(g.nodes[i].args[static_cast<std::size_t>(a)] < static_cast<int>(i));
    }
    // exp's derivative is its own value: the node the body computes, times the seed.
    const auto e = differentiate(checked("sum(exp(x))", {"x"}), std::vector<int>{0}, {});
    const ir::Node& de = e.node(e.derivatives[0].node);
    CHECK((de.kind == ir::NodeKind::Apply && de.fn == Builtin::Mul));
    CHECK(std::set<int>{de.args[0], de.args[1]} ==
          std::set<int>{e.body, e.node(de.args[0]).kind == ir::NodeKind::Seed ? de.args[0] : de.args[1]});
}

TEST_CASE("dumps print the derivatives in the language, shared terms named once") {
    const auto mse = differentiate(checked("mean((p - t)^2)", {"p", "t"}), std::vector<int>{0, 1}, {});
    CHECK(dump_gradients(mse) ==
          "inputs: p, t\nparams: (none)\nreduction: mean\nbody: (p - t) ^ 2\n_1 = g * (2 * (p - t))\n"
          "# per element, g = the upstream gradient / N (the count mean divides by); summed where the input is broadcast\n"
          "d/dp = _1\nd/dt = -_1\n");
    const auto hinge = differentiate(checked("mean(max(0, 1 - p*t))", {"p", "t"}), std::vector<int>{0, 1}, {});
    const std::string text = dump_gradients(hinge);
    CHECK(text.find("_1 = 1 - p * t\n_2 = 0 > _1 ? 0 : 0 == _1 ? g / 2 : g\n") != std::string::npos);
    CHECK(text.find("d/dp = -(t * _2)\nd/dt = -(p * _2)\n") != std::string::npos);
    // A temporary's name never hides a user's name.
    const auto clash = differentiate(checked("_1 = p; sum(exp(_1 * t) * t)", {"p", "t"}), std::vector<int>{1}, {});
    CHECK(dump_gradients(clash).find("__1 = exp(_1 * t)\n") != std::string::npos);
    // ... nor does the seed's: an input named g makes it g_.
    const auto g_input = differentiate(checked("sum(g * x)", {"g", "x"}), std::vector<int>{1}, {});
    CHECK(dump_gradients(g_input).find("d/dx = g * g_\n") != std::string::npos);
    // Through the API, the same text.
    Options options;
    options.inputs = {"p", "t"};
    CHECK(compile("mean((p - t)^2)", options).derivatives(std::vector<std::string>{"p", "t"}) == dump_gradients(mse));
}

TEST_CASE("every derivative prints as CUDA that NVRTC compiles") {
    // Each derivative alone in a gradient kernel of the sum: what its element functor will print.
    std::string terms = "x^2 + x^-0.5 + min(x, y, 1) + (x ? y : 1) + k * d";
    for (const auto& row : builtin_table())
        if (row.gradient != Gradient::Refused) terms += " + " + builtin_call(row, {"x", "y", "(x * z)"});
    const auto grad = differentiate(checked("param k = 2; d = x * y; b = x > z; " + terms + " + b"), std::vector<int>{0, 1, 2}, {});
    for (const auto& d : grad.derivatives) {
        CAPTURE(d.input);
        ir::Program one = grad;
        one.reduction = ir::Reduction::Sum;
        one.derivatives = {d};
        KernelSpec spec;
        spec.inner_strides.assign(read_inputs(one).size(), 1);
        CHECK_NOTHROW(compile_cuda(emit_cuda(one, spec), "sm_90"));
    }
}

TEST_CASE("a gradient through a function without a derivative is a SourceError at its column") {
    for (const auto& row : builtin_table()) {
        if (row.gradient != Gradient::Refused) continue;
        const std::string text = "1 + " + builtin_call(row, {"x", "y", "z"});
        CAPTURE(text);
        const auto program = checked(text);
        CHECK_NOTHROW(differentiate(program, std::vector<int>{}, {}));  // no gradient asked: fine
        try {
            differentiate(program, std::vector<int>{0}, {});
            FAIL("no error");
        } catch (const SourceError& e) {
            CHECK(e.where().column == 5);
            CHECK(e.message().find("no derivative") != std::string::npos);
        }
    }
}

TEST_CASE("docs/language.md has the Gradients section") {
    const std::string doc = read_file(source_dir() + "/docs/language.md");
    CHECK(doc.find("## Gradients") != std::string::npos);
}

}  // TEST_SUITE

TEST_SUITE("differentiate") {
TEST_CASE("the fused value-and-gradient kernel compiles for every example and layout") {
    for (const auto& [text, wrt] : std::vector<std::pair<std::string, std::vector<int>>>{
             {"param beta = 1; d = abs(p - t); mean(d < beta ? 0.5 * d^2 / beta : d - 0.5 * beta)", {0}},
             {"mean((p - t)^2)", {0, 1}},
             {"batchmean(xlogy(t, t) - t * log(p))", {1}},
             {"mean(max(0, 1 - p*t))", {0}}}) {
        CAPTURE(text);
        const auto program = differentiate(check(parse(text, "expr"), {}), wrt, {});
        for (int vector : {1, 4}) {
            KernelSpec spec;
            spec.inner_strides.assign(read_inputs(program).size(), 1);
            spec.vector_width = vector;
            spec.unroll = 2;
            const std::string source = emit_cuda(program, spec);
            CHECK(source.find("lj::GradSink<Element>") != std::string::npos);
            CHECK(source.find("struct Result { Value value; Value grad[" + std::to_string(wrt.size()) + "]; };") != std::string::npos);
            CHECK_NOTHROW(compile_cuda(source, "sm_90"));
        }
        KernelSpec strided;
        strided.loop = KernelSpec::Loop::Strided;
        strided.rank = 2;
        CHECK_NOTHROW(compile_cuda(emit_cuda(program, strided), "sm_90"));
    }
}

TEST_SUITE("differentiate") {
TEST_CASE("gradient kernels of broadcast inputs and of maps compile in every loop") {
    struct Case {
        std::string text;
        std::vector<int> wrt;
        std::vector<int> summed;  // Columns: which derivatives are summed over rows
    };
    for (const auto& c : std::vector<Case>{
             {"mean(max(0, 1 - p*t))", {0, 1}, {0, 1}},
             {"mean(max(0, 1 - p*t))", {1}, {1}},
             {"sum(w * (p - t)^2)", {0, 2}, {0, 1}},
             {"hardsigmoid_ish = clamp(x + 3, 0, 6) / 6; hardsigmoid_ish * y", {0, 1}, {0, 1}}}) {
        CAPTURE(c.text);
        const auto program = differentiate(check(parse(c.text, "expr"), {}), c.wrt, {});
        const std::size_t read = read_inputs(program).size() + (program.is_map() ? 1 : 0);
        for (int vector : {1, 4}) {
            KernelSpec columns;
            columns.loop = KernelSpec::Loop::Columns;
            columns.rank = 2;
            columns.inner_strides.assign(read, 1);
            columns.summed = c.summed;
            columns.vector_width = vector;
            columns.unroll = 2;
            const std::string source = emit_cuda(program, columns);
            CHECK(source.find("lj::for_columns<") != std::string::npos);
            CHECK_NOTHROW(compile_cuda(source, "sm_90"));
        }
        // Summed along rows ([N, 1]) and over everything (a scalar): the rows loop, every vector width.
        std::vector<int> rows_summed(c.wrt.size(), KernelSpec::NotSummed);
        rows_summed.back() = KernelSpec::AlongRows;
        if (c.wrt.size() > 1) rows_summed.front() = KernelSpec::OverAll;
        for (int vector : {1, 4, 8}) {
            KernelSpec rows;
            rows.rank = 2;
            rows.inner_strides.assign(read, 1);
            rows.summed = rows_summed;
            rows.vector_width = vector;
            rows.unroll = 2;
            const std::string source = emit_cuda(program, rows);
            CHECK(source.find("lj::for_rows<") != std::string::npos);
            CHECK(source.find("const lj::SumScratch sums") != std::string::npos);
            CHECK(source.find("lj::kSummedAlongRows") != std::string::npos);
            CHECK_NOTHROW(compile_cuda(source, "sm_90"));
        }
        if (program.is_map()) {  // the map's backward also runs in the rows and strided loops
            KernelSpec rows;
            rows.inner_strides.assign(read, 1);
            rows.vector_width = 4;
            const std::string source = emit_cuda(program, rows);
            CHECK(source.find("const Value seed_ = x[") != std::string::npos);  // the upstream element
            CHECK(source.find("kReduces = false") != std::string::npos);
            CHECK_NOTHROW(compile_cuda(source, "sm_90"));
            KernelSpec strided;
            strided.loop = KernelSpec::Loop::Strided;
            strided.rank = 2;
            CHECK_NOTHROW(compile_cuda(emit_cuda(program, strided), "sm_90"));
        }
    }
}

TEST_CASE("the kernel choice for gradients of broadcast inputs") {
    const auto program = [](const std::string& text, std::vector<int> wrt) {
        return differentiate(check(parse(text, "expr"), {}), wrt, {});
    };
    const auto layout = [](std::vector<OperandShape> inputs, const Shape& full) {
        const OperandShape out{"gradients", full, {}};
        return plan_layout(inputs, &out);
    };
    const Shape full{64, 32};
    SUBCASE("a row broadcast over rows is summed in the columns loop") {
        const auto hinge = program("mean(max(0, 1 - p*t))", {0, 1});
        const auto spec = KernelSpec::choose(hinge, layout({{"p", full, {}}, {"t", {32}, {}}}, full), KernelOperands::unplaced(hinge), Knobs{.block_threads = 256});
        CHECK(spec.loop == KernelSpec::Loop::Columns);
        CHECK(spec.summed == std::vector<int>{0, 1});
        CHECK(spec.signature().find("summed [0 1]") != std::string::npos);
    }
    SUBCASE("narrow columns shrink the block in whole warps") {
        // 32 columns, 4 per thread: 8 lanes. 1024 halves to 64; 96 cannot halve to whole warps.
        const auto hinge = program("mean(max(0, 1 - p*t))", {0, 1});
        const auto l = layout({{"p", full, {}}, {"t", {32}, {}}}, full);
        CHECK(KernelSpec::choose(hinge, l, KernelOperands::unplaced(hinge), Knobs{.block_threads = 1024}).block_threads == 64);
        const auto odd = KernelSpec::choose(hinge, l, KernelOperands::unplaced(hinge), Knobs{.block_threads = 96});
        CHECK(odd.block_threads == 96);
        CHECK_NOTHROW(emit_cuda(hinge, odd));
    }
    SUBCASE("the columns loop's default for a small program: 512 threads walking 4 rows at a time") {
        const auto hinge = program("mean(max(0, 1 - p*t))", {0, 1});
        const Shape wide{64, 4096};
        const auto l = layout({{"p", wide, {}}, {"t", {4096}, {}}}, wide);
        const auto spec = KernelSpec::choose(hinge, l, KernelOperands::unplaced(hinge));
        CHECK(spec.loop == KernelSpec::Loop::Columns);
        CHECK(spec.block_threads == 512);
        CHECK(spec.unroll == 4);
        const auto asked = KernelSpec::choose(hinge, l, KernelOperands::unplaced(hinge), Knobs{.block_threads = 1024});
        CHECK(asked.block_threads == 1024);  // a block asked for is kept, and so is the unroll of 2 with it
        CHECK(asked.unroll == 2);
        // Spelling out the default block gives the default kernel.
        CHECK(KernelSpec::choose(hinge, l, KernelOperands::unplaced(hinge), Knobs{.block_threads = 512}).signature() ==
              spec.signature());
        // Registers for two blocks of 512 per SM (64 each: hinge's 100 would leave one).
        CHECK(spec.min_blocks_per_sm == 2);
        CHECK(spec.signature().find("registers for 2 blocks per SM") != std::string::npos);
        CHECK(asked.min_blocks_per_sm == 1);
        // Not for other types, which would spill under the cap.
        for (DType dtype : {DType::bfloat16, DType::float16, DType::float64}) {
            CAPTURE(dtype);
            CHECK(KernelSpec::choose(hinge, l, KernelOperands::unplaced(hinge, dtype)).min_blocks_per_sm == 1);
        }
        // The row operand t is kept across the rows of a strip.
        CHECK(spec.same_every_row == std::vector<int>{0, 1});
        // Chunks of rows such that every block walks as few rows as the grid allows: [32768, 32768]
        // is 16 strips; 264 resident blocks take 33 chunks of each, two items a block (16 chunks would
        // leave 8 blocks idle, 17 give some blocks two items of 1928 rows).
        const Shape big{32768, 32768};
        const auto lb = layout({{"p", big, {}}, {"t", {32768}, {}}}, big);
        const auto sb = KernelSpec::choose(hinge, lb, KernelOperands::unplaced(hinge));
        struct Chunking {
            Occupancy occupancy;
            int strip_blocks, chunks;
            long long chunk_rows;
            unsigned blocks;
        };
        for (const Chunking& c : {Chunking{{.fits_per_sm = 2, .multiprocessors = 132}, 16, 33, 993, 264},
                                  Chunking{{.fits_per_sm = 1, .multiprocessors = 132}, 16, 33, 993, 132},
                                  Chunking{{.fits_per_sm = 1, .multiprocessors = 128}, 16, 8, 4096, 128},
                                  Chunking{{.fits_per_sm = 2, .multiprocessors = 1}, 2, 1, 32768, 2}}) {
            CAPTURE(c.occupancy.multiprocessors);
            CAPTURE(c.occupancy.fits_per_sm);
            const LaunchGrid g = plan_grid(hinge, sb, lb, c.occupancy);
            CHECK(g.strip_blocks == c.strip_blocks);
            CHECK(g.chunks == c.chunks);
            CHECK(g.chunk_rows == c.chunk_rows);
            CHECK(g.blocks == c.blocks);
            CHECK(g.sum_partials == static_cast<std::size_t>(c.chunks) * 32768);
        }
        // Two logarithms keep their cap of 2 rows.
        const auto two_logs = program("mean(log(p) * t + log(1 - p) * (1 - t))", {0, 1});
        const auto lt = layout({{"p", wide, {}}, {"t", {4096}, {}}}, wide);
        CHECK(KernelSpec::choose(two_logs, lt, KernelOperands::unplaced(two_logs)).unroll == 2);
    }
    SUBCASE("no broadcast input: the rows loop, nothing summed") {
        const auto hinge = program("mean(max(0, 1 - p*t))", {0});
        const auto spec = KernelSpec::choose(hinge, layout({{"p", full, {}}, {"t", {32}, {}}}, full), KernelOperands::unplaced(hinge), Knobs{.block_threads = 256});
        CHECK(spec.loop == KernelSpec::Loop::Rows);
        CHECK(spec.summed.empty());
    }
    SUBCASE("one row per batch of rows ([N, 1, C] against [N, M, C]) is summed in the columns loop, in batches") {
        const auto weighted = program("mean(w * (p - t)^2)", {0});
        const Shape cube{4, 6, 32};
        const auto l = layout({{"w", {4, 1, 32}, {}}, {"p", cube, {}}, {"t", cube, {}}}, cube);
        const auto spec = KernelSpec::choose(weighted, l, KernelOperands::unplaced(weighted));
        CHECK(spec.loop == KernelSpec::Loop::Columns);
        CHECK(spec.summed == std::vector<int>{KernelSpec::OverRows});
        CHECK(summed_batch_dims(weighted, spec, l) == 1);
        const LaunchGrid grid = plan_grid(weighted, spec, l, Occupancy{.fits_per_sm = 4, .multiprocessors = 2});
        CHECK(grid.batch_rows == 6);
        CHECK(grid.blocks == static_cast<unsigned>(4 * grid.chunks * grid.strip_blocks));
        CHECK(grid.sum_arrivals == 4);  // a batch per strip: 32 columns are one strip
        // Many batches: the grid stays one resident grid (the value's partials are one per block).
        const Shape many{5000, 9, 64};
        const auto lm = layout({{"w", {5000, 1, 64}, {}}, {"p", many, {}}, {"t", many, {}}}, many);
        const auto spec_m = KernelSpec::choose(weighted, lm, KernelOperands::unplaced(weighted));
        const Occupancy occupancy{.fits_per_sm = 4, .multiprocessors = 132};
        CHECK(plan_grid(weighted, spec_m, lm, occupancy).blocks == static_cast<unsigned>(occupancy.resident_blocks()));
        // The plain row vector is one batch of all rows.
        const auto plain = layout({{"w", {32}, {}}, {"p", cube, {}}, {"t", cube, {}}}, cube);
        const auto spec1 = KernelSpec::choose(weighted, plain, KernelOperands::unplaced(weighted));
        CHECK(summed_batch_dims(weighted, spec1, plain) == 0);
        CHECK(plan_grid(weighted, spec1, plain, Occupancy{.fits_per_sm = 4, .multiprocessors = 2}).batch_rows == 24);
    }
    SUBCASE("one value per row (a column [N, 1]) and a scalar are summed in the rows loop") {
        const auto weighted = program("mean(w * (p - t)^2)", {0, 1});  // inputs in order of appearance: w, p, t
        struct Row {
            Shape w;
            int summed;
        };
        for (const Row& row : {Row{{64, 1}, KernelSpec::AlongRows}, Row{{1}, KernelSpec::OverAll},
                               Row{{}, KernelSpec::OverAll}, Row{{1, 1}, KernelSpec::OverAll}}) {
            CAPTURE(format_shape(row.w));
            const auto l = layout({{"w", row.w, {}}, {"p", full, {}}, {"t", full, {}}}, full);
            const auto spec = KernelSpec::choose(weighted, l, KernelOperands::unplaced(weighted), Knobs{.accumulator = Accumulator::Float32});
            CHECK(spec.loop == KernelSpec::Loop::Rows);
            CHECK(spec.summed == std::vector<int>{row.summed, KernelSpec::NotSummed});
            CHECK(spec.sums());
            CHECK(spec.accumulator == Accumulator::Float64);  // sums are float64, and so is the value then
            CHECK(spec.signature().find(fmt::format("summed [{} 0]", row.summed)) != std::string::npos);
            // A small program: 1024 threads, 512 where it sums along rows; an H100 keeps 1024 there
            // (its own row of the defaults table), an H200 takes 512.
            CHECK(spec.block_threads == (row.summed == KernelSpec::AlongRows ? 512 : 1024));
            const GpuFacts h100{.arch = 90, .multiprocessors = 132, .memory_bytes_per_second = 3.35e12};
            const GpuFacts h200{.arch = 90, .multiprocessors = 132, .memory_bytes_per_second = 4.8e12};
            const auto on = [&](const GpuFacts& gpu) {
                return KernelSpec::choose(weighted, l, KernelOperands::unplaced(weighted), {}, false, gpu).block_threads;
            };
            CHECK(on(h100) == 1024);
            CHECK(on(h200) == (row.summed == KernelSpec::AlongRows ? 512 : 1024));
        }
        // Whole rows per block where rows of several tiles are many enough for every block (32 each),
        // else tiles in turn; a row of one tile is the same either way.
        const auto column = [&](long long n, long long c, int block, Occupancy occupancy) {
            const Shape pc{n, c};
            const auto lc = layout({{"w", {n, 1}, {}}, {"p", pc, {}}, {"t", pc, {}}}, pc);
            const auto sc = KernelSpec::choose(weighted, lc, KernelOperands::unplaced(weighted),
                                               Knobs{.block_threads = block, .unroll = 1});
            return plan_grid(weighted, sc, lc, occupancy);
        };
        const Occupancy one_per_sm{.fits_per_sm = 1, .multiprocessors = 132};
        CHECK(column(8192, 1000, 64, one_per_sm).whole_rows);       // 8192 rows of 4 tiles, 132 blocks
        CHECK(!column(4000, 1000, 64, one_per_sm).whole_rows);      // 30 rows a block
        CHECK(!column(8192, 256, 64, one_per_sm).whole_rows);       // rows of one tile
        CHECK(column(8192, 1000, 64, one_per_sm).sum_partials >= 8192);
        // Rank 3 with [N, M, 1]: the outer dimensions merge into one of rows.
        const Shape cube{4, 6, 32};
        const auto l3 = layout({{"w", {4, 6, 1}, {}}, {"p", cube, {}}, {"t", cube, {}}}, cube);
        CHECK(KernelSpec::choose(weighted, l3, KernelOperands::unplaced(weighted)).summed ==
              std::vector<int>{KernelSpec::AlongRows, KernelSpec::NotSummed});
    }
    SUBCASE("any broadcast of one input: its walked dimensions are put outermost, then summed along or over rows") {
        const auto weighted = program("mean(w * (p - t)^2)", {0});
        const auto ordered = [&](const Shape& w, const Shape& full_shape) {
            const std::vector<OperandShape> shapes{{"w", w, {}}, {"p", full_shape, {}}, {"t", full_shape, {}}};
            const OperandShape out{"gradients", full_shape, {}};
            return plan_program_layout(weighted, shapes, &out);
        };
        struct Row {
            Shape w, full;
            std::vector<std::int64_t> dims;  // after ordering and merging
            int summed, batch_dims;
            long long batch_rows;
        };
        for (const Row& row : {Row{{1, 6, 1, 1}, {4, 6, 5, 32}, {6, 4, 160}, KernelSpec::AlongRows, 1, 4},  // NCHW per channel
                               Row{{6, 1}, {4, 6, 32}, {6, 4, 32}, KernelSpec::AlongRows, 1, 4},
                               Row{{6, 1, 32}, {4, 6, 5, 32}, {6, 4, 5, 32}, KernelSpec::OverRows, 1, 20},
                               Row{{4, 1, 1}, {4, 6, 32}, {4, 192}, KernelSpec::AlongRows, 1, 1}}) {
            CAPTURE(format_shape(row.w));
            const Layout l = ordered(row.w, row.full);
            CHECK(l.dims == row.dims);
            CHECK(l.shape == row.full);  // what the user sees does not move
            const auto spec = KernelSpec::choose(weighted, l, KernelOperands::unplaced(weighted));
            CHECK(spec.summed == std::vector<int>{row.summed});
            CHECK(summed_batch_dims(weighted, spec, l) == row.batch_dims);
            CHECK(plan_grid(weighted, spec, l, Occupancy{.fits_per_sm = 4, .multiprocessors = 2}).batch_rows == row.batch_rows);
            CHECK_NOTHROW(compile_cuda(emit_cuda(weighted, spec), "sm_90"));
        }
    }
    SUBCASE("other broadcasts, and sums over rows beside sums along them, are refused, naming the input") {
        const auto weighted = program("mean(w * (p - t)^2)", {0});
        const Shape cube{4, 6, 32};
        const Shape four{4, 6, 5, 32};
        for (const auto& [w, full_shape] : std::vector<std::pair<Shape, Shape>>{
                 {{6, 1}, cube}, {{1, 6, 1}, cube}, {{6, 1, 32}, four}}) {
            CAPTURE(format_shape(w));
            const auto l = layout({{"w", w, {}}, {"p", full_shape, {}}, {"t", full_shape, {}}}, full_shape);
            CHECK_THROWS_WITH_AS(KernelSpec::choose(weighted, l, KernelOperands::unplaced(weighted)),
                                 doctest::Contains("the gradient of 'w' sums over a broadcast"), UnsupportedError);
        }
        const auto rows_apart = program("mean(w * (p - t)^2)", {0, 2});  // w [4, 1, 32] and t [32]
        const auto l3 = layout({{"w", {4, 1, 32}, {}}, {"p", cube, {}}, {"t", {32}, {}}}, cube);
        CHECK_THROWS_WITH_AS(KernelSpec::choose(rows_apart, l3, KernelOperands::unplaced(rows_apart)),
                             doctest::Contains("different sets of rows"), UnsupportedError);
        const auto two_patterns = program("mean(w * (p - t)^2)", {0, 2});  // w [6, 1], t [4, 1, 1]: one order each
        const std::vector<OperandShape> shapes{{"w", {6, 1}, {}}, {"p", cube, {}}, {"t", {4, 1, 1}, {}}};
        const OperandShape out{"gradients", cube, {}};
        CHECK_THROWS_WITH_AS(KernelSpec::choose(two_patterns, plan_program_layout(two_patterns, shapes, &out),
                                                KernelOperands::unplaced(two_patterns)),
                             doctest::Contains("the gradient of 't' sums over a broadcast"), UnsupportedError);
        // A transposed full-shape input: no rows loop, so nothing sums the broadcast (the CLI then
        // falls back to the reference, as for every UnsupportedError).
        const auto weighted_p = program("mean(w * (p - t)^2)", {0});
        const auto lt = layout({{"w", {1}, {}}, {"p", full, {1, 64}}, {"t", full, {}}}, full);
        CHECK_THROWS_WITH_AS(KernelSpec::choose(weighted_p, lt, KernelOperands::unplaced(weighted_p)),
                             doctest::Contains("contiguous along the innermost dimension"), UnsupportedError);
        const auto both = program("mean(w * (p - t)^2)", {0, 2});
        const auto l = layout({{"w", {1}, {}}, {"p", full, {}}, {"t", {32}, {}}}, full);
        CHECK_THROWS_WITH_AS(KernelSpec::choose(both, l, KernelOperands::unplaced(both)),
                             doctest::Contains("ask for them in two calls"), UnsupportedError);
    }
}
}  // TEST_SUITE

// Each row a program lossjit once gave a wrong gradient (or value) for, found by the issue that asked
// for the differential suite (tests/differential/) or by that suite; the expected numbers are
// torch's (float64), as the suite's oracle gives them.
TEST_CASE("programs once wrong give torch's numbers (pinned from the differential suite)") {
    struct Input {
        std::string name;
        Shape shape;
        std::vector<double> values;  // float64; an index input is read as int64
        bool index = false;
        std::vector<std::int64_t> strides{};
    };
    struct Row {
        std::string text;
        std::vector<Input> inputs;
        std::string wrt;                // "" for a value alone
        std::vector<double> expected;   // the gradient of wrt, row-major; or {value}
        const char* was;
    };
    const double nan = kNan, inf = kInf;
    const std::vector<Row> table = {
        {"mean(w * sum(a, -1))", {{"a", {2, 3}, {1, 1, 1, 1, 1, 1}}, {"w", {2, 1}, {1, 1}}}, "a",
         {0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, "1.5: w [N, 1] counted per element, its C copies summed"},
        {"mean(where(w > 0, sum(a, -1), 0))", {{"a", {2, 3}, {1, 1, 1, 1, 1, 1}}, {"w", {2, 1}, {1, 1}}}, "a",
         {0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, "1.5, as above"},
        {"mean(sum(a, -1) / w)", {{"a", {2, 3}, {1, 1, 1, 1, 1, 1}}, {"w", {2, 1}, {1, 1}}}, "a",
         {0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, "1.5, as above"},
        {"mean(w * logsumexp(a, -1))", {{"a", {2, 3}, {1, 1, 1, 1, 1, 1}}, {"w", {2, 1}, {1, 1}}}, "a",
         {1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6}, "0.5, as above"},
        {"c = sum(a * b, -1) / sqrt(sum(a * a, -1) * sum(b * b, -1)); mean(where(l > 0, 1 - c, max(0, c)))",
         {{"a", {2, 3}, {1, 2, 3, 0.5, -1, 2}}, {"b", {2, 3}, {2, -1, 1, 1, 1, -0.5}}, {"l", {2, 1}, {1, -1}}}, "a",
         {-0.09741870099821089, 0.07793496079856871, -0.01948374019964217, 0, 0, 0},
         "C times torch's: the cosine embedding loss with labels [N, 1]"},
        {"sum(a + sum(a, -1))", {{"a", {2, 3}, {1, 2, 3, 4, 5, 6}}}, "a", {4, 4, 4, 4, 4, 4},
         "2: the constant 1 a per-element user gives sum(a, -1) was not summed along the row"},
        {"sum(sum(sum(a, -1), -1))", {{"a", {2, 3}, {1, 2, 3, 4, 5, 6}}}, "a", {3, 3, 3, 3, 3, 3},
         "1: sum(r, -1) of a per-row r passed g, not C * g"},
        {"sum(w * sum(a, -1))", {{"a", {2, 3}, {1, 1, 1, 1, 1, 1}}, {"w", {2, 3}, {1, 1}, false, {1, 0}}}, "",
         {18}, "6: w expanded along the row (stride 0) was taken for one value per row"},
        {"l = logsumexp(x, -1) - x[y]; sum(where(y != -100, l, 0)) / sum(y != -100)",
         {{"x", {2, 3}, {0.5, -1, 2, 0, 3, 1}}, {"y", {2}, {-100, -100}, true}}, "x", {0, 0, 0, 0, 0, 0},
         "nan: every row ignored, the factor 1 / 0 times the guarded zeros"},
        {"l = logsumexp(x, -1) - x[y]; sum(where(y != -100, w[y] * l, 0)) / sum(where(y != -100, w[y], 0))",
         {{"x", {2, 3}, {0, 0, 0, 1, 2, 3}}, {"y", {2}, {-100, 1}, true}, {"w", {3}, {1, 2, 3}}}, "x",
         {0, 0, 0, 0.090030573170380462, 0.24472847105479767 - 1, 0.66524095577481771},
         "nan on the ignored row: 0 * w[-100]"},
        {"sum(amax(x, -1))", {{"x", {1, 3}, {1, nan, 3}}}, "x", {nan, nan, nan},
         "0: a row whose maximum is nan shares nothing (torch: (g / 0) * mask)"},
        {"(sum(a) - sum(a)) - mean(b)", {{"a", {2}, {1, 2}}, {"b", {2}, {3, 4}}}, "b", {-0.5, -0.5},
         "an internal error: a reduction written twice is one after hash-consing"},
        {"mean(-1 + (a + 0.25) ^ -1)", {{"a", {1}, {1.75}}}, "a", {-0.25},
         "garbage: pow's rule read its exponent through a reference the node list had moved"},
        {"sum(a % b)", {{"a", {1}, {1}}, {"b", {1}, {0.1}}}, "b", {-9}, "-10: floor(1 / 0.1), not 1 // 0.1"},
        {"sum(a % b)", {{"a", {1}, {inf}}, {"b", {1}, {2}}}, "b", {nan}, "-inf: floor(inf / 2)"},
        {"sum(x ^ -0.5)", {{"x", {1}, {-0.0}}}, "", {-inf}, "+inf: pow(-0, -0.5), where kernels use rsqrt"},
        {"sum(x ^ 0.5)", {{"x", {1}, {-inf}}}, "", {nan}, "+inf: pow(-inf, 0.5), where kernels use sqrt"},
        {"sum(where(b > 0, b, acos(sum(x, -1))))", {{"b", {1, 2}, {1, 2}}, {"x", {1, 2}, {1, 1}}}, "x", {0, 0},
         "nan: acos'(2) behind a row sum of where's unselected side"},
        {"r = amax(x, -1); s0 = q - r; sum(tanh(sum((log(q) + s0) - x[k] * s0, -1)))",
         {{"x", {2, 3}, {0.1, 0.2, 0.4, 0.05, -0.1, 0.3}}, {"k", {2, 2}, {0, 2, 1, 1}, true},
          {"q", {2, 2}, {0.5, 0.75, 0.25, 0.4}}},
         "x", {-0.06494670494879291, 0, -1.2015140415526693, 0, -0.0021835354019469904, -0.09607555768566747},
         "x[2] -1.85, x[5] -0.140 (torch 1.13 float64 above): r's adjoint, a sum over the K taken values, split into its "
         "terms with C (3) copies of the term of one value per row, not K (2)"},
    };
    for (const auto& row : table) {
        CAPTURE(row.text);
        CAPTURE(std::string(row.was));
        Options options;
        std::vector<std::vector<std::int64_t>> indices;
        indices.reserve(row.inputs.size());
        std::vector<TensorView> views;
        for (const auto& in : row.inputs) {
            options.inputs.push_back(in.name);
            indices.emplace_back(in.values.begin(), in.values.end());
            views.push_back(in.index ? TensorView{indices.back().data(), DType::int64, in.shape, {}}
                                     : TensorView{in.values.data(), DType::float64, in.shape, in.strides});
        }
        const auto loss = compile(row.text, options);
        if (row.wrt.empty()) {
            CHECK(same(loss.reference(views), row.expected[0]));
            continue;
        }
        const auto grads = loss.reference_grad(views, std::vector<std::string>{row.wrt});
        REQUIRE(grads[0].values.size() == row.expected.size());
        for (std::size_t i = 0; i < row.expected.size(); ++i) {
            CAPTURE(i);
            if (std::isnan(row.expected[i]) || std::isinf(row.expected[i]) || row.expected[i] == 0)
                CHECK(same(grads[0].values[i], row.expected[i]));
            else
                CHECK(grads[0].values[i] == doctest::Approx(row.expected[i]).epsilon(1e-12));
        }
    }
}

// A composite program's derivative by a whole-tensor reduction that is a number of constants and the
// caller's parameters (distillation's `batchmean(...) * T^2`) is folded into the derivatives (no
// factor kernel launched before the gradient's): the gradient against
// central differences of the forward reference, at the default and at other parameter values.
TEST_CASE("a composite program's factors of parameters are folded: no factor kernel, the same gradient") {
    struct Row {
        std::string text;
        std::vector<std::pair<std::string, double>> params;  // values set at the call; none: the defaults
    };
    const std::string distill = read_file(source_dir() + "/examples/distill_kl.loss");
    const std::vector<Row> table = {
        {distill, {}},
        {distill, {{"T", 0.7}}},
        {"param w = 3; mean(a^2) * w - sum(a * b) * exp(w) / 2", {{"w", -1.5}}},
        {"param w = 3; param v = 2; mean(sum(a * b, -1)) * w^v + mean(a)", {}},
    };
    HostTensor a = generate(parse_generator("3x5:normal"), 11), b = generate(parse_generator("3x5:normal"), 12);
    for (const auto& row : table) {
        CAPTURE(row.text);
        Options options;
        options.inputs = row.text == distill ? std::vector<std::string>{"s", "t"} : std::vector<std::string>{"a", "b"};
        for (const auto& [name, value] : row.params) options.params.push_back({name, value});
        const auto loss = compile(row.text, options);
        const std::vector<std::string> wrt{options.inputs[0]};
        auto views = [&] { return std::vector<TensorView>{a.view(), b.view()}; };
        CHECK(!loss.factor_source(views(), wrt));
        const auto grads = loss.reference_grad(views(), wrt, 1.5);
        auto* data = reinterpret_cast<float*>(a.bytes.data());
        REQUIRE(grads[0].values.size() == 15);
        for (std::size_t i = 0; i < 15; ++i) {
            CAPTURE(i);
            const float kept = data[i];
            const double h = 1e-2;
            data[i] = static_cast<float>(kept + h);
            const double plus = loss.reference(views());
            data[i] = static_cast<float>(kept - h);
            const double minus = loss.reference(views());
            data[i] = kept;
            CHECK(grads[0].values[i] == doctest::Approx(1.5 * (plus - minus) / (2 * h)).epsilon(2e-3).scale(1.0));
        }
    }
    // A factor of the data (a reduction's value) keeps its kernel, and so does one of a statistic
    // (`mean(b)` inside the sum is computed by a kernel of its own, and the factor is that value).
    Options options;
    options.inputs = {"a", "b"};
    const std::vector<TensorView> ab{a.view(), b.view()};
    const std::vector<std::string> wrt_a{"a"};
    CHECK(compile("param w = 3; mean(a^2) * sum(b) * w", options).factor_source(ab, wrt_a));
    const auto statistic_factor = compile("mean(a * mean(b)) * mean(b)", options);
    CHECK(statistic_factor.factor_source(ab, wrt_a));
    const auto grads = statistic_factor.reference_grad(ab, wrt_a);
    const auto bs = b.floats();
    const double mean_b = std::accumulate(bs.begin(), bs.end(), 0.0) / static_cast<double>(bs.size());
    for (double g : grads[0].values) CHECK(g == doctest::Approx(mean_b * mean_b / 15).epsilon(1e-6));
}

// The reference gradients of a map's float32 inputs with an upstream U against central differences
// of sum(U * map(inputs)) through the forward reference (itself checked against torch by the
// differential test). The step is what float32 holds of +-1e-2: a loose tolerance.
namespace {
void check_map_gradients(const Loss& loss, const std::vector<HostTensor*>& inputs, const std::vector<std::string>& names,
                         const HostTensor& up) {
    auto views = [&] {
        std::vector<TensorView> v;
        for (const HostTensor* t : inputs) v.push_back(t->view());
        return v;
    };
    const auto grads = loss.reference_grad(views(), names, up.view());
    REQUIRE(grads.size() == inputs.size());
    const auto weights = up.floats();
    auto weighted_sum = [&] {
        std::vector<double> out(weights.size());
        loss.reference_map(views(), OutputView{out.data(), DType::float64, Dims(up.shape), {}});
        double total = 0;
        for (std::size_t i = 0; i < out.size(); ++i) total += out[i] * weights[i];
        return total;
    };
    for (std::size_t k = 0; k < inputs.size(); ++k) {
        CAPTURE(names[k]);
        CHECK(grads[k].shape == inputs[k]->shape);
        auto* data = reinterpret_cast<float*>(inputs[k]->bytes.data());
        for (std::size_t i = 0; i < grads[k].values.size(); ++i) {
            CAPTURE(i);
            const float kept = data[i];
            const double h = 1e-2;
            data[i] = static_cast<float>(kept + h);
            const double plus = weighted_sum();
            data[i] = static_cast<float>(kept - h);
            const double minus = weighted_sum();
            data[i] = kept;
            CHECK(grads[k].values[i] == doctest::Approx((plus - minus) / (2 * h)).epsilon(2e-3).scale(1.0));
        }
    }
}
}  // namespace

TEST_CASE("maps that reduce along rows: the gradient is the vector-Jacobian product with the upstream") {
    // Against finite differences of sum(U * map(x)) through the forward reference (itself checked
    // against torch by the differential test), and log_softmax's closed form g - softmax * sum(g).
    struct Case {
        const char* program;
        Shape x_shape;
        bool per_row_output;  // the output is the rows' shape ([N]: reduction='none')
    };
    const Case cases[] = {
        {"x - logsumexp(x, -1)", {3, 4}, false},                 // log_softmax
        {"exp(x - logsumexp(x, -1))", {3, 4}, false},            // softmax
        {"x / sqrt(mean(x * x, -1) + 1e-6)", {2, 5}, false},     // RMS norm
        {"(x - mean(x, -1)) / sqrt(var(x, -1) + 1e-5)", {2, 5}, false},  // layer norm (torch's var: correction 1)
        {"logsumexp(x, -1) - amax(x, -1)", {3, 4}, true},       // one value per row
        {"std(x, -1)", {2, 1, 6}, true},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.program));
        const Loss loss = compile(c.program);
        HostTensor x = generate(parse_generator(format_shape(c.x_shape) + ":normal"), 5);
        const std::vector<TensorView> views{x.view()};
        const Shape out_shape = loss.output_shape(views);
        Shape expected_out = c.x_shape;
        if (c.per_row_output) expected_out.pop_back();
        REQUIRE(out_shape == expected_out);
        const HostTensor up = generate(parse_generator(format_shape(out_shape) + ":normal"), 6);
        check_map_gradients(loss, {&x}, {"x"}, up);
    }

    // log_softmax's backward in closed form.
    const std::vector<double> xs{0.5, -1.0, 2.0, 0.25, 1.5, 3.0}, gs{1.0, -2.0, 0.5, 3.0, 0.0, -1.0};
    const std::vector<TensorView> xv{TensorView::contiguous(xs.data(), {2, 3}, DType::float64)};
    const auto g = compile("x - logsumexp(x, -1)").reference_grad(xv, std::vector<std::string>{"x"},
                                                                     TensorView::contiguous(gs.data(), {2, 3}, DType::float64));
    for (int r = 0; r < 2; ++r) {
        double z = 0, gsum = 0;
        for (int j = 0; j < 3; ++j) z += std::exp(xs[r * 3 + j]), gsum += gs[r * 3 + j];
        for (int j = 0; j < 3; ++j)
            CHECK(g[0].values[r * 3 + j] == doctest::Approx(gs[r * 3 + j] - std::exp(xs[r * 3 + j]) / z * gsum).epsilon(1e-12));
    }

    // Per-row cross-entropy, reduction='none': U_i (softmax - one_hot(y_i)).
    const std::vector<std::int64_t> ys{2, 0};
    const std::vector<double> us{0.5, -3.0};
    const std::vector<TensorView> ce_in{xv[0], TensorView::contiguous(ys.data(), {2}, DType::int64)};
    const auto ce = compile("logsumexp(x, -1) - x[y]").reference_grad(ce_in, std::vector<std::string>{"x"},
                                                                        TensorView::contiguous(us.data(), {2}, DType::float64));
    for (int r = 0; r < 2; ++r) {
        double z = 0;
        for (int j = 0; j < 3; ++j) z += std::exp(xs[r * 3 + j]);
        for (int j = 0; j < 3; ++j)
            CHECK(ce[0].values[r * 3 + j] ==
                  doctest::Approx(us[r] * (std::exp(xs[r * 3 + j]) / z - (j == ys[r] ? 1.0 : 0.0))).epsilon(1e-12));
    }

    // The upstream has the output's shape, not the inputs'; an input named `upstream` is fine.
    CHECK_THROWS_WITH_AS(compile("logsumexp(x, -1) - x[y]").reference_grad(ce_in, std::vector<std::string>{"x"}, xv[0]),
                         doctest::Contains("the upstream gradient has shape [2, 3], but the output's shape is [2]"),
                         UsageError);
    const std::vector<TensorView> named{TensorView::contiguous(xs.data(), {2, 3}, DType::float64)};
    const auto same = compile("upstream - logsumexp(upstream, -1)")
                          .reference_grad(named, std::vector<std::string>{"upstream"},
                                          TensorView::contiguous(gs.data(), {2, 3}, DType::float64));
    CHECK(same[0].values == g[0].values);

    // Their fused gradient kernels compile (NVRTC, no GPU), float32 and bfloat16, per-row or not.
    for (const auto& [program, dtype] : std::vector<std::pair<std::string, DType>>{
             {"x - logsumexp(x, -1)", DType::float32}, {"x - logsumexp(x, -1)", DType::bfloat16},
             {"x / sqrt(mean(x * x, -1) + 1e-6)", DType::float32}, {"logsumexp(x, -1) - amax(x, -1)", DType::float32}}) {
        CAPTURE(program);
        const std::vector<TensorView> shapes{TensorView::contiguous(nullptr, {64, 1000}, dtype)};
        const KernelBuild build = compile(program).compile_kernel(shapes, std::vector<std::string>{"x"}, "sm_90");
        CHECK(build.image_bytes > 0);
        CHECK(build.source.find("upstream") != std::string::npos);
    }
}

TEST_CASE("a gradient's row sum is split into factors of one value per row and terms, so parts join earlier walks") {
    // sum(P * E) = P * sum(E) where P is one value per row: RMS norm's sum(g * x / r / r) waits for r,
    // sum(g * x) does not, and is added in r's own walk. sum(A - B) = sum(A) - sum(B) where a part
    // then needs an earlier walk: layer norm's mean's adjoint sum(w * g / s - n * (x - m)) splits
    // into s's walk and n's. A sum whose terms all wait for the same walk stays one (log_softmax,
    // the softmax of exp(x - lse)). The counts before: 3, 3, 4, 4, 2, 3.
    struct Case {
        const char* program;
        int passes;  // walks of the gradient kernel over each row
    };
    const Case cases[] = {
        {"x / sqrt(mean(x * x, -1) + 1e-6)", 2},
        {"x / sqrt(sum(x * x, -1))", 2},
        {"m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)", 3},
        {"m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5) * w + b", 3},
        {"x - logsumexp(x, -1)", 2},
        {"exp(x - logsumexp(x, -1))", 3},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.program));
        const Loss loss = compile(c.program);
        std::vector<TensorView> shapes{TensorView::contiguous(nullptr, {64, 1000}, DType::float32)};
        for (std::size_t k = 1; k < loss.inputs().size(); ++k) shapes.push_back(TensorView::contiguous(nullptr, {1000}, DType::float32));
        const KernelBuild build = loss.compile_kernel(shapes, std::vector<std::string>{"x"}, "sm_90");
        int passes = 0;  // the emitter heads each walk "// pass N over the row"
        for (std::size_t at = build.source.find("// pass "); at != std::string::npos; at = build.source.find("// pass ", at + 1))
            ++passes;
        CHECK(passes == c.passes);
    }
    // The split gradients against central differences: a negation and a quotient by a value per row
    // in the product (L2 normalization scaled by a weight of one value per row, w [N, 1]); layer norm
    // with a weight along the row, its mean far from 0 against its spread (the split's two sums, of
    // w * g / s and of n * (x - m), large against their difference).
    const struct {
        const char* program;
        const char* x;
        const char* w;
    } checked[] = {
        {"-(x * w) / sqrt(sum(x * x, -1))", "3x5:normal", "3x1:uniform[0.5,1.5]"},
        {"m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5) * w", "3x5:normal[20,1]", "5:uniform[0.5,1.5]"},
    };
    for (const auto& c : checked) {
        CAPTURE(std::string(c.program));
        const Loss loss = compile(c.program);
        HostTensor x = generate(parse_generator(c.x), 7), w = generate(parse_generator(c.w), 8);
        check_map_gradients(loss, {&x, &w}, {"x", "w"}, generate(parse_generator("3x5:normal"), 9));
    }
}

TEST_CASE("a take's adjoint summed along the row is in closed form: no walk, the same gradient") {
    // x[y]'s adjoint is `onehot(y) ? a : 0`, a one value per row; where a row reduction of the take's
    // argument is differentiated (lp = x - logsumexp(x, -1) in focal loss and label smoothing), the
    // logsumexp's adjoint sums it along the row: `inrow(y) ? a : 0`, no walk. Before, focal's
    // gradient kernel walked each row three times and label smoothing's first walk summed it.
    struct Case {
        const char* program;
        int passes;         // walks of the gradient kernel over each row
        const char* dumped;  // in the dump of d/dx
    };
    const Case cases[] = {
        {"lp = (x - logsumexp(x, -1))[y]; mean(-(1 - exp(lp))^2 * lp)", 2, "- (inrow(y) ? _3 : 0) * exp(x - logsumexp(x, -1))"},
        {"lp = x - logsumexp(x, -1); mean(-0.9 * lp[y] - 0.1 * mean(lp, -1))", 2, "(inrow(y) ? "},
        // Rows whose class is ignored: the where's guard still applies after the sum.
        {"lp = x - logsumexp(x, -1); l = -0.9 * lp[y] - 0.1 * mean(lp, -1); sum(where(y != -100, l, 0)) / sum(y != -100)", 2,
         "inrow(y) ? "},
        {"mean(w * (x - logsumexp(x, -1))[y])", 2, "(inrow(y) ? "},  // times a weight of one per row, w [N, 1]
    };
    Options options;
    options.inputs = {"x", "y", "w"};
    const Shape x_shape{7, 5}, y_shape{7}, w_shape{7, 1};
    for (const auto& c : cases) {
        CAPTURE(std::string(c.program));
        const Loss loss = compile(c.program, options);
        const std::string dump = loss.derivatives(std::vector<std::string>{"x"});
        CHECK(dump.find(c.dumped) != std::string::npos);
        CHECK(dump.find("sum(-(onehot") == std::string::npos);
        CHECK(dump.find("sum((onehot") == std::string::npos);
        std::vector<TensorView> shapes{TensorView::contiguous(nullptr, x_shape, DType::float32),
                                       TensorView::contiguous(nullptr, y_shape, DType::int64)};
        if (loss.inputs().size() > 2) shapes.push_back(TensorView::contiguous(nullptr, w_shape, DType::float32));
        const KernelBuild build = loss.compile_kernel(shapes, std::vector<std::string>{"x"}, "sm_90");
        int passes = 0;
        for (std::size_t at = build.source.find("// pass "); at != std::string::npos; at = build.source.find("// pass ", at + 1))
            ++passes;
        CHECK(passes == c.passes);
        CHECK(build.source.find("(i_y >= 0 && i_y < C)") != std::string::npos);

        // Against central differences of the forward reference. Ignored rows (-100) get 0. Unguarded,
        // a class out of the row (7, -1) makes the loss nan (x[7] is nan); its row's gradient stays
        // finite, as the walk's sum of zeros left it (inrow(y) keeps out the take's nan adjoint), and
        // the other rows' gradients are those of the loss with valid classes there (the mean still
        // divides by all seven rows).
        const bool guarded = std::string(c.program).find("-100") != std::string::npos;
        const std::vector<std::int64_t> given = guarded ? std::vector<std::int64_t>{2, 0, 4, -100, 3, 1, -100}
                                                        : std::vector<std::int64_t>{2, 0, 4, 1, 3, 7, -1};
        std::vector<std::int64_t> y = given;
        std::vector<double> x(static_cast<std::size_t>(element_count(x_shape)));
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(1.7 * static_cast<double>(i) + 0.3);
        std::vector<double> w{0.5, 1.5, 2.0, 0.75, 1.25, 1.0, 0.25};
        const auto views = [&] {
            std::vector<TensorView> v{TensorView::contiguous(x.data(), x_shape, DType::float64),
                                      TensorView::contiguous(y.data(), y_shape, DType::int64)};
            if (loss.inputs().size() > 2) v.push_back(TensorView::contiguous(w.data(), w_shape, DType::float64));
            return v;
        };
        const auto grad = loss.reference_grad(views(), std::vector<std::string>{"x"}, 1.0)[0].values;
        for (auto& v : y)
            if (!guarded && (v < 0 || v >= 5)) v = 1;
        for (std::size_t i = 0; i < x.size(); ++i) {
            CAPTURE(i);
            const std::int64_t row_class = given[i / 5];
            if (!guarded && (row_class < 0 || row_class >= 5)) {
                CHECK(std::isfinite(grad[i]));
                continue;
            }
            if (guarded && row_class < 0) CHECK(grad[i] == 0.0);
            CHECK(grad[i] == doctest::Approx(reference_difference(loss, views, x, i)).epsilon(1e-7));
        }
    }
}

TEST_CASE("class weights w[y]: each row's one value added at its class, as central differences say") {
    // The derivative of an input read only through takes with one index has a per-row form
    // (Derivative::scatters): the CPU reference adds it at the row's class, as the GPU's scatter
    // kernels do; checked here against central differences of the forward reference. An input also
    // read otherwise, or through two indices, keeps the one-hot form, which the GPU refuses.
    struct Case {
        const char* program;
        Shape x, y, w;
        bool scatters;
    };
    const Case cases[] = {
        {"mean(w[y] * (logsumexp(x, -1) - x[y]))", {6, 4}, {6}, {4}, true},
        {"l = logsumexp(x, -1) - x[y]; sum(w[y] * l) / sum(w[y])", {6, 4}, {6}, {4}, true},
        {"l = logsumexp(x, -1) - x[y]; sum(where(y != -100, w[y] * l, 0)) / sum(where(y != -100, w[y], 0))",
         {6, 4}, {6}, {4}, true},
        {"mean(w[y] * (logsumexp(x, 1) - x[y]))", {2, 4, 3}, {2, 3}, {4, 1}, true},  // K-dimensional: classes on dim 1
        {"sum(w[y] * w[y] * x[y]) + mean(where(x[y] > 0, exp(w[y]), 0))", {6, 4}, {6}, {4}, true},
        {"mean(w[y] * x[y]) + sum(sum(w * x, -1))", {6, 4}, {6}, {4}, false},  // w also along the row
        {"v = w; mean(v[y] * x[y])", {6, 4}, {6}, {4}, false},                   // a binding of w: not w itself
    };
    const std::vector<std::int64_t> classes{2, 0, 3, 2, -100, 1, 0, 3, 3, 1, 2, 0};  // repeats, one ignored
    for (const auto& c : cases) {
        CAPTURE(std::string(c.program));
        Options options;
        options.inputs = {"x", "y", "w"};
        const Loss loss = compile(c.program, options);
        std::vector<double> x(static_cast<std::size_t>(element_count(c.x)));
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(1.7 * static_cast<double>(i) + 0.3);
        std::vector<std::int64_t> y(classes.begin(), classes.begin() + element_count(c.y));
        const bool ignores = std::string(c.program).find("-100") != std::string::npos;
        for (auto& v : y)
            if (v < 0 && !ignores) v = 1;
        std::vector<double> w(static_cast<std::size_t>(element_count(c.w)));
        for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.5 + 0.25 * static_cast<double>(i);
        const auto views = [&] {
            return std::vector<TensorView>{TensorView::contiguous(x.data(), c.x, DType::float64),
                                           TensorView::contiguous(y.data(), c.y, DType::int64),
                                           TensorView::contiguous(w.data(), c.w, DType::float64)};
        };
        const auto grads = loss.reference_grad(views(), std::vector<std::string>{"w", "x"}, 1.0);
        for (std::size_t i = 0; i < w.size(); ++i) {
            CAPTURE(i);
            CHECK(grads[0].values[i] == doctest::Approx(reference_difference(loss, views, w, i)).epsilon(1e-7));
        }
        // The per-row form where it exists, and the GPU's kernel for it (compiled, no GPU needed).
        const std::vector<TensorView> shapes{TensorView::contiguous(nullptr, c.x, DType::float32),
                                             TensorView::contiguous(nullptr, c.y, DType::int64),
                                             TensorView::contiguous(nullptr, c.w, DType::float32)};
        const std::vector<std::string> wrt{"x", "w"};
        if (c.scatters) {
            const KernelBuild build = loss.compile_kernel(shapes, wrt, "sm_90");
            CHECK(build.image_bytes > 0);
            CHECK(build.source.find("gradients per row [0 2]") != std::string::npos);
            CHECK(build.source.find("lj::store_scattered(grads.ptr[1], row, i_y,") != std::string::npos);
        } else {
            CHECK_THROWS_WITH_AS(loss.cuda_source(shapes, wrt), doctest::Contains("the gradient of 'w' sums over a broadcast"),
                                 UnsupportedError);
        }
    }
}

}  // TEST_SUITE
