#include "lang/builtins.hpp"

#include "ir/program.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include <boost/math/special_functions/digamma.hpp>
#include <boost/math/special_functions/trigamma.hpp>

#include "util/numeric.hpp"
#include "lj_div_cuh.hpp"  // generated from templates/lj_div.cuh (src/CMakeLists.txt)
#include "lj_centered_cuh.hpp"  // generated from templates/lj_centered.cuh (src/CMakeLists.txt)
#include "lj_log_cuh.hpp"  // generated from templates/lj_log.cuh (src/CMakeLists.txt)
#include "lossjit/errors.hpp"

namespace lossjit {
namespace {

constexpr ValueType F = ValueType::Float;
constexpr ValueType B = ValueType::Bool;
constexpr Associativity L = Associativity::Left;
constexpr Associativity R = Associativity::Right;
constexpr Cost Cheap = Cost::Cheap;
constexpr Cost Trans = Cost::Transcendental;
constexpr std::array<Builtin, 2> kNoNeeds{Builtin::Count_, Builtin::Count_};

constexpr double truth(double x) { return x != 0.0; }  // nan counts as true, as in C and torch
constexpr double from_bool(bool b) { return b ? 1.0 : 0.0; }

// torch.maximum / torch.minimum on CUDA: a nan argument wins; -0 orders below +0 (max(-0, 0) is +0
// in either order, min(-0, 0) is -0), as CUDA's fmaxf / fminf do. Measured against PyTorch.
double nan_max(double a, double b) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == b) return std::signbit(a) ? b : a;
    return a < b ? b : a;
}
double nan_min(double a, double b) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a == b) return std::signbit(a) ? a : b;
    return b < a ? b : a;
}

// Helpers with a `lj_` prefix exist where CUDA's own function differs from PyTorch (fmax drops
// NaN, fmodf is not Python's %, ...).
constexpr std::string_view kModHelper =
    "template <class T> __device__ __forceinline__ T lj_mod(T a, T b) {  // Python / torch.remainder semantics\n"
    "    T r = fmod(a, b);\n"
    "    if (r != T(0) && ((b < T(0)) != (r < T(0)))) r += b;\n"
    "    return r;\n"
    "}\n";
// Python's // and torch.floor_divide (c10's div_floor_floating): the quotient from fmod, so that
// x - y * floordiv(x, y) is x % y; not floor(x / y), which rounds first (1 // 0.1 is 9, floor(1 / 0.1)
// 10) and is inf where x is (inf // 2 is nan).
template <class T>
T floor_divide(T a, T b) {
    if (b == T(0)) return a / b;
    const T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
    if (div == T(0)) return std::copysign(T(0), a / b);
    T q = std::floor(div);
    if (div - q > T(0.5)) q += T(1);
    return q;
}
constexpr std::string_view kFloorDivHelper =
    "template <class T> __device__ __forceinline__ T lj_floordiv(T a, T b) {  // Python // (torch.floor_divide)\n"
    "    if (b == T(0)) return a / b;\n"
    "    const T mod = fmod(a, b);\n"
    "    T div = (a - mod) / b;\n"
    "    if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);\n"
    "    if (div == T(0)) return copysign(T(0), a / b);\n"
    "    T q = floor(div);\n"
    "    if (div - q > T(0.5)) q += T(1);\n"
    "    return q;\n"
    "}\n";
// pow prints small constant exponents as the exact forms torch uses (codegen: the CUDA printer).
constexpr std::string_view kPowHelper =
    "template <class T> __device__ __forceinline__ T lj_square(T x) { return x * x; }\n"
    "template <class T> __device__ __forceinline__ T lj_cube(T x) { return x * x * x; }\n";
// As torch.maximum / torch.minimum: a nan argument wins (fmaxf alone would drop it); otherwise
// fmaxf / fminf, which order -0 below +0 (max(-0, 0) is +0 in either order, min gives -0).
// On sm_80+ a float32 max / min is one instruction, max.NaN / min.NaN (a nan side gives the canonical
// nan), where the checks above take three: in hinge or relu over bfloat16 a sixth of the
// instructions per element.
constexpr std::string_view kMaxHelper =
    "template <class T> __device__ __forceinline__ T lj_max(T a, T b) { return a != a ? a : (b != b ? b : fmax(a, b)); }\n"
    "#if __CUDA_ARCH__ >= 800\n"
    "template <> __device__ __forceinline__ float lj_max<float>(float a, float b) {\n"
    "    float r;\n"
    "    asm(\"max.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b));\n"
    "    return r;\n"
    "}\n"
    "#endif\n";
constexpr std::string_view kMinHelper =
    "template <class T> __device__ __forceinline__ T lj_min(T a, T b) { return a != a ? a : (b != b ? b : fmin(a, b)); }\n"
    "#if __CUDA_ARCH__ >= 800\n"
    "template <> __device__ __forceinline__ float lj_min<float>(float a, float b) {\n"
    "    float r;\n"
    "    asm(\"min.NaN.f32 %0, %1, %2;\" : \"=f\"(r) : \"f\"(a), \"f\"(b));\n"
    "    return r;\n"
    "}\n"
    "#endif\n";
// log: lossjit's own float32 logarithm (templates/lj_log.cuh: at most 0.95 ulp, the special cases
// exact; CUDA's log for float64 and under fast math), which xlogy uses too. xlogy selects rather
// than branches (the log of every element is computed; no divergent branch per element): 0 where
// x == 0 unless y is nan, where x * log(y) is nan.
constexpr std::string_view kLogHelper = templates::lj_log_cuh;
// Division by a constant: ir/print.cpp prints lj_div_by (templates/lj_div.cuh) for it.
constexpr std::string_view kDivHelper = templates::lj_div_cuh;
// Its common path (lj_log_common) flags a rare y only where the log is used: x == 0 selects 0 for
// any y but nan, so one-hot targets (xlogy(t, t), t mostly 0) stay on the common path.
constexpr std::string_view kXlogyHelper =
    "template <class T> __device__ __forceinline__ T lj_xlogy(T x, T y) {\n"
    "    const T l = x * lj_log(y);\n"
    "    return x == T(0) && y == y ? T(0) : l;\n"
    "}\n"
    "template <class T> __device__ __forceinline__ T lj_xlogy_common(T x, T y, bool& rare) {\n"
    "    const bool zero = x == T(0) && y == y;\n"
    "    bool rare_y = false;\n"
    "    const T l = x * lj_log_common(y, rare_y);\n"
    "    rare |= rare_y & !zero;\n"
    "    return zero ? T(0) : l;\n"
    "}\n";
constexpr std::array<Builtin, 2> kNeedsLog{Builtin::Log, Builtin::Count_};

// digamma and trigamma: CUDA has neither. Reflection below 0 (0.5 for trigamma), the recurrence up
// to 6 (16 in float64), then the asymptotic series in 1/x^2 (Abramowitz & Stegun 6.3.18 and
// 6.4.12), whose next term is below 1e-10 there (1e-15 in float64). The reflection's tan / sin run in double on the exact fraction: in
// float the argument pi * x loses the bits that decide the result near the poles.
constexpr std::string_view kDigammaHelper =
    "template <class T> __device__ T lj_digamma(T x) {\n"
    "    if (x == T(0)) return copysign((T)__int_as_float(0x7f800000), -x);  // torch: -inf at +0\n"
    "    T result = T(0);\n"
    "    if (x < T(0)) {\n"
    "        if (x == trunc(x)) return (T)__int_as_float(0x7fffffff);  // the poles, and -inf\n"
    "        const double fraction = (double)x - trunc((double)x);\n"
    "        result = (T)(-3.14159265358979323846 / tan(3.14159265358979323846 * fraction));\n"
    "        x = T(1) - x;\n"
    "    }\n"
    "    for (const T start = sizeof(T) == 8 ? T(16) : T(6); x < start; x += T(1)) result -= T(1) / x;\n"
    "    const T z = T(1) / (x * x);\n"
    "    const T series = z * (T(1) / 12 - z * (T(1) / 120 - z * (T(1) / 252 - z * (T(1) / 240 - z * (T(1) / 132)))));\n"
    "    return result + log(x) - T(0.5) / x - series;\n"
    "}\n";
