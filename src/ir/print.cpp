#include "ir/print.hpp"

#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "lossjit/errors.hpp"

namespace lossjit {
namespace {

constexpr int kAtom = 100;  // names, numbers and calls: never parenthesised

// The slot of the parameter that node `n` divides by, or -1 where it is not such a division: the
// printer's lj_div_by_param and the members param_reciprocals declares for it.
int divisor_param(const ir::Program& program, const ir::Node& n) {
    if (n.kind != ir::NodeKind::Apply || n.fn != Builtin::Div) return -1;
    const ir::Node& divisor = program.node(n.args[1]);
    return divisor.kind == ir::NodeKind::Param ? divisor.slot : -1;
}

// Whether two nodes compute the same value: the same node, or the same operation on the same values
// (the checker makes a node for each occurrence of a name).
bool same_value(const ir::Program& program, int i, int j) {
    if (i == j) return true;
    const ir::Node& a = program.node(i);
    const ir::Node& b = program.node(j);
    if (a.kind != b.kind || a.type != b.type || a.fn != b.fn || a.slot != b.slot || a.arity != b.arity) return false;
    switch (a.kind) {
        case ir::NodeKind::Input:
        case ir::NodeKind::Param:
        case ir::NodeKind::Binding: return true;
        case ir::NodeKind::Constant: return std::memcmp(&a.value, &b.value, sizeof a.value) == 0;
        case ir::NodeKind::Apply:
            for (int k = 0; k < a.arity; ++k)
                if (!same_value(program, a.args[static_cast<std::size_t>(k)], b.args[static_cast<std::size_t>(k)])) return false;
            return true;
        default: return false;  // row-wise nodes: not looked into
    }
}

// `xlogy(a, a) - a * log(b)`, KL's term (either order of the product).
struct KlTerm {
    int a, b;
    int log;  // the node log(b)
};
std::optional<KlTerm> kl_term(const ir::Program& program, const ir::Node& n) {
    if (n.kind != ir::NodeKind::Apply || n.fn != Builtin::Sub) return std::nullopt;
    const ir::Node& left = program.node(n.args[0]);
    const ir::Node& right = program.node(n.args[1]);
    if (left.kind != ir::NodeKind::Apply || left.fn != Builtin::Xlogy || !same_value(program, left.args[0], left.args[1]))
        return std::nullopt;
    if (right.kind != ir::NodeKind::Apply || right.fn != Builtin::Mul) return std::nullopt;
    const int a = left.args[0];
    for (int side = 0; side < 2; ++side) {
        const ir::Node& log = program.node(right.args[static_cast<std::size_t>(1 - side)]);
        if (same_value(program, right.args[static_cast<std::size_t>(side)], a) && log.kind == ir::NodeKind::Apply && log.fn == Builtin::Log)
            return KlTerm{a, log.args[0], right.args[static_cast<std::size_t>(1 - side)]};
    }
    return std::nullopt;
}

}  // namespace

std::string cuda_input_name(const std::string& name) { return "x_" + name; }
std::string cuda_binding_name(const std::string& name) { return "b_" + name; }
std::string cuda_param_name(const std::string& name) { return "param_" + name; }
std::string cuda_param_reciprocal_name(const std::string& name) { return "rcp_param_" + name; }
std::string cuda_seed_name(int slot) { return slot > 0 ? fmt::format("seed_{}", slot) : std::string("seed_"); }

std::string without_outer_parens(const std::string& text) {
    if (text.size() < 2 || text.front() != '(' || text.back() != ')') return text;
    int depth = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        depth += text[i] == '(' ? 1 : text[i] == ')' ? -1 : 0;
        if (depth == 0 && i + 1 < text.size()) return text;  // the first '(' closes early: "(a) + (b)"
    }
    return text.substr(1, text.size() - 2);
}

std::string number_text(double v) {
    // A folded constant beyond float32's range is what the kernel sees (inf, or FLT_MAX just above
    // it): printing the float64 value would show a number the language refuses to read back.
    if (std::isfinite(v) && std::fabs(v) > FLT_MAX) v = static_cast<double>(static_cast<float>(v));
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return fmt::format("{}", v);  // shortest round-trip form
}

std::string float_literal(double value) {
    const float f = static_cast<float>(value);
    if (std::isnan(f)) return "__int_as_float(0x7fffffff)";
    if (std::isinf(f)) return f > 0 ? "__int_as_float(0x7f800000)" : "(-__int_as_float(0x7f800000))";
    std::string text = fmt::format("{:.9g}", f);  // 9 significant digits round-trip any float
    if (text.find_first_of(".e") == std::string::npos) text += ".0";
    text += "f";
    return f < 0 || (f == 0 && std::signbit(f)) ? "(" + text + ")" : text;
}

