// What the kinds' emitters (kinds/*_emit.cpp) share: template filling and the per-program
// declarations (emit.cpp).
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>

#include "lossjit/dtype.hpp"
#include "pipeline.hpp"

namespace lossjit {

// `text` with every {{KEY}} replaced by values[KEY] (InternalError for a key without a value).
std::string substitute(std::string_view text, const std::map<std::string, std::string>& values);

// The CUDA helpers (builtins table) of the functions the program applies, each after the ones it
// calls, in table order: a kernel carries only what it uses.
std::string function_helpers(const ir::Program& program);

// What every kernel starts with: the ABI (templates/abi.cuh), the prelude, the dtypes, and the
// program's helpers.
std::string kernel_prelude(const ir::Program& program);

// The kernel's constant for a dtype (templates/dtype.cuh): "lj::kFloat32", ...
std::string_view kernel_dtype(DType dtype);

// A chain of conditionals over `k` for per-input (or per-gradient) constants: after the loops
// unroll, k is a constant and the chain folds.
std::string per_index(std::span<const std::string> values, const std::string& fallback, const char* k);

struct KernelSpec;
// __launch_bounds__'s arguments for every template ({{LAUNCH_BOUNDS}}): the block's threads, and
// the blocks per SM its registers must allow where the spec asks for more than one.
std::string launch_bounds(const KernelSpec& spec);

}  // namespace lossjit
