// The kernel kinds. Each is one unit with the same four parts, and nothing outside its files knows
// how it works:
//
//   choose     program + layout + operands + knobs + GPU -> KernelSpec (the variant and its numbers,
//              from the defaults table, defaults.cpp)
//   grid       KernelSpec + layout + occupancy          -> LaunchGrid (blocks, and the scratch its
//              summed gradients need)
//   emit       program + KernelSpec                     -> CUDA C++ (templates/ + ir/print.cpp)
//   arguments  program + KernelSpec                     -> the kernel's parameters (parameters.cpp:
//              one list for the emitted signature and the host's argument binding)
//
// The kinds, and the KernelSpec::Loop values each produces:
//   elementwise  (elementwise.cpp, elementwise_emit.cpp): maps, whole-tensor reductions and their
//                fused gradients, element by element: the rows loop (tiles of the innermost
//                dimension, wide loads) or the strided loop (coordinates per element).
//   columns      (columns.cpp; its element is elementwise's): fused gradients summed over rows, for
//                an input of one row broadcast over all others (t [C] against p [N, C]).
//   by rows      (by_rows.cpp, by_rows_emit.cpp): programs that reduce along rows (any dimensions)
//                (logsumexp(x, -1), x[y], several totals): a team of threads per row.
// The dispatcher (kinds.cpp) picks the kind from the program and the layout; KernelSpec::choose,
// plan_grid and emit_cuda are its entry points.
//
// A contract every kind keeps: a gradient of a full-shape input may be written over that input
// (linear_loss writes a chunk's d loss / d logits over its logits, runtime/linear_loss.cpp). So an
// element's gradient is written by the thread that last reads the element, after every read of it
// and of the rest of its row (a row's values, totals and takes are done before its last pass), never
// before another thread's read. tests/test_linear_loss.cpp runs each kind so against the reference.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "codegen/kinds/defaults.hpp"
#include "pipeline.hpp"

namespace lossjit::kinds {

// ---- elementwise ----------------------------------------------------------------------------------
// Also decides whether the columns loop runs (a gradient summed over rows), and then lets
// choose_columns adjust the spec.
KernelSpec choose_elementwise(const ir::Program& program, const Layout& layout, const KernelOperands& operands,
                              const Knobs& knobs, bool tuned, const GpuFacts& gpu);
LaunchGrid elementwise_grid(const ir::Program& program, const KernelSpec& spec, const Layout& layout,
                            const Occupancy& occupancy);
// Also the columns loop's source: the same element, another loop and template.
std::string emit_elementwise(const ir::Program& program, const KernelSpec& spec);
// A program small enough for 1024 threads a block with gradients (SmallGradientThreads).
bool small_gradient_program(const ir::Program& program, const GpuFacts& gpu);
// An application of exp, log, pow (not by an exponent printed exactly: x^2) or another function of
// Cost::Transcendental; and how many the program makes.
bool transcendental_call(const ir::Program& program, const ir::Node& node);
int transcendental_calls(const ir::Program& program);
// Every input the spec reads is of 16 bits or fewer.
bool sixteen_bit_inputs(const KernelSpec& spec);

// ---- columns --------------------------------------------------------------------------------------
// What the columns loop changes in an elementwise spec (threads, rows walked at once, registers).
void choose_columns(KernelSpec& spec, const ir::Program& program, const Layout& layout, const Knobs& knobs,
                    const GpuFacts& gpu);
LaunchGrid columns_grid(const ir::Program& program, const KernelSpec& spec, const Layout& layout,
                        const Occupancy& occupancy);

// ---- by rows --------------------------------------------------------------------------------------
KernelSpec choose_by_rows(const ir::Program& program, const Layout& layout, const KernelOperands& operands,
                          const Knobs& knobs, bool tuned, const GpuFacts& gpu);
LaunchGrid by_rows_grid(const ir::Program& program, const KernelSpec& spec, const Layout& layout,
                        const Occupancy& occupancy);
std::string emit_by_rows(const ir::Program& program, const KernelSpec& spec);
// What the spec's walks over a row do, from one analysis of the program (the spec's row cache and
// prefetch are ignored): the inputs (kernel indices) more than one walk reads, what a row cache
// would hold; those any walk reads (what a thread's loads along the row are of); and whether a
// walk merges a mean and the squared deviations from it in one accumulator (layer norm, var:
// float64 work at every element).
struct RowWalks {
    std::vector<int> read_again;
    std::vector<int> walked;  // ascending
    bool centered = false;
    bool walks_ahead = false;  // the first walk could be done ahead, by the row before (KernelSpec::row_walk_ahead)
    int count = 0;             // walks over each row
    // Whether some walk loads kernel input `input` along the row (not only takes it at a column).
    bool loads(std::size_t input) const {
        return std::binary_search(walked.begin(), walked.end(), static_cast<int>(input));
    }
};
RowWalks row_walks(const ir::Program& program, const KernelSpec& spec);
// Whether the spec's kernel, walked ahead (KernelSpec::row_walk_ahead; its row cache and prefetch
// chosen), has takes at a column of the row and picks every one of them out of the walk ahead, so
// that nothing at a row's start waits on the row's index (cross-entropy's x[y]; not w[y] or
// (x - lse)[y], which their owners read at the row's start).
bool row_takes_picked(const ir::Program& program, const KernelSpec& spec);

}  // namespace lossjit::kinds
