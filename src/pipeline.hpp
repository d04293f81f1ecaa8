// lossjit's pipeline, one stage per file. This header is the contract between the stages:
//
//   parse.cpp      program text               -> ast::Program   (syntax, positions)
//   check.cpp      ast::Program               -> ir::Program    (names, arity, types, folding)
//   statistics.cpp ir::Program                -> ir::Program + the whole-tensor statistics it reads
//   row_split.cpp  ir::Program                -> its reductions and their combination (linear_loss's chunks)
//   differentiate.cpp  ir::Program + inputs   -> ir::Program with derivatives (simplify.cpp: CSE)
//   layout.cpp     input shapes and strides   -> Layout         (broadcasting, collapsed dims; src/layout/)
//   kinds/         ir::Program + Layout + Knobs + GPU -> KernelSpec, its grid, its CUDA C++ and its
//                  parameters: one unit per kernel kind (kinds/kinds.hpp), numbers from defaults.cpp;
//                  templates/ hold the scaffolding, ir/print.cpp the one expression printer
//   compile.cpp    CUDA C++                   -> CUBIN or PTX   (NVRTC)
//   cache.cpp      source + target            -> kernel image   (memory map + disk directory)
//   driver.cpp     the CUDA driver API, dlopen'ed at run time, and RAII owners for its handles
//                  (blaslt.cpp: cuBLASLt the same way, for linear_loss's products)
//   runtime/       lossjit::Loss: checks the views, plans a layout, loads its kernel, launches it;
//                  linear_loss.cpp runs a Loss over h W^T a chunk of rows at a time
//   reference.cpp  ir::Program + host tensors -> float64 values and gradients (the CPU reference)
//   dump.cpp       ast / ir                   -> text for `lossjit --dump` (and `lossjit functions`)
//   builtins.cpp   the language table: every fact of every operator and function, one row each
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lang/ast.hpp"
#include "lossjit/lossjit.hpp"
#include "lossjit/tensor.hpp"
#include "ir/program.hpp"
#include "../templates/abi.cuh"

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

// ---- a program's own row sums (ir/row_sums.cpp) ------------------------------------------------
// The program with its row sums and means that wait for another reduction of their row built as
// sums of their terms and per-row factors times sums (RowSums, ir/row_sums.hpp), where that saves
// the program a walk over each row: label smoothing's `mean(x - logsumexp(x, -1), -1)` as
// `mean(x, -1) - logsumexp(x, -1)`, one walk instead of two. A row of no elements keeps the value
// it had as written; a sum in a program with takes is left whole (it may run over K values per row). A program with nothing to save comes back as it is. check() runs this before
// split_statistics.
ir::Program split_row_sums(const ir::Program& program);

// ---- statistics (ir/statistics.cpp) ------------------------------------------------------------
// The program with each whole-tensor reduction that is used per element, per row or inside another
// reduction (`x / sqrt(sum(x^2))`, `mean((x - mean(x))^2)`) split off into a program of its own
// (ir::Program::statistics) and read through a parameter: the two-phase rule of docs/language.md.
// A program without one comes back as it is. check() ends with this; SourceError past
// kMaxStatistics statistics.
constexpr int kMaxStatistics = lj::kMaxStatistics;
ir::Program split_statistics(ir::Program program);
// Where each node's value lives: Constant (literals, parameters), Data (one per element or per row),
// Total (one number, from whole-tensor reductions and constants alone). A body of Total level is a
// Composite program; a Total used where Data is, or reduced again, is a statistic.
enum class ValueLevel { Constant, Data, Total };
std::vector<ValueLevel> value_levels(const ir::Program& program);
// A statistic's program in the language (`mean(x)`, `sqrt(sum(x ^ 2))`), and where `program` (or a
// statistic of it) first reads statistic `index`: the position of the expression it was written as.
std::string statistic_text(const ir::Program& statistic);
ast::Pos statistic_position(const ir::Program& program, int index);

// Every word the language gives a meaning (functions, reductions, constants, `param`), for
// completion and suggestions outside the checker.
std::vector<std::string_view> reserved_words();