constexpr std::string_view kTrigammaHelper =
    "template <class T> __device__ T lj_trigamma(T x) {\n"
    "    T sign = T(1), result = T(0);\n"
    "    if (x < T(0.5)) {  // trigamma(x) = pi^2 / sin^2(pi x) - trigamma(1 - x): inf at the poles\n"
    "        const double s = sinpi((double)x);\n"
    "        result = (T)(-9.86960440108935861883 / (s * s));\n"
    "        sign = T(-1);\n"
    "        x = T(1) - x;\n"
    "    }\n"
    "    for (const T start = sizeof(T) == 8 ? T(16) : T(6); x < start; x += T(1)) result += T(1) / (x * x);\n"
    "    const T z = T(1) / (x * x);\n"
    "    result += (T(1) + T(0.5) / x + z * (T(1) / 6 - z * (T(1) / 30 - z * (T(1) / 42 - z * (T(1) / 30))))) / x;\n"
    "    return sign * result;\n"
    "}\n";

// The float64 meanings of lgamma, digamma and trigamma, with torch's values at the poles. They
// never throw: the constant folder evaluates them at check time, on any constant.
using QuietPolicy = boost::math::policies::policy<
    boost::math::policies::pole_error<boost::math::policies::ignore_error>,
    boost::math::policies::domain_error<boost::math::policies::ignore_error>,
    boost::math::policies::overflow_error<boost::math::policies::ignore_error>,
    boost::math::policies::evaluation_error<boost::math::policies::ignore_error>>;
double log_gamma(double x) {
    int sign = 0;
    return ::lgamma_r(x, &sign);  // std::lgamma writes the global signgam: a race between threads
}
double digamma(double x) {
    if (x == 0.0) return std::copysign(std::numeric_limits<double>::infinity(), -x);
    if (std::isnan(x) || (x < 0.0 && x == std::trunc(x))) return std::numeric_limits<double>::quiet_NaN();
    if (std::isinf(x)) return x;
    return boost::math::digamma(x, QuietPolicy());
}
double trigamma(double x) {
    if (std::isnan(x)) return x;
    // -inf first: trunc(-inf) is -inf, but it is no pole (torch, and the kernels' reflection: nan).
    if (std::isinf(x)) return x > 0 ? 0.0 : std::numeric_limits<double>::quiet_NaN();
    if (x <= 0.0 && x == std::trunc(x)) return std::numeric_limits<double>::infinity();
    return boost::math::trigamma(x, QuietPolicy());
}

