// emit: the checked program becomes CUDA C++. Fixed scaffolding comes from templates/; this file
// only prints expressions and the per-program declarations. Nothing of the user's text reaches the
// source except identifiers (already checked by the grammar, emitted behind a prefix) and numbers
// (re-printed from their parsed values).
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "lossjit/version.hpp"
#include "pipeline.hpp"
#include "templates.hpp"

namespace lossjit {
namespace {

std::string input_value(const std::string& name) { return "x_" + name; }
std::string input_param(const std::string& name) { return "in_" + name; }
std::string binding_value(const std::string& name) { return "b_" + name; }
std::string param_value(const std::string& name) { return "param_" + name; }

// "(a + b)" -> "a + b" where the text sits alone in a call's argument list.
std::string without_outer_parens(const std::string& text) {
    if (text.size() < 2 || text.front() != '(' || text.back() != ')') return text;
    int depth = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        depth += text[i] == '(' ? 1 : text[i] == ')' ? -1 : 0;
        if (depth == 0 && i + 1 < text.size()) return text;  // the first '(' closes early: "(a) + (b)"
    }
    return text.substr(1, text.size() - 2);
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

class Printer {
public:
    explicit Printer(const ir::Program& program) : program_(program) {}

    std::string print(int id) const {
        const ir::Node& n = program_.node(id);
        switch (n.kind) {
            case ir::NodeKind::Constant:
                if (n.type == ValueType::Bool) return n.value != 0.0 ? "true" : "false";
                return float_literal(n.value);
            case ir::NodeKind::Input: return input_value(program_.inputs[static_cast<std::size_t>(n.slot)]);
            case ir::NodeKind::Param: return param_value(program_.params[static_cast<std::size_t>(n.slot)].name);
            case ir::NodeKind::Binding: return binding_value(program_.bindings[static_cast<std::size_t>(n.slot)].name);
            case ir::NodeKind::Apply: return print_apply(n);
        }
        throw InternalError("printer met an unknown node kind");
    }

private:
    std::string print_as(int id, char wanted) const {
        const std::string text = print(id);
        if (wanted == 'b' && program_.node(id).type == ValueType::Float) return "(" + text + " != 0.0f)";
        return text;  // bool -> float converts implicitly in C++, to 0.0f or 1.0f
    }

    std::string print_apply(const ir::Node& n) const {
        const BuiltinInfo& info = builtin_info(n.fn);
        if (n.fn == Builtin::Pow) {
            if (auto special = print_power(n)) return *special;
        }
        std::array<std::string, 3> args;
        for (int i = 0; i < n.arity; ++i) {
            auto& arg = args[static_cast<std::size_t>(i)];
            arg = print_as(n.args[static_cast<std::size_t>(i)], info.arg_types[static_cast<std::size_t>(i)]);
            if (!info.is_operator) arg = without_outer_parens(arg);
        }
        return fmt::format(fmt::runtime(info.cuda), args[0], args[1], args[2]);
    }

    // Small constant exponents get the exact forms torch uses for them instead of powf.
    std::optional<std::string> print_power(const ir::Node& n) const {
        const ir::Node& exponent = program_.node(n.args[1]);
        if (exponent.kind != ir::NodeKind::Constant) return std::nullopt;
        const std::string base = print(n.args[0]);
        const double e = exponent.value;
        if (e == 1.0) return base;
        if (e == 2.0) return "lj_square(" + base + ")";
        if (e == 3.0) return "lj_cube(" + base + ")";
        if (e == 0.5) return "sqrtf(" + base + ")";
        if (e == -0.5) return "rsqrtf(" + base + ")";
        if (e == -1.0) return "(1.0f / " + base + ")";
        if (e == -2.0) return "(1.0f / lj_square(" + base + "))";
        return std::nullopt;
    }

