// lossjit's pipeline, one stage per file. This header is the contract between the stages:
//
//   parse.cpp      program text               -> ast::Program   (syntax, positions)
//   check.cpp      ast::Program               -> ir::Program    (names, arity, types, folding)
//   layout.cpp     input shapes and strides   -> Layout         (broadcasting, collapsed dims)
//   emit.cpp       ir::Program + KernelSpec   -> CUDA C++       (templates/ + expression printer)
//   compile.cpp    CUDA C++                   -> CUBIN or PTX   (NVRTC)
//   cache.cpp      source + target            -> kernel image   (memory map + disk directory)
//   driver.cpp     the CUDA driver API, dlopen'ed at run time, and RAII owners for its handles
//   launch.cpp     lossjit::Loss: picks the kernel for a layout, launches it
//   reference.cpp  ir::Program + host tensors -> float64 values (the CPU reference)
//   dump.cpp       ast / ir                   -> text for `lossjit --dump`
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ast.hpp"
#include "lossjit/tensor.hpp"
#include "program.hpp"

namespace lossjit {

// ---- shared limits and helpers ------------------------------------------------------------------
// Deeper programs are refused (parse: syntax tree; check: the checked tree, where min/max of many
// arguments add levels): every later stage recurses over the tree, and a bounded depth is what
// keeps a hostile string from overflowing the stack.
constexpr int kMaxNesting = 200;

// A caller's string as it may appear in an error message: bytes outside printable ASCII as \xNN
// (a NUL would cut what() short), and at most a few dozen characters.
std::string printable(std::string_view text);

// ---- parse -------------------------------------------------------------------------------------
ast::Program parse(std::string_view source, std::string_view source_name);

// ---- check -------------------------------------------------------------------------------------
struct CheckOptions {
    std::vector<std::string> inputs;      // the caller's input order; empty: order of appearance
    std::vector<ir::ParamDecl> params;    // caller-declared parameters (override program defaults)
};
ir::Program check(const ast::Program& program, const CheckOptions& options);

// ---- layout ------------------------------------------------------------------------------------
constexpr int kMaxRank = 8;  // dimensions left after collapsing; the kernel ABI holds this many

struct OperandShape {
    std::string_view name;
    Shape shape;
    std::vector<std::int64_t> strides;  // in elements; empty = contiguous
};

struct OperandAccess {
    bool contiguous = true;  // element i lives at offset i: no index arithmetic at all
    std::array<std::int64_t, kMaxRank> strides{};  // per collapsed dim; 0 where broadcast
};

struct Layout {
    Shape shape;                      // the broadcast shape the user sees
    std::int64_t count = 0;           // its element count
    std::vector<std::int64_t> dims;   // collapsed extents, outermost first, 1 <= rank <= kMaxRank
    std::vector<OperandAccess> inputs;
    OperandAccess output;             // maps only
};

// Broadcast the inputs (NumPy rules: align trailing dimensions; size 1 stretches), check the
// output shape if there is one, and merge adjacent dimensions that every operand walks alike.
Layout plan_layout(std::span<const OperandShape> inputs, const OperandShape* output);

Shape broadcast_shapes(std::span<const OperandShape> inputs);

// ---- emit --------------------------------------------------------------------------------------
inline constexpr const char* kKernelName = "lossjit_kernel";

// What a compiled kernel is specialised on besides the program. Part of the cache key (through the
// source it produces).
struct KernelSpec {
    int rank = 1;
    std::vector<bool> contiguous_inputs;
    bool contiguous_output = true;
    int block_threads = 256;

    static KernelSpec for_layout(const Layout& layout, bool is_map, int block_threads);
    std::string signature() const;  // short text, e.g. "r2.cs.c.b256"
};

std::string emit_cuda(const ir::Program& program, const KernelSpec& spec);

// The expression printer alone: one CUDA expression per node, for tests and dumps.
std::string print_expression(const ir::Program& program, int node);

// ---- dump --------------------------------------------------------------------------------------
std::string dump_ast(const ast::Program& program);
std::string dump_checked(const ir::Program& program);

}  // namespace lossjit

namespace lossjit {

// ---- reference (CPU, float64) ------------------------------------------------------------------
// `inputs` are host float32 base pointers in program input order; `params` current values.
double reference_reduce(const ir::Program& program, const Layout& layout, std::span<const float* const> inputs,
                        std::span<const double> params);
void reference_map(const ir::Program& program, const Layout& layout, std::span<const float* const> inputs,
                   std::span<const double> params, float* output);

// What a reduction's total is divided by: the element count (mean), the size of dimension 0
// (batchmean) or 1 (sum). Shared by the kernel launch and the reference.
double reduction_divisor(const ir::Program& program, const Layout& layout);

}  // namespace lossjit