// One row per builtin, in enum order. The columns: id, name, operator, precedence, associativity,
// arity, variadic, argument types, result, CUDA, CUDA helper, helpers it needs, float64 meaning,
// cost, gradient kind, derivative per argument, summary.
constexpr std::array<BuiltinInfo, static_cast<std::size_t>(Builtin::Count_)> kTable{{
    {Builtin::Neg, "", "-", 8, R, 1, false, "f", F, "(-{0})", "", kNoNeeds,
     [](double a, double, double) { return -a; }, Cheap, Gradient::Formula, {"-g"}, "negation"},
    {Builtin::Not, "", "!", 8, R, 1, false, "b", B, "(!{0})", "", kNoNeeds,
     [](double a, double, double) { return from_bool(!truth(a)); }, Cheap, Gradient::None, {}, "logical not: 1 where x == 0"},
    {Builtin::Add, "", "+", 6, L, 2, false, "ff", F, "({0} + {1})", "", kNoNeeds,
     [](double a, double b, double) { return a + b; }, Cheap, Gradient::Formula, {"g", "g"}, "addition"},
    {Builtin::Sub, "", "-", 6, L, 2, false, "ff", F, "({0} - {1})", "", kNoNeeds,
     [](double a, double b, double) { return a - b; }, Cheap, Gradient::Formula, {"g", "-g"}, "subtraction"},
    {Builtin::Mul, "", "*", 7, L, 2, false, "ff", F, "({0} * {1})", "", kNoNeeds,
     [](double a, double b, double) { return a * b; }, Cheap, Gradient::Formula, {"g * y", "g * x"}, "multiplication"},
    {Builtin::Div, "", "/", 7, L, 2, false, "ff", F, "({0} / {1})", kDivHelper, kNoNeeds,
     [](double a, double b, double) { return a / b; }, Cheap, Gradient::Formula,
     {"g / y", "-(g * (self / y))"},  // -grad * ((x / y) / y)
     "division (IEEE: x/0 is ±inf or nan)"},
    {Builtin::Mod, "", "%", 7, L, 2, false, "ff", F, "lj_mod({0}, {1})", kModHelper, kNoNeeds,
     [](double a, double b, double) {
         double r = std::fmod(a, b);
         if (r != 0.0 && ((b < 0.0) != (r < 0.0))) r += b;
         return r;
     },
     Cheap, Gradient::Formula,
     {"g", "-(g * floordiv(x, y))"},  // torch.remainder: other gets -grad * floor_divide(self, other)
     "remainder with the sign of the divisor (torch.remainder, Python %)"},
    // pow's derivative depends on whether the exponent is a constant (torch's pow(Tensor, Scalar)).
    {Builtin::Pow, "pow", "^", 9, R, 2, false, "ff", F, "pow({0}, {1})", kPowHelper, kNoNeeds,
     [](double a, double b, double) { return std::pow(a, b); }, Trans, Gradient::Rule, {},
     "power, right-associative"},
    {Builtin::Lt, "", "<", 5, L, 2, false, "ff", B, "({0} < {1})", "", kNoNeeds,
     [](double a, double b, double) { return from_bool(a < b); }, Cheap, Gradient::None, {}, "less than"},
    {Builtin::Le, "", "<=", 5, L, 2, false, "ff", B, "({0} <= {1})", "", kNoNeeds,
     [](double a, double b, double) { return from_bool(a <= b); }, Cheap, Gradient::None, {}, "less or equal"},
    {Builtin::Gt, "", ">", 5, L, 2, false, "ff", B, "({0} > {1})", "", kNoNeeds,
     [](double a, double b, double) { return from_bool(a > b); }, Cheap, Gradient::None, {}, "greater than"},
    {Builtin::Ge, "", ">=", 5, L, 2, false, "ff", B, "({0} >= {1})", "", kNoNeeds,
     [](double a, double b, double) { return from_bool(a >= b); }, Cheap, Gradient::None, {}, "greater or equal"},
    {Builtin::Eq, "", "==", 4, L, 2, false, "ff", B, "({0} == {1})", "", kNoNeeds,
     [](double a, double b, double) { return from_bool(a == b); }, Cheap, Gradient::None, {}, "equal"},
    {Builtin::Ne, "", "!=", 4, L, 2, false, "ff", B, "({0} != {1})", "", kNoNeeds,
     [](double a, double b, double) { return from_bool(a != b); }, Cheap, Gradient::None, {},
     "not equal (true when either side is nan)"},
    {Builtin::And, "", "&&", 3, L, 2, false, "bb", B, "({0} && {1})", "", kNoNeeds,
     [](double a, double b, double) { return from_bool(truth(a) && truth(b)); }, Cheap, Gradient::None, {}, "logical and"},
    {Builtin::Or, "", "||", 2, L, 2, false, "bb", B, "({0} || {1})", "", kNoNeeds,
     [](double a, double b, double) { return from_bool(truth(a) || truth(b)); }, Cheap, Gradient::None, {}, "logical or"},
    {Builtin::Select, "where", "?:", 1, R, 3, false, "bff", F, "({0} ? {1} : {2})", "", kNoNeeds,
     // The selected side alone gets the gradient, guarded: ir/differentiate.cpp, backward_select.
     [](double a, double b, double c) { return truth(a) ? b : c; }, Cheap, Gradient::Rule, {},
     "c ? a : b, where(c, a, b): a where c != 0, else b"},
    {Builtin::Abs, "abs", "", 0, L, 1, false, "f", F, "fabs({0})", "", kNoNeeds,
     [](double a, double, double) { return std::fabs(a); }, Cheap, Gradient::Formula, {"g * sign(x)"}, "absolute value"},
    {Builtin::Sign, "sign", "", 0, L, 1, false, "f", F, "lj_sign({0})",
     "template <class T> __device__ __forceinline__ T lj_sign(T x) { return (T)((T(0) < x) - (x < T(0))); }\n", kNoNeeds,
     [](double a, double, double) { return static_cast<double>((0.0 < a) - (a < 0.0)); }, Cheap, Gradient::None, {},
     "-1, 0 or 1 (0 for nan, like torch.sign)"},
    {Builtin::Sqrt, "sqrt", "", 0, L, 1, false, "f", F, "sqrt({0})", "", kNoNeeds,
     [](double a, double, double) { return std::sqrt(a); }, Cheap, Gradient::Formula, {"g / (2 * self)"}, "square root"},
    {Builtin::Rsqrt, "rsqrt", "", 0, L, 1, false, "f", F, "rsqrt({0})", "", kNoNeeds,
     [](double a, double, double) { return 1.0 / std::sqrt(a); }, Cheap, Gradient::Formula, {"-0.5 * g * self ^ 3"},
     "1 / sqrt(x)"},
    {Builtin::Exp, "exp", "", 0, L, 1, false, "f", F, "exp({0})", "", kNoNeeds,
     [](double a, double, double) { return std::exp(a); }, Trans, Gradient::Formula, {"g * self"}, "e^x"},
    {Builtin::Exp2, "exp2", "", 0, L, 1, false, "f", F, "exp2({0})", "", kNoNeeds,
     [](double a, double, double) { return std::exp2(a); }, Trans, Gradient::Formula, {"g * self * log(2)"}, "2^x"},
    {Builtin::Expm1, "expm1", "", 0, L, 1, false, "f", F, "expm1({0})", "", kNoNeeds,
     [](double a, double, double) { return std::expm1(a); }, Trans, Gradient::Formula, {"g * (self + 1)"},
     "e^x - 1, accurate near 0"},
    {Builtin::Log, "log", "", 0, L, 1, false, "f", F, "lj_log({0})", kLogHelper, kNoNeeds,
     [](double a, double, double) { return std::log(a); }, Trans, Gradient::Formula, {"g / x"},
     "natural logarithm (nan below 0, -inf at 0)", "lj_log_common({0}, rare_)"},
    {Builtin::Log2, "log2", "", 0, L, 1, false, "f", F, "log2({0})", "", kNoNeeds,
     [](double a, double, double) { return std::log2(a); }, Trans, Gradient::Formula, {"g / (x * log(2))"},
     "base-2 logarithm"},
    {Builtin::Log10, "log10", "", 0, L, 1, false, "f", F, "log10({0})", "", kNoNeeds,
     [](double a, double, double) { return std::log10(a); }, Trans, Gradient::Formula, {"g / (x * log(10))"},
     "base-10 logarithm"},
    {Builtin::Log1p, "log1p", "", 0, L, 1, false, "f", F, "log1p({0})", "", kNoNeeds,
     [](double a, double, double) { return std::log1p(a); }, Trans, Gradient::Formula, {"g / (x + 1)"},
     "log(1 + x), accurate near 0"},
    {Builtin::Sin, "sin", "", 0, L, 1, false, "f", F, "sin({0})", "", kNoNeeds,
     [](double a, double, double) { return std::sin(a); }, Trans, Gradient::Formula, {"g * cos(x)"}, "sine"},
    {Builtin::Cos, "cos", "", 0, L, 1, false, "f", F, "cos({0})", "", kNoNeeds,
     [](double a, double, double) { return std::cos(a); }, Trans, Gradient::Formula, {"g * -sin(x)"}, "cosine"},
    {Builtin::Tan, "tan", "", 0, L, 1, false, "f", F, "tan({0})", "", kNoNeeds,
     [](double a, double, double) { return std::tan(a); }, Trans, Gradient::Formula, {"g * (1 + self ^ 2)"}, "tangent"},
    {Builtin::Tanh, "tanh", "", 0, L, 1, false, "f", F, "tanh({0})", "", kNoNeeds,
     [](double a, double, double) { return std::tanh(a); }, Trans, Gradient::Formula, {"g * (1 - self * self)"},
     "hyperbolic tangent"},
    {Builtin::Sigmoid, "sigmoid", "", 0, L, 1, false, "f", F, "lj_sigmoid({0})",
     "template <class T> __device__ __forceinline__ T lj_sigmoid(T x) { return T(1) / (T(1) + exp(-x)); }\n", kNoNeeds,
     [](double a, double, double) { return 1.0 / (1.0 + std::exp(-a)); }, Trans, Gradient::Formula,
     {"g * (1 - self) * self"}, "1 / (1 + e^-x)"},
    {Builtin::Softplus, "softplus", "", 0, L, 1, false, "f", F, "lj_softplus({0})",
     "template <class T> __device__ __forceinline__ T lj_softplus(T x) { return x > T(20) ? x : log1p(exp(x)); }\n", kNoNeeds,
     [](double a, double, double) { return a > 20.0 ? a : std::log1p(std::exp(a)); }, Trans, Gradient::Formula,
     {"x > 20 ? g : g * exp(x) / (exp(x) + 1)"},  // beta 1, threshold 20: exactly grad above it
     "log(1 + e^x); x itself above 20 (torch's threshold)"},
    {Builtin::Relu, "relu", "", 0, L, 1, false, "f", F, "lj_relu({0})",
     "template <class T> __device__ __forceinline__ T lj_relu(T x) { return x != x ? x : (x > T(0) ? x : T(0)); }\n", kNoNeeds,
     [](double a, double, double) { return std::isnan(a) ? a : (a > 0.0 ? a : 0.0); }, Cheap, Gradient::Formula,
     {"self <= 0 ? 0 : g"},  // threshold_backward(grad, result, 0): nothing where result <= 0
     "max(x, 0), nan stays nan"},
    {Builtin::Erf, "erf", "", 0, L, 1, false, "f", F, "erf({0})", "", kNoNeeds,
     [](double a, double, double) { return std::erf(a); }, Trans, Gradient::Formula,
     {"2 / sqrt(pi) * exp(-x ^ 2) * g"}, "error function"},
    {Builtin::Erfc, "erfc", "", 0, L, 1, false, "f", F, "erfc({0})", "", kNoNeeds,
     [](double a, double, double) { return std::erfc(a); }, Trans, Gradient::Formula,
     {"-2 / sqrt(pi) * exp(-x ^ 2) * g"}, "1 - erf(x)"},
    {Builtin::Floor, "floor", "", 0, L, 1, false, "f", F, "floor({0})", "", kNoNeeds,
     [](double a, double, double) { return std::floor(a); }, Cheap, Gradient::None, {}, "round down"},
    {Builtin::Ceil, "ceil", "", 0, L, 1, false, "f", F, "ceil({0})", "", kNoNeeds,
     [](double a, double, double) { return std::ceil(a); }, Cheap, Gradient::None, {}, "round up"},
    {Builtin::Round, "round", "", 0, L, 1, false, "f", F, "rint({0})", "", kNoNeeds,
     [](double a, double, double) { return std::nearbyint(a); }, Cheap, Gradient::None, {},
     "round half to even (torch.round)"},
    {Builtin::Trunc, "trunc", "", 0, L, 1, false, "f", F, "trunc({0})", "", kNoNeeds,
     [](double a, double, double) { return std::trunc(a); }, Cheap, Gradient::None, {}, "round toward zero"},
    // min / max: torch.maximum / torch.minimum give half to each side of a tie; a nan side takes it
    // all. A rule, not a formula: the tie term is shared between the two sides.
    {Builtin::Min, "min", "", 0, L, 2, true, "ff", F, "lj_min({0}, {1})", kMinHelper, kNoNeeds,
     [](double a, double b, double) { return nan_min(a, b); }, Cheap, Gradient::Rule, {},
     "smallest argument (2 or more); nan if any is nan"},
    {Builtin::Max, "max", "", 0, L, 2, true, "ff", F, "lj_max({0}, {1})", kMaxHelper, kNoNeeds,
     [](double a, double b, double) { return nan_max(a, b); }, Cheap, Gradient::Rule, {},
     "largest argument (2 or more); nan if any is nan"},
    {Builtin::Clamp, "clamp", "", 0, L, 3, false, "fff", F, "lj_clamp({0}, {1}, {2})",
     "template <class T> __device__ __forceinline__ T lj_clamp(T x, T lo, T hi) { return lj_min(lj_max(x, lo), hi); }\n",
     {Builtin::Min, Builtin::Max},
     [](double a, double b, double c) { return nan_min(nan_max(a, b), c); }, Cheap, Gradient::Formula,
     // clamp_backward and clamp_backward_min_max
     {"x >= y && x <= z ? g : 0", "x < y && y < z ? g : 0", "x > z || z < y ? g : 0"},
     "min(max(x, lo), hi); nan stays nan"},
    {Builtin::IsNan, "isnan", "", 0, L, 1, false, "f", B, "isnan({0})", "", kNoNeeds,
     [](double a, double, double) { return from_bool(std::isnan(a)); }, Cheap, Gradient::None, {}, "1 where x is nan"},
    {Builtin::IsInf, "isinf", "", 0, L, 1, false, "f", B, "isinf({0})", "", kNoNeeds,
     [](double a, double, double) { return from_bool(std::isinf(a)); }, Cheap, Gradient::None, {}, "1 where x is ±inf"},
    {Builtin::Xlogy, "xlogy", "", 0, L, 2, false, "ff", F, "lj_xlogy({0}, {1})", kXlogyHelper, kNeedsLog,
     [](double a, double b, double) {
         if (std::isnan(b)) return b;
         return a == 0.0 ? 0.0 : a * std::log(b);
     },
     Trans, Gradient::Formula, {"x == 0 && y <= 0 ? 0 : xlogy(g, y)", "g * x / y"},
     "x * log(y), 0 where x == 0 (unless y is nan)", "lj_xlogy_common({0}, {1}, rare_)"},
    {Builtin::Cosh, "cosh", "", 0, L, 1, false, "f", F, "cosh({0})", "", kNoNeeds,
     [](double a, double, double) { return std::cosh(a); }, Trans, Gradient::Formula, {"g * sinh(x)"},
     "hyperbolic cosine"},
    {Builtin::Sinh, "sinh", "", 0, L, 1, false, "f", F, "sinh({0})", "", kNoNeeds,
     [](double a, double, double) { return std::sinh(a); }, Trans, Gradient::Formula, {"g * cosh(x)"},
     "hyperbolic sine"},
    {Builtin::Asinh, "asinh", "", 0, L, 1, false, "f", F, "asinh({0})", "", kNoNeeds,
     [](double a, double, double) { return std::asinh(a); }, Trans, Gradient::Formula, {"g * rsqrt(x * x + 1)"},
     "inverse hyperbolic sine"},
    {Builtin::Acosh, "acosh", "", 0, L, 1, false, "f", F, "acosh({0})", "", kNoNeeds,
     [](double a, double, double) { return std::acosh(a); }, Trans, Gradient::Formula, {"g * rsqrt(x * x - 1)"},
     "inverse hyperbolic cosine (nan below 1)"},
    {Builtin::Atanh, "atanh", "", 0, L, 1, false, "f", F, "atanh({0})", "", kNoNeeds,
     [](double a, double, double) { return std::atanh(a); }, Trans, Gradient::Formula, {"g / (1 - x * x)"},
     "inverse hyperbolic tangent (±inf at ±1, nan beyond)"},
    {Builtin::Asin, "asin", "", 0, L, 1, false, "f", F, "asin({0})", "", kNoNeeds,
     [](double a, double, double) { return std::asin(a); }, Trans, Gradient::Formula, {"g * rsqrt(1 - x * x)"},
     "arc sine (nan beyond ±1)"},
    {Builtin::Acos, "acos", "", 0, L, 1, false, "f", F, "acos({0})", "", kNoNeeds,
     [](double a, double, double) { return std::acos(a); }, Trans, Gradient::Formula, {"-(g * rsqrt(1 - x * x))"},
     "arc cosine (nan beyond ±1)"},
    {Builtin::Atan, "atan", "", 0, L, 1, false, "f", F, "atan({0})", "", kNoNeeds,
     [](double a, double, double) { return std::atan(a); }, Trans, Gradient::Formula, {"g / (x * x + 1)"},
     "arc tangent"},
    {Builtin::Atan2, "atan2", "", 0, L, 2, false, "ff", F, "atan2({0}, {1})", "", kNoNeeds,
     [](double a, double b, double) { return std::atan2(a, b); }, Trans, Gradient::Formula,
     {"g * y / (x * x + y * y)", "-(g * x) / (x * x + y * y)"},  // atan2_backward
     "atan2(y, x): the angle of the point (x, y), in [-pi, pi]"},
    {Builtin::Hypot, "hypot", "", 0, L, 2, false, "ff", F, "hypot({0}, {1})", "", kNoNeeds,
     [](double a, double b, double) { return std::hypot(a, b); }, Trans, Gradient::Formula,
     {"g * x / self", "g * y / self"}, "sqrt(x^2 + y^2) without overflow"},
    {Builtin::Lgamma, "lgamma", "", 0, L, 1, false, "f", F, "lgamma({0})", "", kNoNeeds,
     [](double a, double, double) { return log_gamma(a); }, Trans, Gradient::Formula, {"g * digamma(x)"},
     "log |gamma(x)| (inf at 0 and the negative integers)"},
    {Builtin::Digamma, "digamma", "", 0, L, 1, false, "f", F, "lj_digamma({0})", kDigammaHelper, kNoNeeds,
     [](double a, double, double) { return digamma(a); }, Trans, Gradient::Formula, {"g * trigamma(x)"},
     "d/dx lgamma(x) (torch.digamma: -inf at +0, nan at the negative integers)"},
    {Builtin::Trigamma, "trigamma", "", 0, L, 1, false, "f", F, "lj_trigamma({0})", kTrigammaHelper, kNoNeeds,
     [](double a, double, double) { return trigamma(a); }, Trans, Gradient::Refused, {},
     "d/dx digamma(x) (torch.polygamma(1, x); inf at the poles); no gradient"},
    {Builtin::FloorDiv, "floordiv", "", 0, L, 2, false, "ff", F, "lj_floordiv({0}, {1})", kFloorDivHelper, kNoNeeds,
     [](double a, double b, double) { return floor_divide(a, b); }, Cheap, Gradient::None, {},
     "floor division as Python's // and torch.floor_divide (nan for an infinite x; x / 0 where y is 0)"},
    {Builtin::Detach, "detach", "", 0, L, 1, false, "f", F, "({0})", "", kNoNeeds,
     [](double a, double, double) { return a; }, Cheap, Gradient::Stopped, {},
     "x itself, but no gradient passes through it (torch's x.detach())"},
}};