// ---- differentiate ----------------------------------------------------------------------------
// Input slots for the names of the inputs to differentiate with respect to; UsageError for a name
// that is not an input (a parameter is a constant: it has no gradient) or is named twice.
std::vector<int> gradient_slots(const ir::Program& program, std::span<const std::string> names);

// The program again, reduced to the nodes its value and bindings reach and hash-consed, with
// `derivatives` holding, per slot of `wrt` (in that order), the node for d body / d input at one
// element. Value and derivatives share one node list, in order (arguments before users), so an
// evaluator walks it once. Conventions at non-smooth points follow PyTorch's autograd
// (docs/language.md, "Gradients"); `where` passes nothing from the side it did not select, not even
// a nan. The loss's gradient is this times gradient_scale() and the upstream gradient; for a
// broadcast input, summed over the dimensions it is broadcast along.
// `per_row_inputs`: which inputs hold one value per row in the layout the gradient is for
// (per_row_inputs(program, layout); indices count whatever it says). A program that reduces along
// rows has different derivatives for a [N, 1] input and a [N, C] one; the others ignore it.
// A map that reduces along rows (log_softmax, a per-row loss) is differentiated as the reduction
// sum(U * body), U its upstream gradient as one more input after the program's (named "upstream",
// or "upstream_"... where an input has that name; one value per row where the body is): the
// gradient of that sum is the map's
// vector-Jacobian product, and it takes the path of the reductions along rows (its value is unused).
// The caller passes U with the layout's shape (a per-row output's [..., N] as [..., N, 1]).
// `k_inputs`: which hold K values per row (k_inputs(layout)): a take by such an index gathers K
// values, whose derivative scatters back (ir::NodeKind::ScatterAdd).
ir::Program differentiate(const ir::Program& program, std::span<const int> wrt, const std::vector<bool>& per_row_inputs,
                          const std::vector<bool>& k_inputs = {});
// Whether differentiate() takes the weighted-sum route above for this program.
inline bool differentiates_as_weighted_sum(const ir::Program& program) { return program.is_map() && program.by_rows(); }

// Apply nodes that the nodes reachable from `roots` use more than once (a root counts as a use),
// in node order: what a printer or emitter names once (a local) and reuses instead of repeating.
std::vector<int> shared_nodes(const ir::Program& program, std::span<const int> roots);

// ---- semantics (ir/semantics.cpp): what a program means beyond its nodes; the kernels and the
// CPU reference both ask here, so they cannot disagree ----------------------------------------
// What a reduction's total is divided by, for inputs of this broadcast shape: the element count
// (mean; 0 for an empty shape, so the mean is nan as in torch), the size of dimension 0 (batchmean)
// or 1 (sum). UsageError for batchmean over scalars; InternalError for a map.
double reduction_divisor(const ir::Program& program, const Shape& shape);

// What every element's derivative of a reduction is multiplied by: 1 / reduction_divisor.
double gradient_scale(const ir::Program& program, const Shape& shape);

// The nodes `roots` reach (themselves too), through arguments and through bindings to what they bind.
std::vector<bool> reached_nodes(const ir::Program& program, std::span<const int> roots);

// After how many walks of its row a by-rows kernel knows node `id`'s value: a binding's node's;
// else the most of its arguments' (`stage_of`; a total's come from another kernel), and a row
// reduction one walk more unless it walks a take's K values (`k_walk`). The emitter's passes
// (by_rows_emit.cpp) and where the differentiator splits a gradient's row sums both count so.
int walk_stage(const ir::Program& program, int id, const std::function<int(int)>& stage_of, bool k_walk);

// A program's parameter values: the caller's (`caller`, in the order of ir::Program::params, which
// starts with them), then each statistic's from `statistics` (its values, in the order of
// ir::Program::statistics).
std::vector<double> parameter_values(const ir::Program& program, std::span<const double> caller,
                                     std::span<const double> statistics);

// The inputs a program reads: its input slots in program order. Inputs the program lists but never
// reads are not passed to its kernel, nor walked by the reference.
std::vector<int> read_inputs(const ir::Program& program);
// The inputs whose dtypes decide what a program computes in (compute_dtype) and a map's default
// output dtype (result_dtype): those the program as written reads (ir::Program::source_reads), so
// that splitting off a statistic or a gradient program never changes its precision.
std::vector<int> dtype_inputs(const ir::Program& program);
// compute_dtype() of the dtypes of dtype_inputs(program) (`by_slot`: each input slot's dtype) and
// of a map's upstream gradient, where its kernel reads one after the inputs.
DType program_compute_dtype(const ir::Program& program, std::span<const DType> by_slot,
                            std::optional<DType> upstream = std::nullopt);

