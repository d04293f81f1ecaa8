// dump: readable text for each stage, for `lossjit run --dump ast|checked` and the tests.
#include <algorithm>

#include <fmt/format.h>

#include "ir/print.hpp"
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
        case ast::ExprKind::Index: kind = "index"; break;
        case ast::ExprKind::Tuple: kind = "tuple"; break;
    }
    out += fmt::format("{} {} @{}:{}\n", kind, e.text, e.pos.line, e.pos.column);
    for (const auto& a : e.args) dump_expr(*a, depth + 1, out);
}

}  // namespace

std::string dump_ast(const ast::Program& program) {
    std::string out;
    for (const auto& st : program.statements) {
        out += fmt::format("{} {} @{}:{}\n", st.kind == ast::Statement::Kind::Param ? "param" : "binding", st.name,
                           st.pos.line, st.pos.column);
        dump_expr(*st.value, 1, out);
    }
    if (!program.results.empty()) {
        std::vector<std::string> names;
        for (const auto& r : program.results) names.push_back(fmt::format("{} @{}:{}", r.name, r.pos.line, r.pos.column));
        out += fmt::format("results {}\n", fmt::join(names, ", "));
    }
    out += "body\n";
    dump_expr(*program.body, 1, out);
    return out;
}

std::string dump_checked(const ir::Program& program) {
    std::string out;
    out += fmt::format("inputs: {}\n", program.inputs.empty() ? "(none)" : fmt::format("{}", fmt::join(program.inputs, ", ")));
    std::vector<std::string> params;
    for (std::size_t i = 0; i < program.caller_params(); ++i)
        params.push_back(fmt::format("{} = {}", program.params[i].name, number_text(program.params[i].default_value)));
    out += fmt::format("params: {}\n", params.empty() ? "(none)" : fmt::format("{}", fmt::join(params, ", ")));
    // Each statistic under the name the program reads it by (the two-phase rule: one pass each, first).
    for (std::size_t i = 0; i < program.statistics.size(); ++i) {
        std::string name = fmt::format("statistic {}", i);
        for (const auto& statistic : program.statistics)
            for (const auto& p : statistic->params)
                if (p.statistic == static_cast<int>(i)) name = p.name;
        for (const auto& p : program.params)
            if (p.statistic == static_cast<int>(i)) name = p.name;
        out += fmt::format("statistic (a pass of its own, first): {} = {}\n", name, statistic_text(*program.statistics[i]));
    }
    out += fmt::format("reduction: {}\n", ir::to_string(program.reduction));
    const ExpressionPrinter printer(program, PrintStyle::Language);
    for (const auto& b : program.bindings) out += fmt::format("{} = {}\n", b.name, printer.define(b.node));
    out += fmt::format("body: {}\n", printer.define(program.body));
    if (!program.results.empty()) {
        std::vector<std::string> names;
        for (const auto& r : program.results) names.push_back(r.name);
        out += fmt::format("results (one pass computes all; gradients are of the first): {}\n", fmt::join(names, ", "));
    }
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
    ExpressionPrinter printer(program, PrintStyle::Language);  // shared terms named once
    // The seed: what the loss gives each element (ir::NodeKind::Seed), named g unless an input is;
    // those of a Composite program's further reductions g1, g2, ...
    std::string seed = "g";
    auto seeds_taken = [&] {
        for (std::size_t j = 0; j < std::max<std::size_t>(program.gradient_totals.size(), 1); ++j)
            if (taken(j > 0 ? seed + std::to_string(j) : seed)) return true;
        return false;
    };
    while (seeds_taken()) seed += "_";
    for (std::size_t id = 0; id < program.nodes.size(); ++id) {
        const ir::Node& n = program.nodes[id];
        if (n.kind == ir::NodeKind::Seed) printer.name(static_cast<int>(id), n.slot > 0 ? seed + std::to_string(n.slot) : seed);
    }
    std::string prefix = "_";
    int count = 0;
    for (int id : shared_nodes(program, roots)) {
        ++count;
        std::string name = prefix + std::to_string(count);
        while (taken(name)) name = (prefix += "_") + std::to_string(count);
        out += fmt::format("{} = {}\n", name, printer.define(id));
        printer.name(id, name);
    }
    const std::string scale = program.gradients_only
                                  ? fmt::format("1 (the upstream gradient is the input {}; the sum itself is not computed)",
                                                program.inputs.back())
                              : program.reduction == ir::Reduction::Sum         ? "the upstream gradient"
                              : program.reduction == ir::Reduction::Mean      ? "the upstream gradient / N (the count mean divides by)"
                              : program.reduction == ir::Reduction::BatchMean ? "the upstream gradient / (size of dimension 0)"
                              : program.reduction == ir::Reduction::Composite
                                  ? "the upstream gradient times d value / d (its reduction), over that reduction's divisor"
                                  : "the upstream gradient's element";
    out += fmt::format("# per element, {} = {}; summed where the input is broadcast\n", seed, scale);
    if (program.gradient_totals.size() > 1) {
        // Name each further seed by the reduction it stands for.
        const auto totals = row_totals(program);
        for (std::size_t j = 0; j < program.gradient_totals.size(); ++j) {
            const ast::Pos at = program.node(totals[static_cast<std::size_t>(program.gradient_totals[j])].node).pos;
            out += fmt::format("#   {}: of the reduction at {}:{}\n", j > 0 ? seed + std::to_string(j) : seed, at.line, at.column);
        }
    }
    for (const auto& d : program.derivatives)
        out += fmt::format("d/d{} = {}\n", program.inputs[static_cast<std::size_t>(d.input)],
                           printer.print(d.node));
    return out;
}