constexpr bool table_is_in_enum_order() {
    for (std::size_t i = 0; i < kTable.size(); ++i)
        if (static_cast<std::size_t>(kTable[i].id) != i) return false;
    return true;
}
static_assert(table_is_in_enum_order(), "kTable rows must follow the Builtin enum");

// The emitter writes helpers in table order, so a helper's `needs` must come before it.
constexpr bool needs_come_first() {
    for (const auto& row : kTable)
        for (Builtin needed : row.needs)
            if (needed != Builtin::Count_ && needed >= row.id) return false;
    return true;
}
static_assert(needs_come_first(), "a row's helper may call only helpers of earlier rows");

struct Constant {
    std::string_view name;
    double value;
};
constexpr Constant kConstants[] = {
    {"pi", std::numbers::pi},
    {"inf", std::numeric_limits<double>::infinity()},
    {"nan", std::numeric_limits<double>::quiet_NaN()},
};

const std::vector<std::string_view>& names_of_functions() {
    static const std::vector<std::string_view> names = [] {
        std::vector<std::string_view> out;
        for (const auto& row : kTable)
            if (!row.name.empty()) out.push_back(row.name);
        return out;
    }();
    return names;
}

}  // namespace

namespace {
// The row accumulators (RowReductionInfo::cuda_helper). Each has add (one element and its column),
// combine (another thread's: commutative, so the butterfly leaves the same bits in every lane: a
// row's value is the same in all threads of its team, and the same every run) and shuffle_xor.
constexpr std::string_view kSumAcc =
    "namespace lj {\n"
    "struct SumAcc {  // float64, as whole-tensor sums: a row of 100k elements keeps its digits\n"
    "    double s = 0.0;\n"
    "    template <class T> __device__ __forceinline__ void add(T v, long long) { s += (double)v; }\n"
    "    __device__ __forceinline__ void combine(const SumAcc& o) { s += o.s; }\n"
    "    __device__ __forceinline__ SumAcc shuffle_xor(int o) const { SumAcc r; r.s = lj::shuffle_xor(s, o); return r; }\n"
    "};\n"
    "}  // namespace lj\n";
constexpr std::string_view kExtremeAcc =
    "namespace lj {\n"
    "template <class T, bool kMax>\n"
    "struct ExtremeAcc {  // amax / amin: nan wins, as torch.amax\n"
    "    T m = kMax ? -__int_as_float(0x7f800000) : __int_as_float(0x7f800000);\n"
    "    __device__ __forceinline__ void add(T v, long long = 0) {\n"
    "        if (m != m) return;\n"
    "        if (v != v || (kMax ? v > m : v < m)) m = v;\n"
    "    }\n"
    "    __device__ __forceinline__ void combine(const ExtremeAcc& o) { add(o.m); }\n"
    "    __device__ __forceinline__ ExtremeAcc shuffle_xor(int o) const { ExtremeAcc r; r.m = lj::shuffle_xor(m, o); return r; }\n"
    "};\n"
    "}  // namespace lj\n";
// logsumexp in one pass: the sum s of exp(x - m) over a reference m that moves up (rescaling s) only
// where a value lies more than kSlack above it. Following the maximum itself rescaled s in most groups
// at the start of a row, and in a warp some lane meets a new maximum in most of its groups (86% of
// them, round 86, H100, 16384 x 32768: the rescale was paid warp-wide); with the slack a lane rescales
// about once a row. Terms stay at most e^kSlack: far inside float's range for a tile's sum, and s in
// double keeps its digits. Equal infinite references add 1 instead of exp(m - m), so rows of +-inf
// give +-inf (not nan), as torch does. add_vec takes a group of values at once: one test against the
// reference, their exps summed in float and converted to double once (round 26, H100: cross-entropy
// 91.5% -> 96.2% of the read roofline); add_tile a whole tile's. A nan value is left out of a group's
// largest and reaches s; while m is +-inf a group goes through add(). A team merges these in two
// phases (kTwoPhase, Team::all_reduce): the lanes agree on the largest reference first (compares
// only), each rescales its s to it once, then the sums add: one exp a lane, not two a merge.
// An accumulator derived from this one must define its own add_vec and add_tile (add_group would
// otherwise take these and skip the derived state).
constexpr std::string_view kLogSumExpAcc =
    "namespace lj {\n"
    "template <class T>\n"
    "struct LogSumExpAcc {  // one pass: the sum s of exp(x - m), m at most kSlack below the maximum\n"
    "    static constexpr bool kAddsTiles = true;  // add_tile takes any values, whatever their columns\n"
    "    static constexpr bool kTwoPhase = true;\n"
    "    static constexpr T kSlack = 32;\n"
    "    T m = -__int_as_float(0x7f800000);\n"
    "    double s = 0.0;\n"
    "    __device__ __forceinline__ void add(T v, long long = 0) {\n"
    "        if (v > m) {\n"
    "            s = s * (double)exp(m - v) + 1.0;\n"
    "            m = v;\n"
    "        } else if (v == m) {\n"
    "            s += 1.0;  // not exp(m - m): rows of +-inf give +-inf, not nan, as torch\n"
    "        } else {\n"
    "            s += (double)exp(v - m);  // nan when v is nan: the row's result is nan\n"
    "        }\n"
    "    }\n"
    "    // A tile's values pairwise, padded to a power of 2 (unroll 3 makes 12).\n"
    "    __host__ __device__ static constexpr int pow2_at_least(int n) { return n <= 1 ? 1 : 2 * pow2_at_least((n + 1) / 2); }\n"
    "    // The larger of two, a nan left out (nan only if both are): fmax, one instruction (a test for nan,\n"
    "    // a select, a compare and a select took four a value, of about 16 a value in cross-entropy's\n"
    "    // first walk: H200 round 154's SASS).\n"
    "    __device__ __forceinline__ static T larger(T a, T b) {\n"
    "        if constexpr (sizeof(T) == 4) return fmaxf(a, b);\n"
    "        else return fmax(a, b);\n"
    "    }\n"
    "    // The largest of N values, nan left out (-inf if all are nan); pairwise for a tile: a chain of\n"
    "    // log2(N) compares, not N. Padding repeats v[0], which changes no largest.\n"
    "    template <int N>\n"
    "    __device__ __forceinline__ static T top_of(const T (&v)[N]) {\n"
    "        constexpr int P = pow2_at_least(N);\n"
    "        T t[P];\n"
    "#pragma unroll\n"
    "        for (int q = 0; q < P; ++q) t[q] = v[q < N ? q : 0];\n"
    "        if constexpr (P > 1) fold<P / 2, true>(t);\n"
    "        return larger(-__int_as_float(0x7f800000), t[0]);  // all nan: -inf\n"
    "    }\n"
    "    // N values whose largest (nan left out) is top, at once.\n"
    "    template <int N>\n"
    "    __device__ __forceinline__ void add_with_top(const T (&v)[N], T top) {\n"
    "        if (top > m + kSlack) {  // m = -inf: s is 0 (or counts -inf values, which add nothing now)\n"
    "            s *= (double)exp(m - top);\n"
    "            m = top;\n"
    "        }\n"
    "        if (isfinite(m)) {\n"
    "            T group = 0;\n"
    "            if constexpr (N <= 4) {\n"
    "#pragma unroll\n"
    "                for (int q = 0; q < N; ++q) group += exp(v[q] - m);  // each at most e^kSlack\n"
    "            } else {  // pairwise, as the largest\n"
    "                constexpr int P = pow2_at_least(N);\n"
    "                T e[P];\n"
    "#pragma unroll\n"
    "                for (int q = 0; q < P; ++q) e[q] = q < N ? exp(v[q < N ? q : 0] - m) : (T)0;\n"
    "                fold<P / 2, false>(e);\n"
    "                group = e[0];\n"
    "            }\n"
    "            s += (double)group;\n"
    "        } else {\n"
    "#pragma unroll\n"
    "            for (int q = 0; q < N; ++q) add(v[q]);\n"
    "        }\n"
    "    }\n"
    "    template <int N>\n"
    "    __device__ __forceinline__ void add_vec(const T (&v)[N], long long = 0) {\n"
    "        if constexpr (N == 1) {  // rows walked one element at a time (strided): add() as before\n"
    "            add(v[0]);\n"
    "        } else {\n"
    "            add_with_top(v, top_of(v));\n"
    "        }\n"
    "    }\n"
    "    // A tile's U groups as one array: register copies once unrolled (a cast of v's address would\n"
    "    // put it in memory).\n"
    "    template <int U, int N>\n"
    "    __device__ __forceinline__ static void flatten(const T (&v)[U][N], T (&flat)[U * N]) {\n"
    "#pragma unroll\n"
    "        for (int k = 0; k < U * N; ++k) flat[k] = v[k / N][k % N];\n"
    "    }\n"
    "    template <long long STEP, int U, int N>\n"
    "    __device__ __forceinline__ void add_tile(const T (&v)[U][N], long long) {\n"
    "        T flat[U * N];\n"
    "        flatten(v, flat);\n"
    "        add_vec(flat);\n"
    "    }\n"
    "    // t[0] = the maximum (kMax) or the sum of t[0 .. 2W - 1], pairwise (W a power of 2: a template\n"
    "    // recursion, so that every index is a constant and t stays in registers).\n"
    "    template <int W, bool kMax, int N>\n"
    "    __device__ __forceinline__ static void fold(T (&t)[N]) {\n"
    "#pragma unroll\n"
    "        for (int q = 0; q < W; ++q) t[q] = kMax ? larger(t[q], t[q + W]) : t[q] + t[q + W];\n"
    "        if constexpr (W > 1) fold<W / 2, kMax>(t);\n"
    "    }\n"
    "    __device__ __forceinline__ void combine(const LogSumExpAcc& o) {\n"
    "        const T top = o.m > m ? o.m : m;\n"
    "        const double mine = m == top ? s : s * (double)exp(m - top);\n"
    "        const double theirs = o.m == top ? o.s : o.s * (double)exp(o.m - top);\n"
    "        m = top;\n"
    "        s = mine + theirs;\n"
    "    }\n"
    "    __device__ __forceinline__ LogSumExpAcc shuffle_xor(int o) const {\n"
    "        LogSumExpAcc r;\n"
    "        r.m = lj::shuffle_xor(m, o);\n"
    "        r.s = lj::shuffle_xor(s, o);\n"
    "        return r;\n"
    "    }\n"
    "    // The two phases: the largest reference; then the sums at it.\n"
    "    struct Peak {\n"
    "        T m;\n"
    "        __device__ __forceinline__ void combine(const Peak& o) { m = o.m > m ? o.m : m; }\n"
    "        __device__ __forceinline__ Peak shuffle_xor(int o) const { return {lj::shuffle_xor(m, o)}; }\n"
    "    };\n"
    "    struct Rest {\n"
    "        double s;\n"
    "        __device__ __forceinline__ void combine(const Rest& o) { s += o.s; }\n"
    "        __device__ __forceinline__ Rest shuffle_xor(int o) const { return {lj::shuffle_xor(s, o)}; }\n"
    "    };\n"
    "    __device__ __forceinline__ Peak peak() const { return {m}; }\n"
    "    __device__ __forceinline__ Rest rebase(const Peak& p) {  // as combine's rule: equal references keep s\n"
    "        if (m != p.m) s *= (double)exp(m - p.m);\n"
    "        m = p.m;\n"
    "        return {s};\n"
    "    }\n"
    "    __device__ __forceinline__ void set(const Rest& r) { s = r.s; }\n"
    "    // In double: m may lie up to kSlack below the result, whose digits a float sum would lose.\n"
    "    __device__ __forceinline__ T value() const { return (T)((double)m + log(s)); }\n"
    "};\n"
    "}  // namespace lj\n";
// argmax / argmin: the first column of the extreme, a nan counting as the extreme (torch.argmax).
// Ordered by (nan first, then the extreme, then the lower column): a total order, so combining is
// commutative and the team agrees on one column whatever the order the lanes saw. Within a lane the
// columns come in increasing order, so add() needs no column compare (round 17: with it, adding
// argmax to a cross-entropy's pass cost 64% more time on an H200).
constexpr std::string_view kArgExtremeAcc =
    "namespace lj {\n"
    "template <class T, bool kMax>\n"
    "struct ArgExtremeAcc {  // argmax / argmin: the first column of the extreme; a nan is the extreme\n"
    "    // A float program's rows are at most 2^24 long (longer ones are refused: the index would not\n"
    "    // be exact): a 32-bit column, one register fewer.\n"
    "    using Index = lj::conditional_t<sizeof(T) == 4, int, long long>;\n"
    "    T m = 0;\n"
    "    Index i = -1;  // no element yet\n"
    "    __device__ __forceinline__ bool before(T v, Index j) const {\n"
    "        if (i < 0) return true;\n"
    "        const bool vn = v != v, mn = m != m;\n"
    "        if (vn != mn) return vn;\n"
    "        if (!vn && v != m) return kMax ? v > m : v < m;\n"
    "        return j < i;\n"
    "    }\n"
    "    // A lane adds its columns in increasing order: a later column never wins a tie, so the\n"
    "    // column compare of before() is left out here (combine() keeps it).\n"
    "    __device__ __forceinline__ void add(T v, long long j) {\n"
    "        const bool vn = v != v, mn = m != m;\n"
    "        if (i < 0 || (vn && !mn) || (!mn && (kMax ? v > m : v < m))) {\n"
    "            m = v;\n"
    "            i = (Index)j;\n"
    "        }\n"
    "    }\n"
    "    __device__ __forceinline__ void combine(const ArgExtremeAcc& o) {\n"
    "        if (o.i >= 0 && before(o.m, o.i)) {\n"
    "            m = o.m;\n"
    "            i = o.i;\n"
    "        }\n"
    "    }\n"
    "    __device__ __forceinline__ ArgExtremeAcc shuffle_xor(int o) const {\n"
    "        ArgExtremeAcc r;\n"
    "        r.m = lj::shuffle_xor(m, o);\n"
    "        r.i = __shfl_xor_sync(0xffffffffu, i, o);\n"
    "        return r;\n"
    "    }\n"
    "    __device__ __forceinline__ T value() const { return i < 0 ? (T)__int_as_float(0x7fffffff) : (T)i; }\n"
    "};\n"
    "}  // namespace lj\n";

// logsumexp and argmax of one argument together: logsumexp's sum, and beside it the largest value
// and its first column (or the first nan's: torch.argmax's order), where ArgExtremeAcc beside it
// costs its own compares (round 18, H200: cross-entropy with its accuracy 1.39x the time of the
// cross-entropy alone). A tile at once: its largest (logsumexp's, reused) and, without a branch, the
// first of its columns holding it (in a warp some lane meets a new maximum in most tiles, so a branch
// there ran in most of them; round 86). The first nan is looked for only where s has just become nan.
// Two phases as logsumexp's: the largest reference and value; then the sums and the first columns.
constexpr std::string_view kLogSumExpArgMaxAcc =  // after kLogSumExpAcc and kArgExtremeAcc, which it extends
    "namespace lj {\n"
    "template <class T>\n"
    "struct LogSumExpArgMaxAcc : LogSumExpAcc<T> {  // and the first column of the largest value (or of the first nan)\n"
    "    using Base = LogSumExpAcc<T>;\n"
    "    using Index = typename ArgExtremeAcc<T, true>::Index;\n"
    "    static constexpr Index kNone = (Index)((1ull << (8 * sizeof(Index) - 1)) - 1);  // above every column\n"
    "    T mx = -__int_as_float(0x7f800000);  // the largest value, nan left out\n"
    "    Index i = kNone;  // mx's first column; kNone while every value is -inf (or nan)\n"
    "    Index nan_i = kNone;  // the first nan's column\n"
    "    __device__ __forceinline__ void add(T v, long long j) {  // columns in increasing order\n"
    "        Base::add(v);\n"
    "        if (v > mx) {\n"
    "            mx = v;\n"
    "            i = (Index)j;\n"
    "        } else if (v != v && nan_i == kNone) {\n"
    "            nan_i = (Index)j;\n"
    "        }\n"
    "    }\n"
    "    // N values, value k at column column(k) (increasing in k).\n"
    "    template <int N, class Column>\n"
    "    __device__ __forceinline__ void add_at(const T (&v)[N], const Column& column) {\n"
    "        const T top = Base::top_of(v);\n"
    "        Base::add_with_top(v, top);\n"
    "        int at = 0;\n"
    "#pragma unroll\n"
    "        for (int k = N - 1; k >= 0; --k) at = v[k] == top ? k : at;\n"
    "        if (top > mx) {  // selects, not a branch\n"
    "            mx = top;\n"
    "            i = (Index)column(at);\n"
    "        }\n"
    "        if (this->s != this->s && nan_i == kNone) {  // the lane's first nan is here (s is nan from nan values alone)\n"
    "            int q = 0;\n"
    "#pragma unroll\n"
    "            for (int k = N - 1; k >= 0; --k) q = v[k] != v[k] ? k : q;\n"
    "            nan_i = (Index)column(q);\n"
    "        }\n"
    "    }\n"
    "    template <int N>\n"
    "    __device__ __forceinline__ void add_vec(const T (&v)[N], long long j) {  // columns j, j + 1, ...\n"
    "        if constexpr (N == 1) {\n"
    "            add(v[0], j);\n"
    "        } else {\n"
    "            add_at(v, [j](int k) { return j + k; });\n"
    "        }\n"
    "    }\n"
    "    template <long long STEP, int U, int N>\n"
    "    __device__ __forceinline__ void add_tile(const T (&v)[U][N], long long j0) {  // group u at j0 + u STEP\n"
    "        T flat[U * N];\n"
    "        Base::flatten(v, flat);\n"
    "        add_at(flat, [j0](int k) { return j0 + (long long)(k / N) * STEP + k % N; });\n"
    "    }\n"
    "    __device__ __forceinline__ void combine(const LogSumExpArgMaxAcc& o) {\n"
    "        if (o.mx > mx || (o.mx == mx && o.i < i)) {\n"
    "            mx = o.mx;\n"
    "            i = o.i;\n"
    "        }\n"
    "        nan_i = o.nan_i < nan_i ? o.nan_i : nan_i;\n"
    "        Base::combine(o);\n"
    "    }\n"
    "    __device__ __forceinline__ LogSumExpArgMaxAcc shuffle_xor(int o) const {\n"
    "        LogSumExpArgMaxAcc r;\n"
    "        static_cast<Base&>(r) = Base::shuffle_xor(o);\n"
    "        r.mx = lj::shuffle_xor(mx, o);\n"
    "        r.i = __shfl_xor_sync(0xffffffffu, i, o);\n"
    "        r.nan_i = __shfl_xor_sync(0xffffffffu, nan_i, o);\n"
    "        return r;\n"
    "    }\n"
    "    struct Peak {\n"
    "        T m, mx;\n"
    "        __device__ __forceinline__ void combine(const Peak& o) {\n"
    "            m = o.m > m ? o.m : m;\n"
    "            mx = o.mx > mx ? o.mx : mx;\n"
    "        }\n"
    "        __device__ __forceinline__ Peak shuffle_xor(int o) const { return {lj::shuffle_xor(m, o), lj::shuffle_xor(mx, o)}; }\n"
    "    };\n"
    "    struct Rest {\n"
    "        double s;\n"
    "        Index i, nan_i;\n"
    "        __device__ __forceinline__ void combine(const Rest& o) {\n"
    "            s += o.s;\n"
    "            i = o.i < i ? o.i : i;\n"
    "            nan_i = o.nan_i < nan_i ? o.nan_i : nan_i;\n"
    "        }\n"
    "        __device__ __forceinline__ Rest shuffle_xor(int o) const {\n"
    "            return {lj::shuffle_xor(s, o), __shfl_xor_sync(0xffffffffu, i, o), __shfl_xor_sync(0xffffffffu, nan_i, o)};\n"
    "        }\n"
    "    };\n"
    "    __device__ __forceinline__ Peak peak() const { return {this->m, mx}; }\n"
    "    __device__ __forceinline__ Rest rebase(const Peak& p) {\n"
    "        const double s = Base::rebase(typename Base::Peak{p.m}).s;\n"
    "        if (mx != p.mx) i = kNone;  // not the team's largest: not a candidate\n"
    "        mx = p.mx;\n"
    "        return {s, i, nan_i};\n"
    "    }\n"
    "    __device__ __forceinline__ void set(const Rest& r) {\n"
    "        this->s = r.s;\n"
    "        i = r.i;\n"
    "        nan_i = r.nan_i;\n"
    "    }\n"
    "    // No column above -inf and no nan: a row of -inf, whose first column is the answer (s counts its\n"
    "    // values), or an empty row (nan).\n"
    "    __device__ __forceinline__ T index() const {\n"
    "        const Index k = nan_i != kNone ? nan_i : i;\n"
    "        return k != kNone ? (T)k : this->s > 0.0 ? (T)0 : (T)__int_as_float(0x7fffffff);\n"
    "    }\n"
    "};\n"
    "}  // namespace lj\n";

constexpr SharedAccumulator kSharedAccumulators[] = {
    {RowReduction::LogSumExp, RowReduction::ArgMax, "lj::LogSumExpArgMaxAcc<Value>", "{0}.value()", "{0}.index()",
     kLogSumExpArgMaxAcc},
};

// lj::CenteredAcc (templates/lj_centered.cuh, where its merge is explained).
constexpr std::string_view kCenteredAcc = templates::lj_centered_cuh;
constexpr CenteredAccumulator kCentered{"lj::CenteredAcc", "(Value)({0}.s / (double)C)", "{0}.m2()", kCenteredAcc};

double row_sum(std::span<const double> row) {
    util::CompensatedSum sum;
    for (double v : row) sum.add(v);
    return sum.value();
}
double row_mean(std::span<const double> row) { return row_sum(row) / static_cast<double>(row.size()); }
template <bool kMax>
double row_extreme(std::span<const double> row) {
    double best = kMax ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    for (double v : row) {
        if (std::isnan(v)) return v;
        best = kMax ? std::max(best, v) : std::min(best, v);
    }
    return best;
}
double row_logsumexp(std::span<const double> row) {
    double top = -std::numeric_limits<double>::infinity();
    for (double v : row) {
        if (std::isnan(v)) return std::numeric_limits<double>::quiet_NaN();
        top = std::max(top, v);
    }
    if (std::isinf(top)) return top;  // +inf; or -inf: every term is 0, an empty row too
    util::CompensatedSum sum;
    for (double v : row) sum.add(std::exp(v - top));
    return top + std::log(sum.value());
}
template <bool kMax>
double row_arg_extreme(std::span<const double> row) {
    std::int64_t best = -1;
    double m = 0.0;
    for (std::size_t j = 0; j < row.size(); ++j) {
        const double v = row[j];
        const bool take = best < 0 || (std::isnan(v) != std::isnan(m) ? std::isnan(v)
                                                                       : !std::isnan(v) && v != m && (kMax ? v > m : v < m));
        if (take) {
            best = static_cast<std::int64_t>(j);
            m = v;
        }
    }
    return best < 0 ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(best);
}

constexpr std::array<RowReductionInfo, static_cast<std::size_t>(RowReduction::Count_)> kRowReductions{{
    {RowReduction::Sum, "sum", "sum along the row (0 for an empty row)", "1", {}, "lj::SumAcc",
     "(Value){0}.s", kSumAcc, row_sum, Gradient::Formula, "g"},
    {RowReduction::Mean, "mean", "mean along the row (nan for an empty row)", "1 / C", {}, "lj::SumAcc",
     "(Value)({0}.s / (double)C)", kSumAcc, row_mean, Gradient::Formula, "g / C"},  // 0 / 0: nan, as torch
    {RowReduction::Max, "amax", "largest element of the row (torch.amax); nan if any is nan, -inf for an empty row",
     "shared evenly among the elements equal to the result (torch.amax)", {}, "lj::ExtremeAcc<Value, true>", "{0}.m",
     kExtremeAcc, row_extreme<true>, Gradient::Formula,
     "g / sum(x == self, -1) * (x == self)"},  // torch's scale_grad_by_count: a nan row gets nan
    {RowReduction::Min, "amin", "smallest element of the row (torch.amin); nan if any is nan, inf for an empty row",
     "shared evenly among the elements equal to the result (torch.amin)", {}, "lj::ExtremeAcc<Value, false>", "{0}.m",
     kExtremeAcc, row_extreme<false>, Gradient::Formula, "g / sum(x == self, -1) * (x == self)"},
    {RowReduction::LogSumExp, "logsumexp", "log(sum(exp(e))) along the row, without overflow (-inf for an empty row)",
     "softmax: exp(e_j - logsumexp(e))", {}, "lj::LogSumExpAcc<Value>", "{0}.value()", kLogSumExpAcc, row_logsumexp,
     Gradient::Formula, "g * exp(x - self)"},
    // The mean detached: its path's derivative is 0 but for rounding, and where the row holds an inf
    // it would be inf - inf; torch's var_backward is 2 (x - mean) / (C - 1) alone.
    // A row of equal (finite) values has variance 0 exactly, as torch's Welford gives, with no gradient;
    // the mean of C copies of a value may round away from it, which would leave 1e-33 (and, through
    // std, a gradient of 1 / sqrt(C (C - 1)) where torch has 0). Rows of 0 or 1 elements: nan.
    {RowReduction::Var, "var", "variance along the row, torch's default correction 1 (nan for rows of 0 or 1; "
     "exactly 0 for a row of equal values)", "2 (e_j - mean) / (C - 1); 0 for a row of equal values",
     "m = detach(mean(x, -1)); "
     "where(C > 1 && amax(x, -1) == amin(x, -1) && !isinf(m), 0, sum((x - m) ^ 2, -1)) / max(C - 1, 0)"},
    {RowReduction::Std, "std", "standard deviation along the row, sqrt of var (correction 1)",
     // 0 where the row is constant: torch's std_backward masks var == 0 (sqrt's derivative is inf there).
     "(e_j - mean) / ((C - 1) std); 0 where std is 0",
     "m = detach(mean(x, -1)); "
     "v = where(C > 1 && amax(x, -1) == amin(x, -1) && !isinf(m), 0, sum((x - m) ^ 2, -1)) / max(C - 1, 0); "
     "where(v == 0, 0, sqrt(v))"},
    {RowReduction::ArgMax, "argmax", "the first column of the row's largest element (a nan counts as largest; nan for "
     "an empty row), as a number: mean(argmax(x, -1) == y) is accuracy", "none (an index)", {},
     "lj::ArgExtremeAcc<Value, true>", "{0}.value()", kArgExtremeAcc, row_arg_extreme<true>, Gradient::None, {}, true},
    {RowReduction::ArgMin, "argmin", "the first column of the row's smallest element (a nan counts as smallest; nan "
     "for an empty row)", "none (an index)", {}, "lj::ArgExtremeAcc<Value, false>", "{0}.value()", kArgExtremeAcc,
     row_arg_extreme<false>, Gradient::None, {}, true},
}};

constexpr bool row_table_is_in_enum_order() {
    for (std::size_t i = 0; i < kRowReductions.size(); ++i)
        if (static_cast<std::size_t>(kRowReductions[i].id) != i) return false;
    return true;
}
static_assert(row_table_is_in_enum_order(), "kRowReductions rows must follow the RowReduction enum");
}  // namespace

