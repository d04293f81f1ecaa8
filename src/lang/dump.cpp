// dump: readable text for each stage, for `lossjit run --dump ast|checked` and the tests.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "pipeline.hpp"

namespace lossjit {
namespace {

void dump_expr(const ast::Expr& e, int depth, std::string& out) {
    out += std::string(static_cast<std::size_t>(depth) * 2, ' ');
    const char* kind = "";
    switch (e.kind) {
        case ast::ExprKind::Number: kind = "number"; break;
        case ast::ExprKind::Name: kind = "name"; break;
        case ast::ExprKind::Call: kind = "call"; break;
        case ast::ExprKind::Unary: kind = "unary"; break;
        case ast::ExprKind::Binary: kind = "binary"; break;
        case ast::ExprKind::Conditional: kind = "conditional"; break;
    }
    out += fmt::format("{} {} @{}:{}\n", kind, e.text, e.pos.line, e.pos.column);
    for (const auto& a : e.args) dump_expr(*a, depth + 1, out);
}

std::string number_text(double v) {
    // A folded constant beyond float32's range is what the kernel sees (inf, or FLT_MAX just above
    // it): printing the float64 value would show a number the language refuses to read back.
    if (std::isfinite(v) && std::fabs(v) > FLT_MAX) v = static_cast<double>(static_cast<float>(v));
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return fmt::format("{}", v);  // shortest round-trip form
}

// Precedence of the language's operators, loosest first; used to print only the needed parens.
int precedence(const ir::Node& n) {
    // A negative constant prints with its sign, so it binds like unary minus: "(-2) ^ x", not
    // "-2 ^ x", which reads back as -(2 ^ x).
    if (n.kind == ir::NodeKind::Constant) return std::signbit(n.value) && !std::isnan(n.value) ? 8 : 100;
    if (n.kind != ir::NodeKind::Apply) return 100;
    switch (n.fn) {
        case Builtin::Select: return 1;
        case Builtin::Or: return 2;
        case Builtin::And: return 3;
        case Builtin::Eq: case Builtin::Ne: return 4;
        case Builtin::Lt: case Builtin::Le: case Builtin::Gt: case Builtin::Ge: return 5;
        case Builtin::Add: case Builtin::Sub: return 6;
        case Builtin::Mul: case Builtin::Div: case Builtin::Mod: return 7;
        case Builtin::Neg: case Builtin::Not: return 8;
        case Builtin::Pow: return 9;
        default: return 100;  // function call
    }
}

// `named`: nodes printed as a name (shared terms of a gradient dump), except the root itself.
using Names = std::map<int, std::string>;

std::string print_source(const ir::Program& p, int id, const Names* named = nullptr, bool root = true) {
    if (named && !root)
        if (const auto it = named->find(id); it != named->end()) return it->second;
    const ir::Node& n = p.node(id);
    switch (n.kind) {
        case ir::NodeKind::Constant: return number_text(n.value);
        case ir::NodeKind::Input: return p.inputs[static_cast<std::size_t>(n.slot)];
        case ir::NodeKind::Param: return p.params[static_cast<std::size_t>(n.slot)].name;
        case ir::NodeKind::Binding: return p.bindings[static_cast<std::size_t>(n.slot)].name;
        case ir::NodeKind::Apply: break;
    }
    const auto& info = builtin_info(n.fn);
    auto arg = [&](int i, bool right) {
        const int child = n.args[static_cast<std::size_t>(i)];
        std::string text = print_source(p, child, named, false);
        const bool is_name = named && named->count(child);
        const int mine = precedence(n), theirs = is_name ? 100 : precedence(p.node(child));
        const bool right_assoc = n.fn == Builtin::Pow;
        // The exponent of '^' may be a unary expression as it stands ("2 ^ -x"); parentheses there
        // would only add nesting levels, which count against the parser's depth limit.
        const bool unary_exponent = n.fn == Builtin::Pow && right && theirs == 8;
        if (!unary_exponent && (theirs < mine || (theirs == mine && right != right_assoc && n.arity == 2)))
            text = "(" + text + ")";
        return text;
    };
    if (!info.is_operator) {
        std::string text = std::string(info.name) + "(";
        for (int i = 0; i < n.arity; ++i)
            text += (i ? ", " : "") + print_source(p, n.args[static_cast<std::size_t>(i)], named, false);
        return text + ")";
    }
    if (n.fn == Builtin::Select) return arg(0, false) + " ? " + arg(1, false) + " : " + arg(2, true);
    if (n.arity == 1) return std::string(info.name) + arg(0, true);
    return arg(0, false) + " " + std::string(info.name) + " " + arg(1, true);
}

}  // namespace

std::string dump_ast(const ast::Program& program) {
    std::string out;
    for (const auto& st : program.statements) {
        out += fmt::format("{} {} @{}:{}\n", st.kind == ast::Statement::Kind::Param ? "param" : "binding", st.name,
                           st.pos.line, st.pos.column);
        dump_expr(*st.value, 1, out);
    }
    out += "body\n";
    dump_expr(*program.body, 1, out);
    return out;
}

std::string dump_checked(const ir::Program& program) {
    std::string out;
    out += fmt::format("inputs: {}\n", program.inputs.empty() ? "(none)" : fmt::format("{}", fmt::join(program.inputs, ", ")));
    std::vector<std::string> params;
    for (const auto& p : program.params) params.push_back(fmt::format("{} = {}", p.name, number_text(p.default_value)));
    out += fmt::format("params: {}\n", params.empty() ? "(none)" : fmt::format("{}", fmt::join(params, ", ")));
    out += fmt::format("reduction: {}\n", ir::to_string(program.reduction));
    for (const auto& b : program.bindings) out += fmt::format("{} = {}\n", b.name, print_source(program, b.node));
    out += fmt::format("body: {}\n", print_source(program, program.body));
    return out;
}

std::string dump_gradients(const ir::Program& program) {
    std::string out = dump_checked(program);
    std::vector<int> roots;
    for (const auto& d : program.derivatives) roots.push_back(d.node);
    const auto taken = [&](const std::string& name) {
        return std::find(program.inputs.begin(), program.inputs.end(), name) != program.inputs.end() ||
               std::any_of(program.params.begin(), program.params.end(), [&](const auto& p) { return p.name == name; }) ||
               std::any_of(program.bindings.begin(), program.bindings.end(), [&](const auto& b) { return b.name == name; });
    };
    Names named;
    std::string prefix = "_";
    for (int id : shared_nodes(program, roots)) {
        std::string name = prefix + std::to_string(named.size() + 1);
        while (taken(name)) name = (prefix += "_") + std::to_string(named.size() + 1);
        out += fmt::format("{} = {}\n", name, print_source(program, id, &named));
        named.emplace(id, name);
    }
    const std::string scale = program.reduction == ir::Reduction::Sum         ? "upstream"
                              : program.reduction == ir::Reduction::Mean      ? "upstream / N"
                              : program.reduction == ir::Reduction::BatchMean ? "upstream / (size of dimension 0)"
                                                                              : "the upstream gradient's element";
    out += fmt::format("# per element; the gradient is each times {}, summed where its input is broadcast\n", scale);
    for (const auto& d : program.derivatives)
        out += fmt::format("d/d{} = {}\n", program.inputs[static_cast<std::size_t>(d.input)],
                           print_source(program, d.node, &named, false));
    return out;
}

}  // namespace lossjit
