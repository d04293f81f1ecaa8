// Every operator and function of the language, in one table (builtins.cpp, kTable): one row holds
// all that any stage knows about it. To add a function, add an enum value below and one row:
//   - name (and, for an operator, its spelling, precedence and associativity), arity, argument and
//     result types: the checker, the parser's "did you mean", the dumps and `lossjit functions`;
//   - cuda: the CUDA spelling, and cuda_helper: a __device__ definition where CUDA has no exact
//     equivalent (emitted only into kernels that use the row, after the ones it `needs`);
//   - reference: the float64 meaning (constant folding and the CPU reference);
//   - cost: Transcendental where the unroll heuristic should count it (KernelSpec::choose);
//   - gradient: one formula per argument in the language itself over x, y, z (the arguments),
//     self (the result) and g (the adjoint), e.g. "g * (1 - self) * self"; or Gradient::None for
//     piecewise-constant functions, Gradient::Refused where lossjit has no derivative, or
//     Gradient::Rule for the few rules in ir/differentiate.cpp that depend on structure;
//   - summary: one line for docs/language.md (a test checks every name appears there);
//   - cuda_common: optional, a spelling without the helper's rare-input branch (see the field).
// The table-driven tests (finite differences, NVRTC compiles, the reference, the docs) then cover
// the new row; they need only its expected values.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string_view>

namespace lossjit {

enum class ValueType : unsigned char { Float, Bool };

enum class Builtin : unsigned char {
    // operators
    Neg, Not, Add, Sub, Mul, Div, Mod, Pow, Lt, Le, Gt, Ge, Eq, Ne, And, Or, Select,
    // functions
    Abs, Sign, Sqrt, Rsqrt, Exp, Exp2, Expm1, Log, Log2, Log10, Log1p, Sin, Cos, Tan, Tanh,
    Sigmoid, Softplus, Relu, Erf, Erfc, Floor, Ceil, Round, Trunc, Min, Max, Clamp, IsNan, IsInf,
    Xlogy, Cosh, Sinh, Asinh, Acosh, Atanh, Asin, Acos, Atan, Atan2, Hypot, Lgamma, Digamma, Trigamma, FloorDiv, Detach,
    Count_
};

enum class Associativity : unsigned char { Left, Right };

enum class Cost : unsigned char { Cheap, Transcendental };

enum class Gradient : unsigned char {
    Formula,  // `derivative` holds one formula per argument ("" for an argument that gets none)
    Rule,     // a named rule in ir/differentiate.cpp (it depends on the structure of the arguments)
    None,     // piecewise constant: no gradient passes (torch's zero gradient)
    Stopped,  // not constant, but no gradient passes by definition (detach)
    Refused,  // not differentiable in lossjit: asking for a gradient through it is a SourceError
};

using ReferenceFn = double (*)(double, double, double);

struct BuiltinInfo {
    Builtin id;
    std::string_view name;       // function name ("" for an operator callable only as one)
    std::string_view op;         // operator spelling ("" for a function)
    int precedence;              // operators: binding strength, loosest 1; functions 0
    Associativity associativity;
    int arity;                   // arguments of a node; also the fewest a call may pass
    bool variadic;               // min / max: a call passes `arity` or more, folded pairwise
    std::string_view arg_types;  // one letter per argument: 'f' float, 'b' bool (converted as needed)
    ValueType result;
    // The CUDA spelling serves float32 and float64 programs alike: overloaded math functions (exp,
    // not expf: CUDA has float overloads) and helpers templated on the value type T.
    std::string_view cuda;         // fmt pattern over the printed arguments {0} {1} {2}
    std::string_view cuda_helper;  // __device__ definition(s) the pattern needs; "" for none
    std::array<Builtin, 2> needs;  // rows whose helpers this helper calls (Builtin::Count_: none)
    ReferenceFn reference;         // float64 meaning; bools are 0.0 / 1.0
    Cost cost;
    Gradient gradient;
    std::array<std::string_view, 3> derivative;  // Gradient::Formula: d/d argument i, times g
    std::string_view summary;                    // one line for docs and `lossjit functions`
    // The common path's CUDA spelling, for rows whose helper branches to rare inputs (log, xlogy):
    // the same value on the common inputs, and any other input flagged in the element's `rare_`
    // instead of handled (templates/rows.cuh evaluates a vector of elements this way, then again
    // with `cuda` where one was flagged). "" where the row has none.
    std::string_view cuda_common = {};