    const ir::Program& program_;
};

std::vector<bool> used_inputs(const ir::Program& program) {
    std::vector<bool> used(program.inputs.size(), false);
    for (const auto& n : program.nodes)
        if (n.kind == ir::NodeKind::Input) used[static_cast<std::size_t>(n.slot)] = true;
    return used;
}

std::string substitute(std::string_view text, const std::map<std::string, std::string>& values) {
    std::string out;
    std::size_t pos = 0;
    while (true) {
        const auto open = text.find("{{", pos);
        if (open == std::string_view::npos) break;
        const auto close = text.find("}}", open);
        if (close == std::string_view::npos) throw InternalError("unterminated placeholder in a template");
        const std::string key(text.substr(open + 2, close - open - 2));
        const auto it = values.find(key);
        if (it == values.end()) throw InternalError("template placeholder {{" + key + "}} has no value");
        out.append(text.substr(pos, open - pos));
        out += it->second;
        pos = close + 2;
    }
    out.append(text.substr(pos));
    return out;
}

}  // namespace

KernelSpec KernelSpec::for_layout(const Layout& layout, bool is_map, int block_threads) {
    KernelSpec spec;
    spec.rank = static_cast<int>(layout.dims.size());
    for (const auto& a : layout.inputs) spec.contiguous_inputs.push_back(a.contiguous);
    spec.contiguous_output = !is_map || layout.output.contiguous;
    spec.block_threads = block_threads;
    return spec;
}

std::string KernelSpec::signature() const {
    std::string access;
    for (bool c : contiguous_inputs) access += c ? 'c' : 's';
    return fmt::format("rank {}, inputs [{}], output {}, {} threads/block", rank, access,
                       contiguous_output ? 'c' : 's', block_threads);
}

std::string print_expression(const ir::Program& program, int node) { return Printer(program).print(node); }

std::string emit_cuda(const ir::Program& program, const KernelSpec& spec) {
    if (spec.contiguous_inputs.size() != program.inputs.size())
        throw InternalError("kernel spec and program disagree on the number of inputs");
    if (spec.rank < 1 || spec.rank > kMaxRank) throw InternalError("kernel rank out of range");
    if (spec.block_threads % 32 != 0 || spec.block_threads < 32 || spec.block_threads > 1024)
        throw UsageError(fmt::format("threads per block must be a multiple of 32 in [32, 1024], not {}",
                                     spec.block_threads));

    const Printer printer(program);
    const auto used = used_inputs(program);
    const std::string indent(8, ' ');

    std::string parameters;
    for (std::size_t k = 0; k < program.inputs.size(); ++k) {
        const auto& name = program.inputs[k];
        parameters += spec.contiguous_inputs[k]
                          ? fmt::format(",\n    const float* __restrict__ {}", input_param(name))
                          : fmt::format(",\n    const lj::Strided {}", input_param(name));
    }
    for (const auto& p : program.params) parameters += fmt::format(",\n    const float {}", param_value(p.name));

    bool any_strided = program.is_map() && !spec.contiguous_output;
    for (std::size_t k = 0; k < program.inputs.size(); ++k)
        any_strided = any_strided || (used[k] && !spec.contiguous_inputs[k]);

    std::string element;
    if (any_strided) {
        element += fmt::format("{}long long c[{}];\n{}lj::coords<{}>(extents, i, c);\n", indent, spec.rank,
                               indent, spec.rank);
    }
    for (std::size_t k = 0; k < program.inputs.size(); ++k) {
        if (!used[k]) continue;
        const auto& name = program.inputs[k];
        element += spec.contiguous_inputs[k]
                       ? fmt::format("{}const float {} = {}[i];\n", indent, input_value(name), input_param(name))
                       : fmt::format("{}const float {} = {}.ptr[lj::offset<{}>(c, {}.strides)];\n", indent,
                                     input_value(name), input_param(name), spec.rank, input_param(name));
    }
    for (const auto& b : program.bindings) {
        const bool is_bool = program.node(b.node).type == ValueType::Bool;
        element += fmt::format("{}const {} {} = {};\n", indent, is_bool ? "bool" : "float", binding_value(b.name),
                               without_outer_parens(printer.print(b.node)));
    }
    element += fmt::format("{}const float value = {};", indent, without_outer_parens(printer.print(program.body)));

    std::map<std::string, std::string> values{
        {"VERSION", kVersion},
        {"SIGNATURE", spec.signature()},
        {"PRELUDE", std::string(templates::prelude_cuh)},
        {"BLOCK_THREADS", std::to_string(spec.block_threads)},
        {"PARAMETERS", parameters},
        {"ELEMENT", element},
    };
    if (!program.is_map()) {
        values["REDUCTION"] = std::string(ir::to_string(program.reduction));
        return substitute(templates::reduce_cu, values);
    }
    values["OUTPUT_PARAMETER"] = spec.contiguous_output ? "float* out" : "const lj::StridedOut out";
    values["STORE"] = spec.contiguous_output ? "out[i]" : fmt::format("out.ptr[lj::offset<{}>(c, out.strides)]", spec.rank);
    return substitute(templates::map_cu, values);
}

}  // namespace lossjit