std::string double_literal(double value) {
    if (std::isnan(value)) return "__longlong_as_double(0x7ff8000000000000ll)";
    if (std::isinf(value))
        return value > 0 ? "__longlong_as_double(0x7ff0000000000000ll)" : "(-__longlong_as_double(0x7ff0000000000000ll))";
    std::string text = fmt::format("{}", value);  // the shortest text that reads back as this double
    if (text.find_first_of(".e") == std::string::npos) text += ".0";
    return value < 0 || (value == 0 && std::signbit(value)) ? "(" + text + ")" : text;
}

std::vector<bool> uncontracted_nodes(const ir::Program& program) {
    std::vector<bool> marked(program.nodes.size(), false);
    std::vector<int> stack;
    for (const auto& n : program.nodes) {
        if (n.kind != ir::NodeKind::RowReduce) continue;
        const auto reduction = static_cast<RowReduction>(n.slot);
        if (reduction == RowReduction::Max || reduction == RowReduction::Min) stack.push_back(n.args[0]);
    }
    while (!stack.empty()) {
        const int id = stack.back();
        stack.pop_back();
        if (id < 0 || marked[static_cast<std::size_t>(id)]) continue;
        marked[static_cast<std::size_t>(id)] = true;
        const ir::Node& n = program.node(id);
        if (n.kind == ir::NodeKind::Binding) stack.push_back(program.bindings[static_cast<std::size_t>(n.slot)].node);
        if (n.kind == ir::NodeKind::Apply)
            for (int i = 0; i < n.arity; ++i) stack.push_back(n.args[static_cast<std::size_t>(i)]);
    }
    return marked;
}

ExpressionPrinter::ExpressionPrinter(const ir::Program& program, PrintStyle style) : program_(program), style_(style) {
    if (style_ != PrintStyle::Language) uncontracted_ = uncontracted_nodes(program_);
}

std::string ExpressionPrinter::literal(double value) const {
    return style_ == PrintStyle::Cuda64 ? double_literal(value) : float_literal(value);
}

std::string ExpressionPrinter::print(int id) const {
    if (const auto it = names_.find(id); it != names_.end()) return it->second;
    return define(id);
}

std::string ExpressionPrinter::define(int id) const {
    const ir::Node& n = program_.node(id);
    const bool cuda = style_ != PrintStyle::Language;
    switch (n.kind) {
        case ir::NodeKind::Constant:
            if (!cuda) return number_text(n.value);
            if (n.type == ValueType::Bool) return n.value != 0.0 ? "true" : "false";
            return literal(n.value);
        case ir::NodeKind::Input: {
            const auto& name = program_.inputs[static_cast<std::size_t>(n.slot)];
            return cuda ? cuda_input_name(name) : name;
        }
        case ir::NodeKind::Param: {
            const auto& name = program_.params[static_cast<std::size_t>(n.slot)].name;
            return cuda ? cuda_param_name(name) : name;
        }
        case ir::NodeKind::Binding: {
            const auto& name = program_.bindings[static_cast<std::size_t>(n.slot)].name;
            return cuda ? cuda_binding_name(name) : name;
        }
        case ir::NodeKind::Apply: return cuda ? cuda_apply(id, n) : language_apply(n);
        case ir::NodeKind::RowReduce:
        case ir::NodeKind::Take:
        case ir::NodeKind::Total:
        case ir::NodeKind::RowLength:
        case ir::NodeKind::TakeCount:
        case ir::NodeKind::OneHot:
        case ir::NodeKind::InRow:
        case ir::NodeKind::ScatterAdd:
            // A kernel computes these in its own loops (kinds/by_rows_emit.cpp) and names the results.
            if (cuda) throw InternalError("the CUDA printer met a row-wise node that was not named");
            return language_reduction(n);
        case ir::NodeKind::Seed:
            // Seeds of the further reductions of a Composite program have their slot; dumps call them g.
            if (cuda) return cuda_seed_name(n.slot);
            return n.slot > 0 ? fmt::format("g{}", n.slot) : std::string("g");
    }
    throw InternalError("printer met an unknown node kind");
}