std::span<const SharedAccumulator> shared_accumulators() { return kSharedAccumulators; }

const CenteredAccumulator& centered_accumulator() { return kCentered; }

std::span<const RowReductionInfo> row_reduction_table() { return kRowReductions; }

const RowReductionInfo& row_reduction_info(RowReduction id) {
    const auto index = static_cast<std::size_t>(id);
    if (index >= kRowReductions.size()) throw InternalError("row reduction id out of range");
    return kRowReductions[index];
}

std::optional<RowReduction> find_row_reduction(std::string_view name) {
    for (const auto& row : kRowReductions)
        if (row.name == name) return row.id;
    return std::nullopt;
}

const BuiltinInfo& builtin_info(Builtin id) {
    const auto index = static_cast<std::size_t>(id);
    if (index >= kTable.size()) throw InternalError("builtin id out of range");
    return kTable[index];
}

std::span<const BuiltinInfo> builtin_table() { return kTable; }

std::optional<Builtin> find_operator(std::string_view spelling, int arity) {
    for (const auto& row : kTable)
        if (row.op == spelling && row.arity == arity) return row.id;
    return std::nullopt;
}

std::optional<FunctionSignature> find_function(std::string_view name) {
    for (const auto& row : kTable)
        if (!row.name.empty() && row.name == name) return FunctionSignature{row.id, row.arity, row.variadic ? -1 : row.arity};
    return std::nullopt;
}

