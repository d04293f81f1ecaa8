// differentiate: every operator and function against central finite differences in float64, the
// non-smooth conventions at their kinks (PyTorch's autograd), the reference losses' gradients
// (broadcast inputs included), simplification and common-subexpression elimination, and dumps.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "lossjit/host.hpp"
#include "lossjit/lossjit.hpp"
#include "paths.hpp"
#include "pipeline.hpp"
#include "simplify.hpp"

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

}  // namespace

TEST_SUITE("differentiate") {

TEST_CASE("every operator and function matches central differences away from its kinks") {
    struct Row {
        const char* text;
        double lo, hi;    // x
        double ylo, yhi;  // y and z
    };
    const Row table[] = {
        {"-x", -3, 3, -3, 3}, {"x + y", -3, 3, -3, 3}, {"x - y", -3, 3, -3, 3}, {"x * y", -3, 3, -3, 3},
        {"x / y", -3, 3, 0.5, 3}, {"x / y", -3, 3, -3, -0.5}, {"x % y", -5, 5, 0.5, 2}, {"x % y", -5, 5, -2, -0.5},
        {"x ^ y", 0.2, 3, -2, 2}, {"pow(x, y)", 0.2, 3, -2, 2}, {"y ^ x", -2, 2, 0.2, 3}, {"x ^ 2", -3, 3, 0, 1},
        {"x ^ 3", -3, 3, 0, 1}, {"x ^ 0.5", 0.1, 4, 0, 1}, {"x ^ -0.5", 0.1, 4, 0, 1}, {"x ^ -1", 0.3, 4, 0, 1},
        {"x ^ -2", -4, -0.3, 0, 1}, {"x ^ 2.5", 0.1, 3, 0, 1}, {"x ^ 0", -3, 3, 0, 1}, {"2 ^ x", -3, 3, 0, 1},
        {"x < y", -3, 3, -3, 3}, {"x <= y", -3, 3, -3, 3}, {"x > y", -3, 3, -3, 3}, {"x >= y", -3, 3, -3, 3},
        {"x == y", -3, 3, -3, 3}, {"x != y", -3, 3, -3, 3}, {"x && y", -3, 3, -3, 3}, {"x || y", -3, 3, -3, 3},
        {"!x", -3, 3, 0, 1}, {"x > y ? x * z : y * z", -3, 3, -3, 3}, {"where(x > y, sin(x), cos(y) * z)", -3, 3, -3, 3},
        {"x ? y : z", -3, 3, -3, 3},
        {"abs(x)", -3, 3, 0, 1}, {"sign(x)", -3, 3, 0, 1}, {"sqrt(x)", 0.1, 4, 0, 1}, {"rsqrt(x)", 0.1, 4, 0, 1},
        {"exp(x)", -3, 3, 0, 1}, {"exp2(x)", -3, 3, 0, 1}, {"expm1(x)", -3, 3, 0, 1}, {"log(x)", 0.1, 5, 0, 1},
        {"log2(x)", 0.1, 5, 0, 1}, {"log10(x)", 0.1, 5, 0, 1}, {"log1p(x)", -0.9, 5, 0, 1}, {"sin(x)", -3, 3, 0, 1},
        {"cos(x)", -3, 3, 0, 1}, {"tan(x)", -1.2, 1.2, 0, 1}, {"tanh(x)", -3, 3, 0, 1}, {"sigmoid(x)", -6, 6, 0, 1},
        {"softplus(x)", -30, 30, 0, 1}, {"relu(x)", -3, 3, 0, 1}, {"erf(x)", -3, 3, 0, 1}, {"erfc(x)", -3, 3, 0, 1},
        {"floor(x)", -3, 3, 0, 1}, {"ceil(x)", -3, 3, 0, 1}, {"round(x)", -3, 3, 0, 1}, {"trunc(x)", -3, 3, 0, 1},
        {"isnan(x)", -3, 3, 0, 1}, {"isinf(x)", -3, 3, 0, 1}, {"min(x, y)", -3, 3, -3, 3}, {"max(x, y)", -3, 3, -3, 3},
        {"min(x, y, z)", -3, 3, -3, 3}, {"max(z, x, y)", -3, 3, -3, 3}, {"clamp(x, y, z)", -3, 3, -2, 2},
        {"clamp(x, -1, 1)", -3, 3, 0, 1}, {"xlogy(x, y)", -3, 3, 0.1, 4}, {"xlogy(x, x)", 0.1, 3, 0, 1},
        {"d = x - y; d * d + sin(d) * z", -3, 3, -3, 3}, {"param k = 2.5; k * x ^ k + k", 0.1, 3, 0, 1},
        {"sigmoid(x) * log1p(y ^ 2) / (1 + z ^ 2)", -3, 3, -3, 3}, {"softplus(x * y) - relu(y - z)", -3, 3, -3, 3},
        {"exp(-x) * erf(y) + x * tanh(x) - rsqrt(z * z + 1)", -3, 3, -3, 3},
        {"a = x * y; b = a + z; a * b - b / (1 + a * a)", -2, 2, -2, 2},
    };
    std::mt19937_64 random(4);
    for (const auto& row : table) {
        const std::string text = row.text;
        CAPTURE(text);
        const auto program = checked(row.text);
        const auto grad = differentiate(program, all_slots(program));
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
        const auto grad = differentiate(program, all_slots(program));
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

}  // TEST_SUITE