// How a result computed over a part of the rows adds up to the result over all of them, for
// programs that run a part at a time (linear_loss): Sum, the parts' results add; Fraction, each
// part's result weighs its rows / all the rows (mean, batchmean). One per result, in order; none for
// a map that reduces along rows (each part writes its own rows' values). SourceError at the first
// construct that does not split this way: a map of one value per element or of several results, a
// statistic (a whole-tensor value used per element), a reduction along the first dimension, a result
// that is not a constant times reductions of one kind (`sum(a) / sum(b)`, `log(mean(e))`,
// `mean(a) + sum(b)`, `mean(e) + 1`).
enum class RowShare { Sum, Fraction };
// A whole-tensor reduction's share: a sum adds, a mean or batchmean divides by a count of rows.
inline RowShare row_share(ir::Reduction reduction) {
    return reduction == ir::Reduction::Sum ? RowShare::Sum : RowShare::Fraction;
}
std::vector<RowShare> row_shares(const ir::Program& program);
// The checks of row_shares that do not depend on how the results combine their reductions (maps,
// statistics, the row's dimensions): a SourceError past them is about the combination.
void check_row_split(const ir::Program& program);

// A Composite program whose results are not sums of its reductions (`sum(where(y != -100, l, 0)) /
// sum(y != -100)`, `log(mean(e))`) runs a part of the rows at a time this way: `per_chunk` has the
// program's whole-tensor reductions as its results, the one the first result's gradient flows
// through first; the chunks' values add up by `shares` (one per reduction); `combine` computes the
// program's results from those sums, each reduction an input t0, t1, ... of shape [1] (a sum of one
// element), and d (first result) / d t0 is the factor the chunks' gradients are scaled by at the end.
// SourceError where the first result's gradient flows through two reductions that read `logits_slot`
// (their factors would be needed before the chunks' gradients: `sum(logits) * mean(logits)`).
struct TotalsSplit {
    ir::Program per_chunk;
    ir::Program combine;
    std::vector<RowShare> shares;
    bool differentiable = false;  // the first result reaches a reduction that reads the logits
};
TotalsSplit split_totals(const ir::Program& program, int logits_slot);

// The dtype a map's output gets unless the caller chooses: result_dtype() of the inputs the
// program reads (`inputs` in program input order; only dtypes are read).
DType default_output_dtype(const ir::Program& program, std::span<const TensorView> inputs);

// ---- layout ------------------------------------------------------------------------------------
// Dimensions left after collapsing, and whole-tensor reductions one program may combine
// (sum(a) / sum(b)): as many as the kernel ABI holds (templates/abi.cuh, their one definition).
constexpr int kMaxRank = lj::kMaxRank;
constexpr int kMaxTotals = lj::kMaxTotals;
constexpr int kMaxResults = lj::kMaxResults;  // `loss, z, acc`: results one program may list

struct OperandShape {
    std::string_view name;
    Shape shape;
    std::vector<std::int64_t> strides;  // in elements; empty = contiguous
};

struct OperandAccess {
    bool contiguous = true;  // element i lives at offset i: no index arithmetic at all
    bool per_row = false;    // by-rows layouts: one value per row (extent 1 along the row, by shape)
    std::int64_t elements = 0;  // of the operand's own shape (less than Layout::count: broadcast)
    std::array<std::int64_t, kMaxRank> strides{};  // per collapsed dim; 0 where broadcast
    // A row of two strides (Layout::row_inner > 0): the stride from one segment of the row to the
    // next; strides.back() steps within a segment.
    std::int64_t row_outer_stride = 0;
    // By-rows layouts with takes of K indices per row (Layout::k_columns): the operand holds K values
    // per row (an index k [N, K], or a value q [N, K] beside it), value j of a row at j times
    // k_stride from the row's start (strides.back() is 0: along the row's C columns it is one value).
    bool per_k = false;
    std::int64_t k_stride = 0;
};