std::span<const std::string_view> function_names() { return names_of_functions(); }

std::span<const std::string_view> constant_names() {
    static const std::vector<std::string_view> names = [] {
        std::vector<std::string_view> out;
        for (const auto& c : kConstants) out.push_back(c.name);
        return out;
    }();
    return names;
}

std::optional<double> find_constant(std::string_view name) {
    for (const auto& c : kConstants)
        if (c.name == name) return c.value;
    return std::nullopt;
}

namespace {
constexpr WholeReductionInfo kWholeReductions[] = {
    {"sum", ir::Reduction::Sum, "sum of every element of the broadcast shape (0 when empty)", "g"},
    {"mean", ir::Reduction::Mean, "sum / element count (nan when empty)", "g / count"},
    {"batchmean", ir::Reduction::BatchMean, "sum / size of dimension 0 (torch's reduction='batchmean')",
     "g / size of dimension 0"},
};
}  // namespace

std::span<const WholeReductionInfo> whole_reduction_table() { return kWholeReductions; }

std::optional<ir::Reduction> find_whole_reduction(std::string_view name) {
    for (const auto& r : kWholeReductions)
        if (r.name == name) return r.reduction;
    return std::nullopt;
}

double apply_builtin(Builtin id, double a, double b, double c) { return builtin_info(id).reference(a, b, c); }

