#include "lang/builtins.hpp"

#include <array>
#include <cmath>
#include <limits>

#include "lossjit/errors.hpp"

namespace lossjit {
namespace {

constexpr ValueType F = ValueType::Float;
constexpr ValueType B = ValueType::Bool;

// Spellings with a `lj_` prefix are helpers in templates/prelude.cuh: they exist where CUDA's own
// function differs from PyTorch (fmaxf drops NaN, fmodf is not Python's %, ...).
constexpr std::array<BuiltinInfo, static_cast<std::size_t>(Builtin::Count_)> kTable{{
    {Builtin::Neg, "-", true, 1, "f", F, "(-{0})", "negation"},
    {Builtin::Not, "!", true, 1, "b", B, "(!{0})", "logical not: 1 where x == 0"},
    {Builtin::Add, "+", true, 2, "ff", F, "({0} + {1})", "addition"},
    {Builtin::Sub, "-", true, 2, "ff", F, "({0} - {1})", "subtraction"},
    {Builtin::Mul, "*", true, 2, "ff", F, "({0} * {1})", "multiplication"},
    {Builtin::Div, "/", true, 2, "ff", F, "({0} / {1})", "division (IEEE: x/0 is ±inf or nan)"},
    {Builtin::Mod, "%", true, 2, "ff", F, "lj_mod({0}, {1})", "remainder with the sign of the divisor (torch.remainder, Python %)"},
    {Builtin::Pow, "^", true, 2, "ff", F, "powf({0}, {1})", "power, right-associative"},
    {Builtin::Lt, "<", true, 2, "ff", B, "({0} < {1})", "less than"},
    {Builtin::Le, "<=", true, 2, "ff", B, "({0} <= {1})", "less or equal"},
    {Builtin::Gt, ">", true, 2, "ff", B, "({0} > {1})", "greater than"},
    {Builtin::Ge, ">=", true, 2, "ff", B, "({0} >= {1})", "greater or equal"},
    {Builtin::Eq, "==", true, 2, "ff", B, "({0} == {1})", "equal"},
    {Builtin::Ne, "!=", true, 2, "ff", B, "({0} != {1})", "not equal (true when either side is nan)"},
    {Builtin::And, "&&", true, 2, "bb", B, "({0} && {1})", "logical and"},
    {Builtin::Or, "||", true, 2, "bb", B, "({0} || {1})", "logical or"},
    {Builtin::Select, "?:", true, 3, "bff", F, "({0} ? {1} : {2})", "c ? a : b, where(c, a, b): a where c != 0, else b"},
    {Builtin::Abs, "abs", false, 1, "f", F, "fabsf({0})", "absolute value"},
    {Builtin::Sign, "sign", false, 1, "f", F, "lj_sign({0})", "-1, 0 or 1 (0 for nan, like torch.sign)"},
    {Builtin::Sqrt, "sqrt", false, 1, "f", F, "sqrtf({0})", "square root"},
    {Builtin::Rsqrt, "rsqrt", false, 1, "f", F, "rsqrtf({0})", "1 / sqrt(x)"},
    {Builtin::Exp, "exp", false, 1, "f", F, "expf({0})", "e^x"},
    {Builtin::Exp2, "exp2", false, 1, "f", F, "exp2f({0})", "2^x"},
    {Builtin::Expm1, "expm1", false, 1, "f", F, "expm1f({0})", "e^x - 1, accurate near 0"},
    {Builtin::Log, "log", false, 1, "f", F, "logf({0})", "natural logarithm (nan below 0, -inf at 0)"},
    {Builtin::Log2, "log2", false, 1, "f", F, "log2f({0})", "base-2 logarithm"},
    {Builtin::Log10, "log10", false, 1, "f", F, "log10f({0})", "base-10 logarithm"},
    {Builtin::Log1p, "log1p", false, 1, "f", F, "log1pf({0})", "log(1 + x), accurate near 0"},
    {Builtin::Sin, "sin", false, 1, "f", F, "sinf({0})", "sine"},
    {Builtin::Cos, "cos", false, 1, "f", F, "cosf({0})", "cosine"},
    {Builtin::Tan, "tan", false, 1, "f", F, "tanf({0})", "tangent"},
    {Builtin::Tanh, "tanh", false, 1, "f", F, "tanhf({0})", "hyperbolic tangent"},
    {Builtin::Sigmoid, "sigmoid", false, 1, "f", F, "lj_sigmoid({0})", "1 / (1 + e^-x)"},
    {Builtin::Softplus, "softplus", false, 1, "f", F, "lj_softplus({0})", "log(1 + e^x); x itself above 20 (torch's threshold)"},
    {Builtin::Relu, "relu", false, 1, "f", F, "lj_relu({0})", "max(x, 0), nan stays nan"},
    {Builtin::Erf, "erf", false, 1, "f", F, "erff({0})", "error function"},
    {Builtin::Erfc, "erfc", false, 1, "f", F, "erfcf({0})", "1 - erf(x)"},
    {Builtin::Floor, "floor", false, 1, "f", F, "floorf({0})", "round down"},
    {Builtin::Ceil, "ceil", false, 1, "f", F, "ceilf({0})", "round up"},
    {Builtin::Round, "round", false, 1, "f", F, "rintf({0})", "round half to even (torch.round)"},
    {Builtin::Trunc, "trunc", false, 1, "f", F, "truncf({0})", "round toward zero"},
    {Builtin::Min, "min", false, 2, "ff", F, "lj_min({0}, {1})", "smallest argument (2 or more); nan if any is nan"},
    {Builtin::Max, "max", false, 2, "ff", F, "lj_max({0}, {1})", "largest argument (2 or more); nan if any is nan"},
    {Builtin::Clamp, "clamp", false, 3, "fff", F, "lj_clamp({0}, {1}, {2})", "min(max(x, lo), hi); nan stays nan"},
    {Builtin::IsNan, "isnan", false, 1, "f", B, "isnan({0})", "1 where x is nan"},
    {Builtin::IsInf, "isinf", false, 1, "f", B, "isinf({0})", "1 where x is ±inf"},
    {Builtin::Xlogy, "xlogy", false, 2, "ff", F, "lj_xlogy({0}, {1})", "x * log(y), 0 where x == 0 (unless y is nan)"},
}};

constexpr bool table_is_in_enum_order() {
    for (std::size_t i = 0; i < kTable.size(); ++i)
        if (static_cast<std::size_t>(kTable[i].id) != i) return false;
    return true;
}
static_assert(table_is_in_enum_order(), "kTable rows must follow the Builtin enum");

struct NamedFunction {
    std::string_view name;
    FunctionSignature signature;
};

constexpr NamedFunction kFunctions[] = {
    {"abs", {Builtin::Abs, 1, 1}},         {"sign", {Builtin::Sign, 1, 1}},
    {"sqrt", {Builtin::Sqrt, 1, 1}},       {"rsqrt", {Builtin::Rsqrt, 1, 1}},
    {"exp", {Builtin::Exp, 1, 1}},         {"exp2", {Builtin::Exp2, 1, 1}},
    {"expm1", {Builtin::Expm1, 1, 1}},     {"log", {Builtin::Log, 1, 1}},
    {"log2", {Builtin::Log2, 1, 1}},       {"log10", {Builtin::Log10, 1, 1}},
    {"log1p", {Builtin::Log1p, 1, 1}},     {"sin", {Builtin::Sin, 1, 1}},
    {"cos", {Builtin::Cos, 1, 1}},         {"tan", {Builtin::Tan, 1, 1}},
    {"tanh", {Builtin::Tanh, 1, 1}},       {"sigmoid", {Builtin::Sigmoid, 1, 1}},
    {"softplus", {Builtin::Softplus, 1, 1}}, {"relu", {Builtin::Relu, 1, 1}},
    {"erf", {Builtin::Erf, 1, 1}},         {"erfc", {Builtin::Erfc, 1, 1}},
    {"floor", {Builtin::Floor, 1, 1}},     {"ceil", {Builtin::Ceil, 1, 1}},
    {"round", {Builtin::Round, 1, 1}},     {"trunc", {Builtin::Trunc, 1, 1}},
    {"min", {Builtin::Min, 2, -1}},        {"max", {Builtin::Max, 2, -1}},
    {"clamp", {Builtin::Clamp, 3, 3}},     {"pow", {Builtin::Pow, 2, 2}},
    {"where", {Builtin::Select, 3, 3}},    {"isnan", {Builtin::IsNan, 1, 1}},
    {"isinf", {Builtin::IsInf, 1, 1}},     {"xlogy", {Builtin::Xlogy, 2, 2}},
};

constexpr std::array<std::string_view, std::size(kFunctions)> make_names() {
    std::array<std::string_view, std::size(kFunctions)> names{};
    for (std::size_t i = 0; i < names.size(); ++i) names[i] = kFunctions[i].name;
    return names;
}
constexpr auto kFunctionNames = make_names();

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

}  // namespace

const BuiltinInfo& builtin_info(Builtin id) {
    const auto index = static_cast<std::size_t>(id);
    if (index >= kTable.size()) throw InternalError("builtin id out of range");
    return kTable[index];
}

std::optional<FunctionSignature> find_function(std::string_view name) {
    for (const auto& f : kFunctions)
        if (f.name == name) return f.signature;
    return std::nullopt;
}

const std::string_view* function_names(std::size_t* count) {
    *count = kFunctionNames.size();
    return kFunctionNames.data();
}

double apply_builtin(Builtin id, double a, double b, double c) {
    auto truth = [](double x) { return x != 0.0; };  // nan counts as true, as in C and torch
    switch (id) {
        case Builtin::Neg: return -a;
        case Builtin::Not: return truth(a) ? 0.0 : 1.0;
        case Builtin::Add: return a + b;
        case Builtin::Sub: return a - b;
        case Builtin::Mul: return a * b;
        case Builtin::Div: return a / b;
        case Builtin::Mod: {
            double r = std::fmod(a, b);
            if (r != 0.0 && ((b < 0.0) != (r < 0.0))) r += b;
            return r;
        }
        case Builtin::Pow: return std::pow(a, b);
        case Builtin::Lt: return a < b ? 1.0 : 0.0;
        case Builtin::Le: return a <= b ? 1.0 : 0.0;
        case Builtin::Gt: return a > b ? 1.0 : 0.0;
        case Builtin::Ge: return a >= b ? 1.0 : 0.0;
        case Builtin::Eq: return a == b ? 1.0 : 0.0;
        case Builtin::Ne: return a != b ? 1.0 : 0.0;
        case Builtin::And: return truth(a) && truth(b) ? 1.0 : 0.0;
        case Builtin::Or: return truth(a) || truth(b) ? 1.0 : 0.0;
        case Builtin::Select: return truth(a) ? b : c;
        case Builtin::Abs: return std::fabs(a);
        case Builtin::Sign: return static_cast<double>((0.0 < a) - (a < 0.0));
        case Builtin::Sqrt: return std::sqrt(a);
        case Builtin::Rsqrt: return 1.0 / std::sqrt(a);
        case Builtin::Exp: return std::exp(a);
        case Builtin::Exp2: return std::exp2(a);
        case Builtin::Expm1: return std::expm1(a);
        case Builtin::Log: return std::log(a);
        case Builtin::Log2: return std::log2(a);
        case Builtin::Log10: return std::log10(a);
        case Builtin::Log1p: return std::log1p(a);
        case Builtin::Sin: return std::sin(a);
        case Builtin::Cos: return std::cos(a);
        case Builtin::Tan: return std::tan(a);
        case Builtin::Tanh: return std::tanh(a);
        case Builtin::Sigmoid: return 1.0 / (1.0 + std::exp(-a));
        case Builtin::Softplus: return a > 20.0 ? a : std::log1p(std::exp(a));
        case Builtin::Relu: return std::isnan(a) ? a : (a > 0.0 ? a : 0.0);
        case Builtin::Erf: return std::erf(a);
        case Builtin::Erfc: return std::erfc(a);
        case Builtin::Floor: return std::floor(a);
        case Builtin::Ceil: return std::ceil(a);
        case Builtin::Round: return std::nearbyint(a);
        case Builtin::Trunc: return std::trunc(a);
        case Builtin::Min: return nan_min(a, b);
        case Builtin::Max: return nan_max(a, b);
        case Builtin::Clamp: return nan_min(nan_max(a, b), c);
        case Builtin::IsNan: return std::isnan(a) ? 1.0 : 0.0;
        case Builtin::IsInf: return std::isinf(a) ? 1.0 : 0.0;
        case Builtin::Xlogy:
            if (std::isnan(b)) return b;
            return a == 0.0 ? 0.0 : a * std::log(b);
        case Builtin::Count_: break;
    }
    throw InternalError("apply_builtin: unknown builtin");
}

}  // namespace lossjit
