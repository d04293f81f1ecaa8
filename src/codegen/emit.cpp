// emit: the checked program becomes CUDA C++. Fixed scaffolding comes from templates/; this file
// only prints expressions and the per-program declarations. Nothing of the user's text reaches the
// source except identifiers (already checked by the grammar, emitted behind a prefix) and numbers
// (re-printed from their parsed values).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "lossjit/version.hpp"
#include "pipeline.hpp"
#include "codegen/templates.hpp"
#include "ir/print.hpp"

namespace lossjit {
namespace {

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

// The CUDA helpers (builtins table) of the functions this program applies, each after the ones it
// calls, in table order: a kernel carries only what it uses.
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

// Threads per block when the caller leaves it open. A fused gradient kernel reads and writes: on
// H100, smooth L1 + d/dp ran 4.41 ms with 1024 threads (unroll 2), 4.47 with 512, 4.63 with 256,
// and hinge + d/dp, d/dt 3.05 ms with 1024 against 3.06 (bench --explore, docs/performance.md).
// 1024 threads leave at most 64 registers a thread, so only small gradient programs get them.
int automatic_block_threads(const ir::Program& program) {
    if (program.derivatives.empty()) return 256;
    const std::size_t read = read_inputs(program).size() + (program.is_map() ? 1 : 0);
    return program.derivatives.size() <= 2 && read <= 3 && program.nodes.size() <= 64 ? 1024 : 256;
}

}  // namespace

std::vector<int> read_inputs(const ir::Program& program) {
    std::vector<bool> read(program.inputs.size(), false);
    for (const auto& n : program.nodes)
        if (n.kind == ir::NodeKind::Input) read[static_cast<std::size_t>(n.slot)] = true;
    std::vector<int> slots;
    for (std::size_t k = 0; k < read.size(); ++k)
        if (read[k]) slots.push_back(static_cast<int>(k));
    return slots;
}

KernelSpec KernelSpec::choose(const ir::Program& program, const Layout& layout,
                              std::span<const void* const> input_data, const void* output_data,
                              const Knobs& knobs, bool tuned) {
    KernelSpec spec;
    spec.block_threads = knobs.block_threads > 0 ? knobs.block_threads : automatic_block_threads(program);
    spec.fast_math = knobs.fast_math.value_or(false);
    spec.tuned = tuned;
    const Accumulator accumulator = knobs.accumulator == Accumulator::Auto ? Accumulator::Float64 : knobs.accumulator;
    spec.accumulator = program.is_map() ? Accumulator::Float64 : accumulator;
    if (program.is_map() && accumulator != Accumulator::Float64)
        spec.notes.push_back("a map sums nothing: the accumulator does not apply");
    spec.rank = static_cast<int>(layout.dims.size());
    const std::size_t inner = layout.dims.size() - 1;
    const auto slots = read_inputs(program);

    const bool gradients = !program.derivatives.empty();
    const bool writes = program.is_map() || gradients;  // maps, and gradients
    auto read = slots;
    if (program.is_map() && gradients) read.push_back(static_cast<int>(program.inputs.size()));  // upstream
    bool rows = !writes || layout.output.strides[inner] == 1 || layout.count <= 1;
    for (int slot : read) {
        const auto s = layout.inputs[static_cast<std::size_t>(slot)].strides[inner];
        rows = rows && (s == 0 || s == 1);
        spec.inner_strides.push_back(s == 0 ? 0 : 1);
    }

    // A gradient of a broadcast input sums over the dimensions it is broadcast along. The Columns
    // loop does that for a row (contiguous along the innermost dimension, the same for every row).
    bool any_summed = false;
    for (const auto& d : program.derivatives) {
        const OperandAccess& access = layout.inputs[static_cast<std::size_t>(d.input)];
        // By the input's own shape, not its strides: a full-shape view with zero strides (torch's
        // expand) has one gradient element per element, stored where the output walks.
        const bool broadcast = access.elements < layout.count;
        if (broadcast) {
            bool row = access.strides[inner] == 1 && layout.count > 0;
            for (std::size_t dim = 0; dim < inner; ++dim) row = row && access.strides[dim] == 0;
            if (!row)
                throw UnsupportedError(fmt::format(
                    "the gradient of '{}' sums over a broadcast that is not one row repeated over all others; on "
                    "the GPU only that pattern (e.g. a vector [C] against [N, C]) is supported so far "
                    "(reference_grad computes any)", program.inputs[static_cast<std::size_t>(d.input)]));
        }
        spec.summed.push_back(broadcast ? 1 : 0);
        any_summed = any_summed || broadcast;
    }
    if (!any_summed) spec.summed.clear();
    if (!rows) {
        if (any_summed)
            throw UsageError("gradients of broadcast inputs need every input contiguous along the innermost dimension");
        spec.loop = Loop::Strided;
        spec.inner_strides.clear();
        spec.one_block = !program.is_map() && KernelSpec::blocks(spec, layout) <= 1;
        if (knobs.unroll > 0 || knobs.items_per_thread > 0 || knobs.vector_width > 0)
            spec.notes.push_back("an operand is not contiguous along the last dimension: the strided loop has no "
                                 "tiles, so unroll, items per thread and vector width do not apply");
        return spec;
    }
    if (any_summed) {
        spec.loop = Loop::Columns;
        if (spec.accumulator != Accumulator::Float64) {
            spec.notes.push_back("the columns loop (gradients summed over rows) accumulates in float64");
            spec.accumulator = Accumulator::Float64;
        }
    }

    // 16-byte accesses need every row of every contiguous operand to start 16-byte aligned.
    auto aligned = [&](const void* data, const OperandAccess& access) {
        if (reinterpret_cast<std::uintptr_t>(data) % 16 != 0) return false;
        for (std::size_t d = 0; d < inner; ++d)
            if (access.strides[d] % 4 != 0) return false;
        return true;
    };
    std::string why_scalar;  // why 16-byte accesses are impossible here; empty: they are possible
    if (layout.dims[inner] % 4 != 0)
        why_scalar = fmt::format("the last dimension ({}) is not a multiple of 4", layout.dims[inner]);
    for (std::size_t k = 0; k < read.size() && why_scalar.empty(); ++k) {
        const auto slot = static_cast<std::size_t>(read[k]);
        if (spec.inner_strides[k] == 1 &&
            !aligned(slot < input_data.size() ? input_data[slot] : nullptr, layout.inputs[slot]))
            why_scalar = fmt::format("the rows of '{}' do not all start 16-byte aligned",
                                     slot < program.inputs.size() ? program.inputs[slot] : std::string("upstream"));
    }
    if (writes && why_scalar.empty() && !aligned(output_data, layout.output))
        why_scalar = fmt::format("the rows of the {} do not all start 16-byte aligned",
                                 program.is_map() ? "output" : "gradients");
    bool vector = why_scalar.empty();
    if (knobs.vector_width == 1) vector = false;
    if (knobs.vector_width == 4 && !vector)
        spec.notes.push_back(fmt::format("vector width 4 was asked for, but {}: vector width 1 is used", why_scalar));
    // Items per thread that four lanes cannot make up ask for scalar accesses.
    if (knobs.vector_width == 0 && knobs.items_per_thread % 4 != 0) vector = false;
    spec.vector_width = vector ? 4 : 1;
    // The columns loop gives each thread vector_width columns of a strip; narrow rows would leave most
    // of a large block idle, so the block shrinks to the columns there are (in warps, at least 64).
    if (spec.loop == Loop::Columns) {
        const long long lanes = (layout.dims[inner] + spec.vector_width - 1) / spec.vector_width;
        int threads = spec.block_threads;
        while (threads > 64 && (threads / 2) % kWarpThreads == 0 && threads / 2 >= lanes) threads /= 2;
        if (threads != spec.block_threads) {
            spec.notes.push_back(fmt::format("{} threads per block for {} columns of {} ({} per thread)", threads,
                                             layout.dims[inner], spec.block_threads, spec.vector_width));
            spec.block_threads = threads;
        }
    }

    if (knobs.unroll > 0) {
        spec.unroll = knobs.unroll;
    } else if (knobs.items_per_thread > 0) {
        spec.unroll = std::clamp(knobs.items_per_thread / spec.vector_width, 1, kMaxUnroll);
        if (spec.unroll * spec.vector_width != knobs.items_per_thread)
            spec.notes.push_back(fmt::format("{} items per thread is not a multiple of vector width {}: {} are used",
                                             knobs.items_per_thread, spec.vector_width,
                                             spec.unroll * spec.vector_width));
    } else {
        // About sixteen 16-byte loads in flight per thread (measured best on H100 for one and two
        // inputs; docs/performance.md), fewer when a row is shorter than a tile.
        spec.unroll = std::clamp(16 / std::max<int>(1, static_cast<int>(read.size())), 1, 8);
        // A program with several transcendental calls per element is bound by arithmetic, not
        // memory: deeper unrolling only adds registers (KL: unroll 2 is 3% faster than 8 on H100).
        int transcendental = 0;
        for (const auto& node : program.nodes)
            transcendental += node.kind == ir::NodeKind::Apply && builtin_info(node.fn).cost == Cost::Transcendental;
        if (transcendental >= 2) spec.unroll = std::min(spec.unroll, 2);
        // A fused value-and-gradient kernel holds loads and results for every unrolled element;
        // past 2 its registers cut occupancy (smooth L1 + d/dp on H200: unroll 2 3.67 ms, 8 5.18 ms).
        if (!program.derivatives.empty()) spec.unroll = std::min(spec.unroll, 2);
        while (spec.loop == Loop::Rows && spec.unroll > 1 &&
               static_cast<std::int64_t>(spec.block_threads) * spec.vector_width * (spec.unroll / 2) >= layout.dims[inner])
            spec.unroll /= 2;
    }
    spec.one_block = !program.is_map() && spec.loop == Loop::Rows && KernelSpec::blocks(spec, layout) <= 1;
    return spec;
}

long long KernelSpec::blocks(const KernelSpec& spec, const Layout& layout) {
    if (spec.loop == Loop::Strided) return std::max<long long>(1, (layout.count + spec.block_threads - 1) / spec.block_threads);
    const long long inner = layout.dims.back();
    const long long tile = static_cast<long long>(spec.block_threads) * spec.unroll * spec.vector_width;
    return inner == 0 ? 1 : (layout.count / inner) * ((inner + tile - 1) / tile);
}

std::string KernelSpec::signature() const {
    // Knobs at their defaults add nothing: a float64 kernel's source (and key) is what it always was.
    std::string knobs;
    if (accumulator == Accumulator::Float32) knobs += ", float32 accumulator";
    if (accumulator == Accumulator::CompensatedFloat32) knobs += ", compensated float32 accumulator";
    if (fast_math) knobs += ", fast math";
    if (tuned) knobs += ", tuned";
    if (one_block) knobs += ", one block";
    if (loop == Loop::Strided) return fmt::format("strided, rank {}, {} threads/block{}", rank, block_threads, knobs);
    if (loop == Loop::Columns)
        return fmt::format("columns, rank {}, inner strides [{}], summed [{}], vector {}, unroll {}, {} threads/block{}",
                           rank, fmt::join(inner_strides, " "), fmt::join(summed, " "), vector_width, unroll,
                           block_threads, knobs);
    return fmt::format("rows, rank {}, inner strides [{}], vector {}, unroll {}, {} threads/block{}", rank,
                       fmt::join(inner_strides, " "), vector_width, unroll, block_threads, knobs);
}

std::string print_expression(const ir::Program& program, int node) {
    return ExpressionPrinter(program, PrintStyle::Cuda).print(node);
}

std::string emit_cuda(const ir::Program& program, const KernelSpec& spec) {
    const auto slots = read_inputs(program);
    const std::size_t grads = program.derivatives.size();
    const bool map_backward = grads > 0 && program.is_map();  // also reads the upstream gradient
    const std::size_t n = slots.size() + (map_backward ? 1 : 0);
    if (spec.loop != KernelSpec::Loop::Strided && spec.inner_strides.size() != n)
        throw InternalError("kernel spec and program disagree on the inputs read");
    if (spec.loop == KernelSpec::Loop::Columns && spec.summed.size() != grads)
        throw InternalError("kernel spec and program disagree on the gradients summed");
    if (spec.rank < 1 || spec.rank > kMaxRank) throw InternalError("kernel rank out of range");
    // The knobs were checked by validate_knobs and choose() keeps within them: a spec out of range
    // here was made wrongly inside lossjit.
    if (spec.block_threads % kWarpThreads != 0 || spec.block_threads < kWarpThreads ||
        spec.block_threads > kMaxBlockThreads)
        throw InternalError(fmt::format("kernel spec with {} threads per block", spec.block_threads));
    if (spec.unroll < 1 || spec.unroll > kMaxUnroll)
        throw InternalError(fmt::format("kernel spec with unroll {}", spec.unroll));
    if (spec.vector_width != 1 && spec.vector_width != 4) throw InternalError("vector width must be 1 or 4");
    if (spec.accumulator == Accumulator::Auto) throw InternalError("kernel spec with an automatic accumulator");

    ExpressionPrinter printer(program, PrintStyle::Cuda);
    const std::size_t array = std::max<std::size_t>(n, 1);

    // The program for one element, as a functor the loop templates call.
    std::string element = "// The program for one element; x[k] is the k-th input it reads.\nstruct Element {\n";
    element += fmt::format("    static constexpr int kInputs = {};\n", n);
    std::string inner = "1";  // innermost stride of input k: 1 contiguous, 0 one value per row
    for (std::size_t k = spec.inner_strides.size(); k-- > 0;)
        if (spec.inner_strides[k] == 0) inner = fmt::format("k == {} ? 0 : {}", k, inner);
    element += fmt::format("    __host__ __device__ static constexpr int inner_stride(int k) {{ return {}; }}\n", inner);
    for (const auto& p : program.params) element += fmt::format("    float {};\n", cuda_param_name(p.name));
    if (grads == 0) {
        element += "    using Result = float;\n";
    } else {  // the value and d value / d input for each input differentiated, at one element
        element += fmt::format("    static constexpr int kGrads = {};\n", grads);
        element += fmt::format("    static constexpr bool kReduces = {};\n", program.is_map() ? "false" : "true");
        std::vector<std::string> summed;  // is gradient g summed over rows (Columns loop)?
        for (std::size_t g = 0; g < spec.summed.size(); ++g)
            if (spec.summed[g]) summed.push_back(fmt::format("g == {}", g));
        if (summed.empty()) summed.push_back("false");
        element += fmt::format("    __host__ __device__ static constexpr bool summed(int g) {{ return {}; }}\n",
                               fmt::join(summed, " || "));
        element += fmt::format("    struct Result {{ float value; float grad[{}]; }};\n", grads);
    }
    element += fmt::format("    __device__ __forceinline__ Result operator()(const float (&x)[{}]) const {{\n", array);
    const std::string indent(8, ' ');
    for (std::size_t k = 0; k < slots.size(); ++k) {
        element += fmt::format("{}const float {} = x[{}];\n", indent,
                               cuda_input_name(program.inputs[static_cast<std::size_t>(slots[k])]), k);
    }
    // Input names are identifiers, so no input can be called this.
    const std::string upstream = "upstream_";
    if (map_backward) element += fmt::format("{}const float {} = x[{}];\n", indent, upstream, slots.size());
    // Locals, in node order: the bindings, and (with derivatives) every subexpression used more than
    // once, so the value and the gradients share their common terms.
    std::vector<std::pair<int, std::string>> locals;
    for (const auto& b : program.bindings) {
        const bool is_bool = program.node(b.node).type == ValueType::Bool;
        locals.emplace_back(b.node, fmt::format("{}const {} {} = {};\n", indent, is_bool ? "bool" : "float",
                                                cuda_binding_name(b.name), without_outer_parens(printer.print(b.node))));
    }
    if (grads > 0) {
        std::vector<int> roots{program.body};
        for (const auto& d : program.derivatives) roots.push_back(d.node);
        for (int id : shared_nodes(program, roots)) {
            const bool is_bool = program.node(id).type == ValueType::Bool;
            const std::string name = fmt::format("s{}", id);
            locals.emplace_back(id, fmt::format("{}const {} {} = {};\n", indent, is_bool ? "bool" : "float", name,
                                                without_outer_parens(printer.define(id))));
            printer.name(id, name);
        }
        std::stable_sort(locals.begin(), locals.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    for (const auto& local : locals) element += local.second;
    if (grads == 0) {
        element += fmt::format("{}return {};\n    }}\n}};", indent, without_outer_parens(printer.print(program.body)));
    } else {
        std::vector<std::string> g;
        for (const auto& d : program.derivatives) {
            // A map's backward: the vector-Jacobian product with the upstream gradient, elementwise.
            if (map_backward) g.push_back(fmt::format("{} * {}", upstream, printer.print(d.node)));
            else g.push_back(without_outer_parens(printer.print(d.node)));
        }
        element += fmt::format("{}return Result{{{}, {{{}}}}};\n    }}\n}};", indent,
                               without_outer_parens(printer.print(program.body)), fmt::join(g, ", "));
    }

    std::string parameters, parameter_values;
    for (const auto& p : program.params) {
        parameters += fmt::format(",\n    const float {}", cuda_param_name(p.name));
        parameter_values += (parameter_values.empty() ? "" : ", ") + cuda_param_name(p.name);
    }

    std::string loop;
    switch (spec.loop) {
        case KernelSpec::Loop::Rows:
            loop = fmt::format("lj::for_rows<{}, {}, {}, {}>", spec.block_threads, spec.unroll, spec.vector_width, spec.rank);
            break;
        case KernelSpec::Loop::Columns:
            if (grads == 0) throw InternalError("the columns loop is for gradients");
            loop = fmt::format("lj::for_columns<{}, {}, {}, {}>", spec.block_threads, spec.unroll, spec.vector_width,
                               spec.rank);
            break;
        case KernelSpec::Loop::Strided:
            loop = fmt::format("lj::for_each_strided<{}, {}>", spec.block_threads, spec.rank);
            break;
    }

    // The prelude, then only the pieces of scaffolding this kernel uses: its sink, its loop and, for
    // reductions and gradients, the finish. Less for NVRTC to read, for the cache key to hash, and
    // for a person reading `lossjit emit` to skip.
    std::string prelude(templates::prelude_cuh);
    prelude += function_helpers(program);
    if (grads > 0) {
        if (spec.loop != KernelSpec::Loop::Columns) prelude += templates::grad_sink_cuh;
    } else {
        prelude += program.is_map() ? templates::store_sink_cuh : templates::sum_sink_cuh;
    }
    switch (spec.loop) {
        case KernelSpec::Loop::Rows: prelude += templates::rows_cuh; break;
        case KernelSpec::Loop::Strided: prelude += templates::strided_cuh; break;
        case KernelSpec::Loop::Columns: prelude += templates::columns_cuh; break;
    }
    if (!program.is_map() || grads > 0) prelude += templates::finish_cuh;  // the gradient templates name it

    // Accumulators other than float64 wrap the sink (templates/accumulate.cuh, appended to the prelude
    // only for them).
    std::string sum_sink = "lj::SumSink", grad_sink = "lj::GradSink<Element::kGrads>";
    if (!program.is_map() && spec.accumulator != Accumulator::Float64) {
        prelude += templates::accumulate_cuh;
        const char* acc = spec.accumulator == Accumulator::Float32 ? "lj::AccFloat32" : "lj::AccCompensated";
        sum_sink = fmt::format("lj::Accumulating<{}, {}>", acc, sum_sink);
        grad_sink = fmt::format("lj::Accumulating<{}, {}>", acc, grad_sink);
    }

    std::map<std::string, std::string> values{
        {"VERSION", kVersion},
        {"SIGNATURE", spec.signature()},
        {"PRELUDE", prelude},
        {"SUM_SINK", sum_sink},
        {"GRAD_SINK", grad_sink},
        {"BLOCK_THREADS", std::to_string(spec.block_threads)},
        {"ONE_BLOCK", spec.one_block ? "true" : "false"},
        {"ELEMENT", element},
        {"PARAMETERS", parameters},
        {"PARAMETER_VALUES", parameter_values},
        {"LOOP", loop},
    };
    if (grads > 0) {
        values["WHAT"] = program.is_map() ? std::string("the backward of an elementwise map (upstream gradient times "
                                                        "the derivatives)")
                                          : fmt::format("a {} reduction and its gradients",
                                                        ir::to_string(program.reduction));
        return substitute(spec.loop == KernelSpec::Loop::Columns ? templates::value_and_grad_columns_cu
                                                                  : templates::value_and_grad_cu,
                          values);
    }
    if (!program.is_map()) {
        values["REDUCTION"] = std::string(ir::to_string(program.reduction));
        return substitute(templates::reduce_cu, values);
    }
    return substitute(templates::map_cu, values);
}

}  // namespace lossjit
