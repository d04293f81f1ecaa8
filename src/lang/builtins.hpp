// Every operator and function of the language, in one table: its name, arity, types, how the
// printer spells it in CUDA and what it means on the CPU reference. Adding a function means adding
// one row here (and one helper in templates/prelude.cuh if CUDA has no exact equivalent).
#pragma once

#include <optional>
#include <string_view>

namespace lossjit {

enum class ValueType : unsigned char { Float, Bool };

enum class Builtin : unsigned char {
    // operators
    Neg, Not, Add, Sub, Mul, Div, Mod, Pow, Lt, Le, Gt, Ge, Eq, Ne, And, Or, Select,
    // functions
    Abs, Sign, Sqrt, Rsqrt, Exp, Exp2, Expm1, Log, Log2, Log10, Log1p, Sin, Cos, Tan, Tanh,
    Sigmoid, Softplus, Relu, Erf, Erfc, Floor, Ceil, Round, Trunc, Min, Max, Clamp, IsNan, IsInf,
    Xlogy,
    Count_
};

struct BuiltinInfo {
    Builtin id;
    std::string_view name;       // function name, or the operator's spelling
    bool is_operator;
    int arity;
    std::string_view arg_types;  // one letter per argument: 'f' float, 'b' bool (converted as needed)
    ValueType result;
    std::string_view cuda;       // fmt pattern over the printed arguments {0} {1} {2}
    std::string_view summary;    // one line for docs and `lossjit functions`
};

const BuiltinInfo& builtin_info(Builtin id);

// Functions callable by name. min and max accept two or more arguments (the checker folds them
// pairwise); where(c, a, b) and pow(a, b) are the same builtins as `c ? a : b` and `a ^ b`.
struct FunctionSignature {
    Builtin id;
    int min_args;
    int max_args;  // -1: unbounded
};
std::optional<FunctionSignature> find_function(std::string_view name);

// Names of all callable functions, for "did you mean" suggestions and docs.
const std::string_view* function_names(std::size_t* count);

// The reference meaning of a builtin in float64 (bools are 0.0/1.0). Shared by the constant folder
// and the CPU reference evaluator, so the two can never disagree.
double apply_builtin(Builtin id, double a, double b = 0.0, double c = 0.0);

}  // namespace lossjit
