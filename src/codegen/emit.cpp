// emit: what every kind's emitter shares (emit_detail.hpp): template filling, the prelude, the
// program's helpers. Each kind prints its own kernel (kinds/*_emit.cpp); fixed scaffolding comes
// from templates/, expressions from ir/print.cpp. Nothing of the user's text reaches the
// source except identifiers (already checked by the grammar, emitted behind a prefix) and numbers
// (re-printed from their parsed values).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <span>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "lossjit/version.hpp"
#include "pipeline.hpp"
#include "codegen/emit_detail.hpp"
#include "codegen/kernel_spec.hpp"
#include "codegen/kinds/parameters.hpp"
#include "codegen/templates.hpp"
#include "ir/print.hpp"

namespace lossjit {

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

std::string function_helpers(const ir::Program& program) {
    std::vector<bool> used(static_cast<std::size_t>(Builtin::Count_), false);
    auto use = [&](auto&& self, Builtin fn) -> void {
        if (fn == Builtin::Count_ || used[static_cast<std::size_t>(fn)]) return;
        used[static_cast<std::size_t>(fn)] = true;
        for (Builtin needed : builtin_info(fn).needs) self(self, needed);
    };
    for (const auto& node : program.nodes)
        if (node.kind == ir::NodeKind::Apply) use(use, node.fn);
    std::string helpers;
    for (const auto& row : builtin_table())
        if (used[static_cast<std::size_t>(row.id)]) helpers += row.cuda_helper;
    if (helpers.empty()) return {};
    return "// Functions whose CUDA counterpart differs from PyTorch's definition (src/lang/builtins.cpp).\n" + helpers;
}

std::string kernel_prelude(const ir::Program& program) {
    std::string prelude(templates::abi_cuh);
    prelude += templates::prelude_cuh;
    prelude += templates::dtype_cuh;
    prelude += function_helpers(program);
    return prelude;
}

std::string print_expression(const ir::Program& program, int node) {
    return ExpressionPrinter(program, PrintStyle::Cuda).print(node);
}

std::string_view kernel_dtype(DType dtype) {
    switch (dtype) {
        case DType::float32: return "lj::kFloat32";
        case DType::float64: return "lj::kFloat64";
        case DType::bfloat16: return "lj::kBFloat16";
        case DType::float16: return "lj::kFloat16";
        case DType::int32: return "lj::kInt32";
        case DType::int64: return "lj::kInt64";
        case DType::uint8: return "lj::kUInt8";
        case DType::boolean: return "lj::kBool";
    }
    throw InternalError("kernel_dtype: invalid DType");
}

std::string per_index(std::span<const std::string> values, const std::string& fallback, const char* k) {
    std::string text = fallback;
    for (std::size_t i = values.size(); i-- > 0;)
        if (values[i] != fallback) text = fmt::format("{} == {} ? {} : {}", k, i, values[i], text);
    return text;
}

std::string launch_bounds(const KernelSpec& spec) {
    if (spec.min_blocks_per_sm <= 1) return std::to_string(spec.block_threads);
    return fmt::format("{}, {}", spec.block_threads, spec.min_blocks_per_sm);
}

}  // namespace lossjit