namespace {
struct ExactPowerRow {
    ExactPower power;
    double (*value)(double);
};
constexpr std::array<ExactPowerRow, 7> kExactPowers{{
    {{1.0, "{0}"}, [](double x) { return x; }},
    {{2.0, "lj_square({0})"}, [](double x) { return x * x; }},
    {{3.0, "lj_cube({0})"}, [](double x) { return x * x * x; }},
    {{0.5, "sqrt({0})"}, [](double x) { return std::sqrt(x); }},
    {{-0.5, "rsqrt({0})"}, [](double x) { return 1.0 / std::sqrt(x); }},
    {{-1.0, "({1} / {0})"}, [](double x) { return 1.0 / x; }},
    {{-2.0, "({1} / lj_square({0}))"}, [](double x) { return 1.0 / (x * x); }},
}};
}  // namespace

std::optional<ExactPower> exact_power(double exponent) {
    for (const auto& row : kExactPowers)
        if (row.power.exponent == exponent) return row.power;
    return std::nullopt;
}

double power_by_constant(double base, double exponent) {
    for (const auto& row : kExactPowers)
        if (row.power.exponent == exponent) return row.value(base);
    return std::pow(base, exponent);
}

double fold_builtin(Builtin id, double a, double b, double c) {
    return id == Builtin::Pow ? power_by_constant(a, b) : apply_builtin(id, a, b, c);
}

}  // namespace lossjit
