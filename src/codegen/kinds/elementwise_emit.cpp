// elementwise_emit: the elementwise kind's source, and the columns loop's (kinds.hpp). The program
// for one element becomes a functor (Element) that a loop template calls per element; the loop,
// the sink (stored, summed, or value and gradients) and the finish come from templates/. Nothing of
// the user's text reaches the source except identifiers (checked by the grammar, emitted behind a
// prefix) and numbers (re-printed from their parsed values).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "codegen/emit_detail.hpp"
#include "codegen/kinds/kinds.hpp"
#include "codegen/kinds/parameters.hpp"
#include "codegen/templates.hpp"
#include "ir/print.hpp"
#include "lossjit/errors.hpp"
#include "lossjit/version.hpp"

namespace lossjit::kinds {

std::string emit_elementwise(const ir::Program& program, const KernelSpec& spec) {
    const auto slots = read_inputs(program);
    const std::size_t grads = program.derivatives.size();
    const bool map_backward = grads > 0 && program.is_map();  // also reads the upstream gradient
    const std::size_t n = slots.size() + (map_backward ? 1 : 0);
    if (spec.loop != KernelSpec::Loop::Strided && spec.inner_strides.size() != n)
        throw InternalError("kernel spec and program disagree on the inputs read");
    if ((spec.loop == KernelSpec::Loop::Columns || !spec.summed.empty()) && spec.summed.size() != grads)
        throw InternalError("kernel spec and program disagree on the gradients summed");
    if (spec.sums() && spec.loop != KernelSpec::Loop::Columns && spec.loop != KernelSpec::Loop::Rows)
        throw InternalError("gradients summed in a loop other than rows or columns");
    if (spec.rank < 1 || spec.rank > kMaxRank) throw InternalError("kernel rank out of range");
    // The knobs were checked by validate_knobs and choose() keeps within them: a spec out of range
    // here was made wrongly inside lossjit.
    if (spec.block_threads % kWarpThreads != 0 || spec.block_threads < kWarpThreads ||
        spec.block_threads > kMaxBlockThreads)
        throw InternalError(fmt::format("kernel spec with {} threads per block", spec.block_threads));
    if (spec.unroll < 1 || spec.unroll > kMaxUnroll)
        throw InternalError(fmt::format("kernel spec with unroll {}", spec.unroll));
    if (spec.vector_width != 1 && spec.vector_width != 4 && spec.vector_width != 8)
        throw InternalError("vector width must be 1, 4 or 8");
    if (spec.accumulator == Accumulator::Auto) throw InternalError("kernel spec with an automatic accumulator");
    if (!spec.input_dtypes.empty() && spec.input_dtypes.size() != n)
        throw InternalError("kernel spec and program disagree on the inputs' dtypes");
    if (!spec.grad_dtypes.empty() && spec.grad_dtypes.size() != grads)
        throw InternalError("kernel spec and program disagree on the gradients' dtypes");
    if (spec.compute != DType::float32 && spec.compute != DType::float64)
        throw InternalError("kernel spec computing in a type other than float32 or float64");
    const bool f64 = spec.compute == DType::float64;
    const char* value_type = f64 ? "double" : "float";

    ExpressionPrinter printer(program, f64 ? PrintStyle::Cuda64 : PrintStyle::Cuda);
    const std::size_t array = std::max<std::size_t>(n, 1);

    // The program for one element, as a functor the loop templates call.
    std::vector<std::string> dtypes;
    for (DType d : spec.input_dtypes) dtypes.emplace_back(kernel_dtype(d));

    std::string element = "// The program for one element; x[k] is the k-th input it reads.\nstruct Element {\n";
    element += fmt::format("    using Value = {};  // what the program computes in\n", value_type);
    element += fmt::format("    static constexpr int kInputs = {};\n", n);
    element += fmt::format("    __host__ __device__ static constexpr int dtype(int k) {{ return {}; }}\n",
                           per_index(dtypes, "lj::kFloat32", "k"));
    element += fmt::format("    static constexpr int kResultDType = {};  // a map's output, a reduction's result\n",
                           kernel_dtype(spec.result_dtype));
    std::vector<std::string> inner;  // innermost stride of input k: 1 contiguous, 0 one value per row
    for (int stride : spec.inner_strides) inner.push_back(std::to_string(stride));
    element += fmt::format("    __host__ __device__ static constexpr int inner_stride(int k) {{ return {}; }}\n",
                           per_index(inner, "1", "k"));
    std::vector<std::string> same;  // input k reads the same values in every row (the rows loop keeps them)
    for (int s : spec.same_every_row) same.emplace_back(s != 0 ? "true" : "false");
    element += fmt::format("    __host__ __device__ static constexpr bool same_every_row(int k) {{ return {}; }}\n",
                           per_index(same, "false", "k"));
    for (const auto& p : program.params) element += fmt::format("    Value {};\n", cuda_param_name(p.name));
    // A reduction's derivatives start from the seed (ir::NodeKind::Seed): upstream / divisor (times a
    // composite program's factor), set by the kernel; a map's backward starts from upstream_.
    const bool seeded = grads > 0 && !program.is_map();
    if (seeded) element += fmt::format("    Value {};  // upstream gradient / divisor\n", cuda_seed_name(0));
    element += param_reciprocals(program);  // after every member the kernel initializes
    if (grads == 0) {
        element += "    using Result = Value;\n";
    } else {  // the value and d value / d input for each input differentiated, at one element
        element += fmt::format("    static constexpr int kGrads = {};\n", grads);
        element += fmt::format("    static constexpr bool kReduces = {};\n", program.is_map() ? "false" : "true");
        std::vector<std::string> summed;  // how gradient g is summed (lj::Summed)
        static constexpr const char* kSummedNames[] = {"lj::kNotSummed", "lj::kSummedOverRows", "lj::kSummedAlongRows",
                                                       "lj::kSummedOverAll"};
        for (int how : spec.summed) summed.emplace_back(kSummedNames[how]);
        element += fmt::format("    __host__ __device__ static constexpr int summed(int g) {{ return {}; }}\n",
                               per_index(summed, kSummedNames[0], "g"));
        std::vector<std::string> grad_dtypes;
        for (DType d : spec.grad_dtypes) grad_dtypes.emplace_back(kernel_dtype(d));
        element += fmt::format("    __host__ __device__ static constexpr int grad_dtype(int g) {{ return {}; }}\n",
                               per_index(grad_dtypes, "lj::kFloat32", "g"));
        element += fmt::format("    struct Result {{ Value value; Value grad[{}]; }};\n", grads);
    }
    const std::string indent(8, ' ');
    std::string reads;  // the inputs' names for x[k]
    for (std::size_t k = 0; k < slots.size(); ++k) {
        reads += fmt::format("{}const Value {} = x[{}];\n", indent,
                             cuda_input_name(program.inputs[static_cast<std::size_t>(slots[k])]), k);
    }
    // A map's backward starts from the upstream gradient's element (the seed, ir::NodeKind::Seed).
    if (map_backward) reads += fmt::format("{}const Value seed_ = x[{}];\n", indent, slots.size());
    // Locals, in node order: the bindings, and (with derivatives) every subexpression used more than
    // once, so the value and the gradients share their common terms.
    const auto bindings = [&](const ExpressionPrinter& p) {
        std::vector<std::pair<int, std::string>> locals;
        for (const auto& b : program.bindings) {
            const bool is_bool = program.node(b.node).type == ValueType::Bool;
            locals.emplace_back(b.node, fmt::format("{}const {} {} = {};\n", indent, is_bool ? "bool" : "Value",
                                                    cuda_binding_name(b.name), without_outer_parens(p.print(b.node))));
        }
        return locals;
    };
    if (grads == 0) {
        const auto statements = [&](const ExpressionPrinter& p) {
            std::string text = reads;
            for (const auto& local : bindings(p)) text += local.second;
            return text + fmt::format("{}return {};\n    }}\n", indent, without_outer_parens(p.print(program.body)));
        };
        element += fmt::format("    __device__ __forceinline__ Result operator()(const Value (&x)[{}]) const {{\n", array);
        element += statements(printer);
        // The rows loop's common path (templates/rows.cuh): log and xlogy without their branch to rare
        // inputs, which set rare_ instead. Not for fast math (its log has no branch) or float64.
        if (spec.common_path(program)) {
            ExpressionPrinter common(program, PrintStyle::Cuda);
            common.use_common_paths();
            element += "    static constexpr bool kCommonPath = true;\n";
            element += fmt::format("    __device__ __forceinline__ Result common_path(const Value (&x)[{}], bool& rare_) const {{\n",
                                   array);
            element += statements(common);
        }
        element += "};";
    } else {
        element += fmt::format("    __device__ __forceinline__ Result operator()(const Value (&x)[{}]) const {{\n", array);
        element += reads;
        auto locals = bindings(printer);
        std::vector<int> roots{program.body};
        for (const auto& d : program.derivatives) roots.push_back(d.node);
        for (int id : shared_nodes(program, roots)) {
            const bool is_bool = program.node(id).type == ValueType::Bool;
            const std::string name = fmt::format("s{}", id);
            locals.emplace_back(id, fmt::format("{}const {} {} = {};\n", indent, is_bool ? "bool" : "Value", name,
                                                without_outer_parens(printer.define(id))));
            printer.name(id, name);
        }
        std::stable_sort(locals.begin(), locals.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        for (const auto& local : locals) element += local.second;
        std::vector<std::string> g;
        // Each derivative already includes the seed: a map's backward is the vector-Jacobian product
        // with the upstream gradient, a reduction's scaled by upstream / divisor.
        for (const auto& d : program.derivatives) g.push_back(without_outer_parens(printer.print(d.node)));
        element += fmt::format("{}return Result{{{}, {{{}}}}};\n    }}\n}};", indent,
                               without_outer_parens(printer.print(program.body)), fmt::join(g, ", "));
    }

    std::string parameter_values;
    for (const auto& p : program.params)
        parameter_values += (parameter_values.empty() ? "" : ", ") + fmt::format("(Element::Value){}", parameter_source(p));
    if (seeded) parameter_values += std::string(parameter_values.empty() ? "" : ", ") + "(Element::Value)grads.total_scale()";

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
        case KernelSpec::Loop::ByRow: throw InternalError("a by-row kernel spec for an elementwise program");
    }

    // The prelude, then only the pieces of scaffolding this kernel uses: its sink, its loop and, for
    // reductions and gradients, the finish. Less for NVRTC to read, for the cache key to hash, and
    // for a person reading `lossjit emit` to skip.
    std::string prelude = kernel_prelude(program);
    // The finish first: the gradient sink's sums use its block_sum.
    if (!program.is_map() || grads > 0) prelude += templates::finish_cuh;  // the gradient templates name it
    if (grads > 0) {
        if (spec.loop != KernelSpec::Loop::Columns) prelude += templates::grad_sink_cuh;
    } else {
        prelude += program.is_map() ? templates::store_sink_cuh : templates::sum_sink_cuh;
    }
    switch (spec.loop) {
        case KernelSpec::Loop::Rows: prelude += templates::rows_cuh; break;
        case KernelSpec::Loop::Strided: prelude += templates::strided_cuh; break;
        case KernelSpec::Loop::Columns: prelude += templates::columns_cuh; break;
        case KernelSpec::Loop::ByRow: break;  // refused above
    }

    // Accumulators other than float64 wrap the sink (templates/accumulate.cuh, appended to the prelude
    // only for them).
    std::string sum_sink = "lj::SumSink", grad_sink = "lj::GradSink<Element>";
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
        {"LAUNCH_BOUNDS", launch_bounds(spec)},
        {"ONE_BLOCK", spec.one_block ? "true" : "false"},
        {"ELEMENT", element},
        {"PARAMETER_LIST", parameter_list(kernel_parameters(program, spec), program, "Element")},
        {"PARAMETER_VALUES", parameter_values},
        {"LOOP", loop},
        {"SUM_SCRATCH_ARGUMENT", spec.sums() ? ", sums" : ""},
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

}  // namespace lossjit::kinds