struct Layout {
    Shape shape;                      // the broadcast shape the user sees
    std::int64_t count = 0;           // its element count
    std::vector<std::int64_t> dims;   // collapsed extents, outermost first, 1 <= rank <= kMaxRank
    std::vector<OperandAccess> inputs;
    OperandAccess output;             // maps only
    // Programs that reduce along rows (plan_row_layout): dims.back() is the row length (the extent
    // of the dimensions reduced, `row_dims` of `shape`, merged; or 1), the dims before it enumerate
    // `rows` rows, the kept dimensions in their order.
    bool by_rows = false;
    std::int64_t rows = 0;
    std::vector<std::size_t> row_dims;  // the dimensions of `shape` a row runs along, sorted
    // Rows of two strides (reduced dimensions that do not merge into one run for every operand:
    // (0, 2, 3) of a contiguous [N, C, H, W], or an input broadcast along part of the row): the row's
    // dims.back() columns are segments of row_inner columns, column j at (j / row_inner) times an
    // operand's row_outer_stride plus (j % row_inner) times its strides.back() (column_offset).
    // 0: the row is one run.
    std::int64_t row_inner = 0;
    // Takes of K indices per row (`x[k]`, k [N, K] against x [N, C]: torch.gather's index): K, the
    // values each row gathers; 0 where the program has none (OperandAccess::per_k).
    std::int64_t k_columns = 0;
};

// Where column `j` of a row lies in `access`, from the row's first element.
inline std::int64_t column_offset(const Layout& layout, const OperandAccess& access, std::int64_t j) {
    const std::int64_t s = access.strides[layout.dims.size() - 1];
    if (layout.row_inner <= 0) return j * s;
    return (j / layout.row_inner) * access.row_outer_stride + (j % layout.row_inner) * s;
}

// Broadcast the inputs (NumPy rules: align trailing dimensions; size 1 stretches), check the
// output shape if there is one, and merge adjacent dimensions that every operand walks alike.
Layout plan_layout(std::span<const OperandShape> inputs, const OperandShape* output);

Shape broadcast_shapes(std::span<const OperandShape> inputs);

// How many leading outer dimensions (of the first `outer` of a layout) `access` walks when it is
// broadcast along all the later ones, else -1: [N, 1, C] against [N, M, C] walks 1 of 2.
int walked_outer_prefix(const OperandAccess& access, std::size_t outer);
// `layout` with its outer dimensions reordered so that those input `operand` walks come first (in
// their order), then those it is broadcast along, merged again where every operand allows; the
// innermost dimension stays last. [1, C, 1, 1] against [N, C, H, W] is walked as [C, N, H*W]: its
// gradient is then a sum over rows that lie together. Layout::shape does not change.
Layout walked_dims_first(Layout layout, std::size_t operand);

// The layout of a program that reduces along rows: the dimensions `row_dims` (as written in the
// program, negative from the end; empty: {-1}) of the broadcast shape are the row, walked last and
// merged into one (UnsupportedError where some operand's strides do not allow it); the others
// enumerate the rows and merge as in plan_layout. Inputs marked in `index` hold one integer per row:
// they broadcast as if they had one more dimension, of extent 1, where the row is; or the values'
// rank with extent 1 along the row (torch's gather index), or with extent K > 1 there: K integers per
// row (Layout::k_columns), and then every other input of extent K along the row holds K values per
// row too (OperandAccess::per_k; K must differ from the row's length C). A map's `output`
// has the full shape, or, when `output_per_row`, the rows' shape (torch's keepdim=False) or that
// with the row's dimensions kept as 1.
Layout plan_row_layout(std::span<const OperandShape> inputs, const std::vector<bool>& index, const OperandShape* output,
                       bool output_per_row, std::span<const int> row_dims = {});
// A row layout's shape without its row dimensions (what one value per row has, keepdim=False),
// and with them as extent 1 (keepdim=True); and the strides of a view of the rows' shape as a view
// of the keepdim shape (0 along the row's dimensions).
Shape rows_shape(const Layout& layout);
Shape keepdim_shape(const Layout& layout);
std::vector<std::int64_t> keepdim_strides(const Layout& layout, std::span<const std::int64_t> rows_strides);