// Binding strength as the language parses it; what decides the parentheses.
int ExpressionPrinter::precedence(int id) const {
    if (names_.count(id)) return kAtom;
    const ir::Node& n = program_.node(id);
    // A negative constant prints with its sign, so it binds like unary minus: "(-2) ^ x", not
    // "-2 ^ x", which reads back as -(2 ^ x).
    if (n.kind == ir::NodeKind::Constant)
        return std::signbit(n.value) && !std::isnan(n.value) ? builtin_info(Builtin::Neg).precedence : kAtom;
    if (n.kind != ir::NodeKind::Apply) return kAtom;
    const BuiltinInfo& info = builtin_info(n.fn);
    return info.is_operator() ? info.precedence : kAtom;
}

std::string ExpressionPrinter::language_apply(const ir::Node& n) const {
    const BuiltinInfo& info = builtin_info(n.fn);
    const int mine = info.precedence;
    auto arg = [&](int i, bool right) {
        const int child = n.args[static_cast<std::size_t>(i)];
        std::string text = print(child);
        const int theirs = precedence(child);
        const bool right_assoc = info.associativity == Associativity::Right;
        // The exponent of '^' may be a unary expression as it stands ("2 ^ -x"); parentheses there
        // would only add nesting levels, which count against the parser's depth limit.
        const bool unary_exponent = n.fn == Builtin::Pow && right && theirs == builtin_info(Builtin::Neg).precedence;
        if (!unary_exponent && (theirs < mine || (theirs == mine && right != right_assoc && n.arity == 2)))
            text = "(" + text + ")";
        return text;
    };
    if (!info.is_operator()) {
        std::string text = std::string(info.name) + "(";
        for (int i = 0; i < n.arity; ++i) text += (i ? ", " : "") + print(n.args[static_cast<std::size_t>(i)]);
        return text + ")";
    }
    if (n.arity == 3) return arg(0, false) + " ? " + arg(1, false) + " : " + arg(2, true);
    if (n.arity == 1) return std::string(info.op) + arg(0, true);
    return arg(0, false) + " " + std::string(info.op) + " " + arg(1, true);
}

std::string ExpressionPrinter::language_reduction(const ir::Node& n) const {
    const std::string argument = n.arity > 0 ? without_outer_parens(print(n.args[0])) : std::string();
    // The program's row dimensions, as written: -1, 1, or (2, 3).
    const auto dims = program_.reduced_dims();
    const std::string along = dims.size() == 1 ? std::to_string(dims[0]) : fmt::format("({})", fmt::join(dims, ", "));
    switch (n.kind) {
        case ir::NodeKind::RowReduce:
            return fmt::format("{}({}, {})", row_reduction_info(static_cast<RowReduction>(n.slot)).name, argument, along);
        case ir::NodeKind::Total:
            return fmt::format("{}({})", ir::to_string(static_cast<ir::Reduction>(n.slot)), argument);
        // The row's length (var's C): printed as what it is in the language, so that a dump parses back.
        case ir::NodeKind::RowLength: return fmt::format("sum(1, {})", along);
        // Only in derivatives, which dumps show but nobody parses back.
        case ir::NodeKind::OneHot: return fmt::format("onehot({})", print(n.args[0]));
        case ir::NodeKind::InRow: return fmt::format("inrow({})", print(n.args[0]));
        case ir::NodeKind::TakeCount: return "K";
        case ir::NodeKind::ScatterAdd: return fmt::format("scatter_add({}, {})", argument, print(n.args[1]));
        case ir::NodeKind::Take: {
            std::string values = print(n.args[0]);
            if (precedence(n.args[0]) != kAtom) values = "(" + values + ")";
            return fmt::format("{}[{}]", values, print(n.args[1]));
        }
        default: break;
    }
    throw InternalError("language_reduction called for a pointwise node");
}

std::string ExpressionPrinter::cuda_as(int id, char wanted) const {
    const std::string text = print(id);
    if (wanted == 'b' && program_.node(id).type == ValueType::Float) return "(" + text + " != " + literal(0) + ")";
    // A bool would convert to 0 or 1 implicitly where a C operator meets a float, but overloads
    // (fabs(float), fabs(double)) and templates (lj_max<T>, lj_mod<T> behind %) cannot choose for one:
    // converted explicitly everywhere.
    if (wanted == 'f' && program_.node(id).type == ValueType::Bool)
        return std::string(style_ == PrintStyle::Cuda64 ? "(double)" : "(float)") + text;
    return text;
}