std::string dump_language() {
    auto call = [](const BuiltinInfo& row) {
        constexpr std::string_view kArgs[] = {"x", "y", "z"};
        std::string text = std::string(row.name) + "(";
        for (int i = 0; i < row.arity; ++i) text += fmt::format("{}{}", i ? ", " : "", kArgs[i]);
        return text + (row.variadic ? ", ...)" : ")");
    };
    auto gradient = [](const BuiltinInfo& row) -> std::string {
        switch (row.gradient) {
            case Gradient::None: return "none (piecewise constant)";
            case Gradient::Stopped: return "none (detached)";
            case Gradient::Refused: return "refused (no derivative)";
            case Gradient::Rule: return "rule (ir/differentiate.cpp)";
            case Gradient::Formula: break;
        }
        std::vector<std::string> parts;
        constexpr std::string_view kArgs[] = {"x", "y", "z"};
        for (int i = 0; i < row.arity; ++i)
            if (!row.derivative[static_cast<std::size_t>(i)].empty())
                parts.push_back(fmt::format("d/d{}: {}", kArgs[i], row.derivative[static_cast<std::size_t>(i)]));
        return fmt::format("{}", fmt::join(parts, "; "));
    };
    std::string out = "operators (precedence 1 binds loosest; x, y, z the operands, g the upstream gradient, "
                      "self the result):\n";
    std::vector<const BuiltinInfo*> operators;
    for (const auto& row : builtin_table())
        if (row.is_operator()) operators.push_back(&row);
    std::stable_sort(operators.begin(), operators.end(),
                     [](const auto* a, const auto* b) { return a->precedence < b->precedence; });
    for (const auto* row : operators) {
        const std::string form = row->arity == 3   ? "x ? y : z"
                                 : row->arity == 1 ? fmt::format("{}x", row->op)
                                                   : fmt::format("x {} y", row->op);
        out += fmt::format("  {:<2} {:<10} {:<50} {}\n", row->precedence, form, row->summary, gradient(*row));
    }
    out += "functions:\n";
    for (const auto& row : builtin_table())
        if (!row.name.empty()) out += fmt::format("  {:<16} {:<50} {}\n", call(row), row.summary, gradient(row));
    out += "along rows: dimension -1, another (1), or several ((2, 3)) (one value per row; x[y] takes column y of each row):\n";
    for (const auto& row : row_reduction_table())
        out += fmt::format("  {:<16} {:<50} d/de_j: {}\n", fmt::format("{}(e, -1)", row.name), row.meaning, row.gradient_summary);
    out += fmt::format("  {:<16} {:<50} d/dx_j: 1 at column y, else 0\n", "x[y]",
                       "column y (an integer input) of each row; nan outside [0, C)");
    out += "whole tensor (one number: a program's body, or several combined by arithmetic into one):\n";
    for (const auto& row : whole_reduction_table())
        out += fmt::format("  {:<16} {:<50} d/de: {}\n", fmt::format("{}(e)", row.name), row.meaning, row.gradient_summary);
    out += "constants:\n";
    for (const auto name : constant_names())
        out += fmt::format("  {:<16} {}\n", name, fmt::format("{}", *find_constant(name)));
    out += "statements (before the body, each ending in ';'):\n";
    out += fmt::format("  {:<16} {}\n", "NAME = e;", "binds a name for later statements and the body");
    out += fmt::format("  {:<16} {}\n", "param NAME = v;",
                       "a scalar parameter with its default (a kernel argument: setting it never recompiles)");
    out += "the end (instead of the body):\n";
    out += fmt::format("  {:<16} {}\n", "a, b, ...",
                       "several results, each a binding of one number, from one pass; gradients are of the first");
    return out;
}

}  // namespace lossjit