// The layout any program's kernel and reference walk: plan_layout (its outer dimensions reordered
// by walked_dims_first where a gradient sums a broadcast input that needs it), or for a program that
// reduces along rows plan_row_layout (with its index inputs, and a map's output per row where its
// body is). A map of several results (one value per row each) writes an output [R, rows...]: its
// layout's output strides are those of one result, but along the row dimension (never walked by a
// per-row output) the stride from one result to the next.
Layout plan_program_layout(const ir::Program& program, std::span<const OperandShape> inputs, const OperandShape* output);
// A map's output shape: the broadcast shape, or the rows' shape where the body is one value per row
// ([R] and the rows' shape for several results).
Shape program_output_shape(const ir::Program& program, std::span<const OperandShape> inputs);
// The same from the program's layout, already planned (plan_program_layout(program, inputs, nullptr)).
Shape program_output_shape(const ir::Program& program, const Layout& layout);

// How a gradient computation walks memory. `read` walks the inputs as given and, for a map, the
// upstream gradient as one more operand after them (it must have the broadcast shape; zero strides
// are fine: it is only read). `write` walks the same shapes contiguous: element i's derivative
// for input k is added at offset OffsetWalker(write, write.inputs[k]) of a buffer of k's own shape,
// so broadcast elements sum into one. Both enumerate the elements in the same (row-major) order.
struct GradientLayout {
    Layout read;
    Layout write;
    std::vector<std::int64_t> sizes;  // element count of each input's own shape
};
GradientLayout plan_gradient_layout(std::span<const OperandShape> inputs, const OperandShape* upstream);
// The same for a differentiated program that reduces along rows: `read` is one row layout of the
// inputs as given followed by each input again, contiguous in its own shape (an index, which has no
// gradient, as a scalar): read.inputs[N + k] is where element j of a row adds into input k's
// gradient, so that a per-row weight [N, 1] or class weights [C] sum what they are broadcast over.
// `write` is unused.
GradientLayout plan_row_gradient_layout(const ir::Program& program, std::span<const OperandShape> inputs);

// ---- semantics of programs that reduce along rows (ir::Program::by_rows) -----------------------
// Which inputs hold one value per row in this layout: indices, and inputs of extent 1 along the
// dimensions of the row (by shape: an expanded view with stride 0 along the row is still per element),
// every input where the rows are one element long. Empty for a layout that is not by rows. An input
// of K values per row (OperandAccess::per_k), an index too, is not one per row.
std::vector<bool> per_row_inputs(const ir::Program& program, const Layout& layout);
// Which nodes hold one value per row: row reductions, takes by an index that is one per row, and what
// is computed from them, from per-row inputs and from constants alone. (Totals and constants count as
// per row: one value.)
std::vector<bool> per_row_nodes(const ir::Program& program, const std::vector<bool>& input_per_row);
// Which inputs hold K values per row in this layout (OperandAccess::per_k); empty where none does.
std::vector<bool> k_inputs(const Layout& layout);
// Which nodes hold K values per row: takes by an index of K per row (`x[k]`), inputs of K values
// per row, and what is computed from them with per-row values and constants; a row reduction of
// such a value (sum(q * x[k], -1)) is one per row again. All false where `k_inputs` is empty.
std::vector<bool> k_level_nodes(const ir::Program& program, const std::vector<bool>& k_inputs);