std::string ExpressionPrinter::cuda_apply(int id, const ir::Node& n) const {
    const BuiltinInfo& info = builtin_info(n.fn);
    if (uncontracted_[static_cast<std::size_t>(id)]) {
        const char* rounded = n.fn == Builtin::Add ? "lj::add_rn" : n.fn == Builtin::Sub ? "lj::sub_rn"
                              : n.fn == Builtin::Mul ? "lj::mul_rn" : nullptr;
        if (rounded)
            return fmt::format("{}({}, {})", rounded, without_outer_parens(cuda_as(n.args[0], 'f')),
                               without_outer_parens(cuda_as(n.args[1], 'f')));
        // x^2 and x^3 only multiply (lj_square, lj_cube): with the adds around them rounded, nothing
        // fuses with them.
    }
    // KL's term with one logarithm (templates/lj_log.cuh: lj_kl_term, its error bound), where its
    // parts are not locals of their own: a shared log(b) is computed anyway.
    if (style_ == PrintStyle::Cuda && !uncontracted_[static_cast<std::size_t>(id)]) {
        if (const auto term = kl_term(program_, n)) {
            if (!names_.count(n.args[0]) && !names_.count(n.args[1]) && !names_.count(term->log)) {
                const std::string a = without_outer_parens(print(term->a));
                const std::string b = without_outer_parens(print(term->b));
                return common_paths_ ? fmt::format("lj_kl_term_common({}, {}, rare_)", a, b)
                                     : fmt::format("lj_kl_term({}, {})", a, b);
            }
        }
    }
    // Small constant exponents get the exact forms torch uses for them instead of powf.
    if (n.fn == Builtin::Pow && program_.node(n.args[1]).kind == ir::NodeKind::Constant) {
        if (const auto exact = exact_power(program_.node(n.args[1]).value))
            return fmt::format(fmt::runtime(exact->cuda), cuda_as(n.args[0], 'f'), literal(1));
    }
    // A float32 division by a constant: x (1/c) and one FMA correction, correctly rounded as the
    // division is, without its slow path (templates/lj_div.cuh says for which c and x).
    if (n.fn == Builtin::Div && style_ == PrintStyle::Cuda && program_.node(n.args[1]).kind == ir::NodeKind::Constant) {
        const float c = static_cast<float>(program_.node(n.args[1]).value);
        if (std::fabs(c) >= 0x1p-40f && std::fabs(c) <= 0x1p40f)
            return "lj_div_by(" + without_outer_parens(cuda_as(n.args[0], 'f')) + ", " + float_literal(c) + ", " +
                   float_literal(1.0f / c) + ")";
    }
    // By a parameter: the same with the reciprocal computed once per thread (param_reciprocals).
    if (const int slot = divisor_param(program_, n); slot >= 0 && style_ == PrintStyle::Cuda) {
        const auto& name = program_.params[static_cast<std::size_t>(slot)].name;
        return "lj_div_by_param(" + without_outer_parens(cuda_as(n.args[0], 'f')) + ", " + cuda_param_name(name) + ", " +
               cuda_param_reciprocal_name(name) + ")";
    }
    std::array<std::string, 3> args;
    for (int i = 0; i < n.arity; ++i) {
        auto& arg = args[static_cast<std::size_t>(i)];
        arg = cuda_as(n.args[static_cast<std::size_t>(i)], info.arg_types[static_cast<std::size_t>(i)]);
        if (!info.is_operator()) arg = without_outer_parens(arg);
    }
    const std::string_view pattern = common_paths_ && !info.cuda_common.empty() ? info.cuda_common : info.cuda;
    return fmt::format(fmt::runtime(pattern), args[0], args[1], args[2]);
}

std::string param_reciprocals(const ir::Program& program) {
    std::vector<bool> divisor(program.params.size(), false);
    for (const auto& n : program.nodes)
        if (const int slot = divisor_param(program, n); slot >= 0) divisor[static_cast<std::size_t>(slot)] = true;
    std::string members;
    for (std::size_t i = 0; i < divisor.size(); ++i) {
        if (!divisor[i]) continue;
        const auto& name = program.params[i].name;
        members += fmt::format("    Value {} = lj_div_reciprocal({});\n", cuda_param_reciprocal_name(name), cuda_param_name(name));
    }
    return members;
}

bool has_common_path(const ir::Program& program) {
    for (const auto& n : program.nodes)
        if (n.kind == ir::NodeKind::Apply && !builtin_info(n.fn).cuda_common.empty()) return true;
    return false;
}

}  // namespace lossjit