    bool is_operator() const { return !op.empty(); }
};

const BuiltinInfo& builtin_info(Builtin id);
std::span<const BuiltinInfo> builtin_table();

// Operators by spelling and arity: "-" with 1 argument is Neg, with 2 Sub; "?:" (3) is Select.
std::optional<Builtin> find_operator(std::string_view spelling, int arity);

// Functions callable by name. min and max accept two or more arguments (the checker folds them
// pairwise); where(c, a, b) and pow(a, b) are the same builtins as `c ? a : b` and `a ^ b`.
struct FunctionSignature {
    Builtin id;
    int min_args;
    int max_args;  // -1: unbounded
};
std::optional<FunctionSignature> find_function(std::string_view name);

// Names of all callable functions, in table order, for "did you mean" suggestions and docs.
std::span<const std::string_view> function_names();

// The language's named constants (pi, inf, nan).
std::optional<double> find_constant(std::string_view name);
std::span<const std::string_view> constant_names();

// The whole-tensor reductions: one number over every element of the broadcast shape, `mean(e)` as a
// program's body or several combined into one scalar. The checker finds them here; `lossjit
// functions` lists them.
namespace ir {
enum class Reduction;  // ir/program.hpp
}
struct WholeReductionInfo {
    std::string_view name;
    ir::Reduction reduction;
    std::string_view meaning;           // one line for `lossjit functions`
    std::string_view gradient_summary;  // d result / d e, per element
};
std::span<const WholeReductionInfo> whole_reduction_table();
std::optional<ir::Reduction> find_whole_reduction(std::string_view name);

// Reductions along rows inside an expression: `sum(e, -1)`, `logsumexp(x, 1)`. The
// result is one value per row, broadcast back along the row wherever it meets per-element values.
// Not rows of kTable: they are not pointwise, so the checker, the emitters and the reference treat
// them as their own node kind (ir::NodeKind::RowReduce); this table (kRowReductions) is every fact
// about them. To add one: an enum value, a row, a value for test_reference's table, a line in
// docs/language.md. A row is either
//   - defined in the language (`definition`, over x, the reduced expression, and C, the row's
//     length, with statements of its own: var is "sum((x - mean(x, -1)) ^ 2, -1) / (C - 1)"): the
//     checker expands it, so its value, derivative and kernel follow from the reductions it uses; or
//   - reduced by an accumulator: `cuda_accumulator` (a type over Value) that the row kernel adds each
//     element to (add(v, column)), combines across threads (combine: commutative, so every thread
//     of a team gets the same bits) and reads the result from (`cuda_result`, {0}: the accumulator;
//     C the row's length); `cuda_helper`, its definition (emitted into the kernels that use it);
//     `reference`, the float64 meaning over the row's values; and `gradient`: Formula with
//     `derivative`, d result / d x_j times g in the language over x (the element), self (the
//     result), g and C, or None (an index has no gradient).
enum class RowReduction : unsigned char { Sum, Mean, Max, Min, LogSumExp, Var, Std, ArgMax, ArgMin, Count_ };

struct RowReductionInfo {
    RowReduction id;
    std::string_view name;              // as called: name(e, -1)
    std::string_view meaning;           // one line for docs/language.md and `lossjit functions`
    std::string_view gradient_summary;  // d result / d e_j, for the docs
    std::string_view definition = {};
    std::string_view cuda_accumulator = {};
    std::string_view cuda_result = {};
    std::string_view cuda_helper = {};
    double (*reference)(std::span<const double> row) = nullptr;
    Gradient gradient = Gradient::Formula;
    std::string_view derivative = {};
    // The result is a column index, a value of the program's type: exact in float32 only for rows
    // of up to 2^24 columns (the GPU refuses longer rows unless the program computes in float64).
    bool is_index = false;
};

// Two row reductions of one argument that one accumulator computes in one pass, where they meet in
// a pass (argmax beside a logsumexp: the running maximum is the same): its CUDA type and helper, and
// each reduction's value from it ({0}: the accumulator).
struct SharedAccumulator {
    RowReduction first, second;
    std::string_view cuda_accumulator, first_result, second_result, cuda_helper;
};
std::span<const SharedAccumulator> shared_accumulators();

// A row's mean and its sum of squared deviations from that mean, in one pass: `m = mean(e, -1)`
// beside `sum((e - m)^2, -1)` or `mean((e - m)^2, -1)` (layer and instance norm; var and std, whose
// expansions are of this form) where the two would otherwise take a pass each. Its CUDA type and
// helper; the mean's value, and the sum of squared deviations' ({0}: the accumulator).
struct CenteredAccumulator {
    std::string_view cuda_accumulator, mean_result, squares_result, cuda_helper;
};
const CenteredAccumulator& centered_accumulator();

std::span<const RowReductionInfo> row_reduction_table();
const RowReductionInfo& row_reduction_info(RowReduction id);
std::optional<RowReduction> find_row_reduction(std::string_view name);

// The reference meaning of a builtin in float64 (bools are 0.0/1.0). Shared by the constant folder
// and the CPU reference evaluator, so the two can never disagree.
double apply_builtin(Builtin id, double a, double b = 0.0, double c = 0.0);

// Powers by these constant exponents are computed as torch's pow(Tensor, Scalar) computes them (x,
// x*x, x*x*x, sqrt, rsqrt, 1/x, 1/(x*x)), not by pow: they differ at -0 and -inf (rsqrt(-0) is
// -inf where pow(-0, -0.5) is +inf; sqrt(-inf) is nan where pow gives +inf). The one list: the CUDA
// printer spells these forms (`cuda`: {0} the base, {1} the literal 1), and every float64
// evaluation of a power whose exponent is a constant node (the reference, the folders) goes through
// power_by_constant. A power by a tensor is pow, as in torch.
struct ExactPower {
    double exponent;
    std::string_view cuda;
};
std::optional<ExactPower> exact_power(double exponent);
double power_by_constant(double base, double exponent);
// apply_builtin where every argument is a constant (the folders): a power uses power_by_constant.
double fold_builtin(Builtin id, double a, double b = 0.0, double c = 0.0);

}  // namespace lossjit