// The whole-tensor reductions of a program, in node order: the body's for a plain reduction
// (node -1), each Total node's for a Composite one. A reduction of a per-row argument runs over the
// rows (its mean divides by the row count), of a per-element one over every element.
struct RowTotal {
    ir::Reduction reduction;
    int argument;
    int node;
};
std::vector<RowTotal> row_totals(const ir::Program& program);
std::vector<double> total_divisors(const ir::Program& program, const Layout& layout);
// How a kernel of a differentiated program that reduces along rows writes each gradient:
// - Elements: the input has the layout's shape; each element's derivative where it lives.
// - PerRow: the input holds one value for each row of `layout` ([N, 1] against [N, C]); its
//   derivative, summed along the row, once per row.
// - Scattered: the input is one row gathered by an index (class weights `w[y]`, w [C] against
//   [N, C]; Derivative::scatters): each row's one value and its index, which a second kernel adds
//   into the classes (templates/scatter.cuh).
// - PerK: the input holds K values for each row of `layout` (OperandAccess::per_k: q [N, K] beside
//   x[k], the row along the last dimension); its derivative at each of the K, written by the row's team.
// UnsupportedError for another input broadcast in `layout` (its elements would have to be summed
// across rows: the CPU reference does, reference_gradients; the kernels do not).
// row_gradient_kind: derivative g's (none: another broadcast, which the CPU reference sums as it
// sums every gradient); row_gradient_kinds: every derivative's, or that UnsupportedError.
enum class RowGradient : unsigned char { Elements, PerRow, Scattered, PerK };
std::optional<RowGradient> row_gradient_kind(const ir::Program& program, const Layout& layout, std::size_t g);
std::vector<RowGradient> row_gradient_kinds(const ir::Program& program, const Layout& layout);

// ---- emit --------------------------------------------------------------------------------------
inline constexpr const char* kKernelName = "lossjit_kernel";
// The scatter kernels a module with scattered gradients also holds (templates/scatter.cuh).
inline constexpr const char* kScatterChunksName = "lossjit_scatter_chunks";
inline constexpr const char* kScatterFinishName = "lossjit_scatter_finish";

struct KernelSpec;  // codegen/kernel_spec.hpp: the variant, chosen per layout and knobs

// The kernel's source, by its kind (kinds/kinds.cpp).
std::string emit_cuda(const ir::Program& program, const KernelSpec& spec);

// The expression printer alone: one CUDA expression per node, for tests and dumps.
std::string print_expression(const ir::Program& program, int node);

// ---- dump --------------------------------------------------------------------------------------
std::string dump_ast(const ast::Program& program);
std::string dump_checked(const ir::Program& program);
// A differentiated program's derivatives in the language's syntax; terms they share are named
// once (_1, _2, ...), as an emitter would hold them in locals.
std::string dump_gradients(const ir::Program& program);
// The language itself, from its table: operators by precedence, then functions, each with its
// meaning and derivative (`lossjit functions`).
std::string dump_language();

}  // namespace lossjit

namespace lossjit {

// ---- reference (CPU, float64) ------------------------------------------------------------------
// Host data: base pointers and dtypes. Inputs in program input order; `params` current values.
struct HostOperand {
    const void* data;
    DType dtype;
};
struct HostOutput {
    void* data;
    DType dtype;  // floating
};
double reference_reduce(const ir::Program& program, const Layout& layout, std::span<const HostOperand> inputs,
                        std::span<const double> params);
// A reduction's results (ir::Program::result_count of them; the first is reference_reduce's).
std::vector<double> reference_results(const ir::Program& program, const Layout& layout, std::span<const HostOperand> inputs,
                                      std::span<const double> params);
void reference_map(const ir::Program& program, const Layout& layout, std::span<const HostOperand> inputs,
                   std::span<const double> params, HostOutput output);

// The values of a program's statistics (ir::Program::statistics), each computed in turn (with those
// before it) from the inputs (in program input order, as `inputs` and `data`) and the caller's
// parameter values: what parameter_values() takes.
std::vector<double> reference_statistics(const ir::Program& program, std::span<const OperandShape> inputs,
                                         std::span<const HostOperand> data, std::span<const double> params);

// The gradients of a differentiated program (differentiate()), one buffer per entry of
// program.derivatives, in its input's own shape, row-major, float64. Reductions: each element's
// derivative times upstream * gradient_scale; a Composite program's seed j (of reduction
// gradient_totals[j]) is upstream * factors[j] / that reduction's divisor, `factors` the results of
// program.gradient_factor (empty: 1 each). Maps: `inputs` ends with the upstream gradient (read
// through layout.read.inputs.back()), and each element's derivative is multiplied by it
// (`upstream` is ignored).
std::vector<std::vector<double>> reference_gradients(const ir::Program& program, const GradientLayout& layout,
                                                     std::span<const HostOperand> inputs,
                                                     std::span<const double> params, double upstream,
                                                     std::span<const double> factors = {});

}  // namespace lossjit
