// launch: lossjit::Loss. compile() runs parse and check; the first call for each layout of the
// inputs runs emit -> cache (NVRTC) -> module load, and every call builds the kernel's parameters
// and launches it once.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <limits>
#include <mutex>
#include <optional>
#include <type_traits>

#include <fmt/format.h>

#include "jit/cache.hpp"
#include "cuda/driver.hpp"
#include "codegen/kernel_abi.hpp"
#include "tuning/knobs.hpp"
#include "lossjit/lossjit.hpp"
#include "codegen/kernel_spec.hpp"
#include "pipeline.hpp"
#include "tuning/store.hpp"

namespace lossjit {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct LoadedKernel {
    std::unique_ptr<cuda::Module> module;
    CUfunction function = nullptr;
    int resident_per_sm = 0;  // blocks of this kernel one SM holds (the occupancy calculator)
    KernelInfo info;          // what the driver says about it; the launch fills in the rest
};

// A kernel variant for one layout: the spec, and the launch knob the kernel does not depend on.
struct Variant {
    KernelSpec spec;
    int max_blocks_per_sm = 0;  // 0: reductions what occupancy allows, maps no cap
    std::string tuned;          // the tuning store's knobs used, or ""
    std::string warning;        // the tuning store could not be read
};

struct Workspace {  // per stream: concurrent calls on different streams must not share partials
    std::unique_ptr<cuda::Memory> memory;  // partials (double), then arrivals, then result
    // The columns loop's arrival counters (column_strips of them, at offset 0), then its partial sums.
    // Kernels leave every counter at 0, and the counters never move, so plans of other sizes can
    // share the buffer; it is cleared only when it is allocated.
    std::unique_ptr<cuda::Memory> columns;
    std::size_t column_strips = 0, column_partials = 0;  // capacities
    unsigned int* column_arrivals() const { return reinterpret_cast<unsigned int*>(columns->get()); }
    double* column_sums() const {
        return reinterpret_cast<double*>(columns->get() + sizeof(double) * ((column_strips + 1) / 2));
    }
    double* partials() const { return reinterpret_cast<double*>(memory->get()); }
    unsigned int* arrivals(int slots) const { return reinterpret_cast<unsigned int*>(memory->get() + sizeof(double) * static_cast<std::size_t>(slots)); }
    float* result(int slots) const { return reinterpret_cast<float*>(memory->get() + sizeof(double) * static_cast<std::size_t>(slots) + 16); }
};

std::vector<OperandShape> shapes_of(const std::vector<std::string>& names, std::span<const TensorView> inputs) {
    if (inputs.size() != names.size()) {
        throw UsageError(fmt::format("the program takes {} input{} ({}), but {} {} given", names.size(),
                                     names.size() == 1 ? "" : "s", fmt::join(names, ", "), inputs.size(),
                                     inputs.size() == 1 ? "was" : "were"));
    }
    std::vector<OperandShape> shapes;
    for (std::size_t k = 0; k < inputs.size(); ++k) shapes.push_back({names[k], inputs[k].shape, inputs[k].strides});
    return shapes;
}

// `name`: a string, or a callable making one; called only for an error message, so a per-call check
// formats nothing.
template <class Name>
void check_data(const Name& name, DType dtype, const void* data, std::int64_t numel) {
    auto text = [&]() -> std::string {
        if constexpr (std::is_invocable_v<const Name&>) return name();
        else return std::string(name);
    };
    // A DType outside the enum (a cast, a stale ABI) is the caller's mistake, not an internal one.
    if (dtype != DType::float32 && dtype != DType::float64)
        throw UsageError(fmt::format("'{}' has an unknown dtype ({})", text(), static_cast<int>(dtype)));
    if (dtype != DType::float32)
        throw UsageError(fmt::format("'{}' is {}; lossjit computes in float32 and needs float32 tensors", text(), to_string(dtype)));
    if (numel > 0 && data == nullptr) throw UsageError(fmt::format("'{}' has no data (a null pointer)", text()));
    if (reinterpret_cast<std::uintptr_t>(data) % alignof(float) != 0)
        throw UsageError(fmt::format("'{}' is not aligned to 4 bytes (address {}): float32 data must be", text(), data));
}


// Everything a launch needs that depends only on the inputs' shapes, strides and alignment. The
// last call's plan is kept, so repeated calls with the same layout only patch pointers and launch.
struct LaunchPlan {
    std::vector<Shape> shapes;
    std::vector<std::vector<std::int64_t>> strides;
    Shape output_shape;
    std::vector<std::int64_t> output_strides;
    unsigned alignment = 0;  // bit k: input k (bit 31: the output) is 16-byte aligned
    bool has_output = false;
    bool valid = false;

    Layout layout;
    KernelSpec spec;
    int max_blocks_per_sm = 0;
    std::string tuned;
    const LoadedKernel* kernel = nullptr;
    unsigned grid = 1;
    std::vector<int> slots;  // program input slot of each kernel input
    abi::Extents extents{};
    std::unique_ptr<abi::Inputs> inputs;
    abi::Output output{};
    abi::ReduceOut reduce{};
    double divisor = 1;               // what a reduction's sum is divided by (reduction_divisor)
    std::vector<std::int64_t> grads;  // lj::Grads<G>: G pointers, kMaxRank strides, upstream pointer, scale
    abi::ColumnScratch columns{};     // Columns loop only
    std::size_t column_partials = 0;  // doubles of partial sums the Columns loop needs
    std::size_t column_strips = 0;    // its arrival counters
    std::vector<float> params;
    std::vector<void*> args;
    std::vector<const void*> checked;  // pointers already found to be memory of this device
};

// Row-major contiguous: no strides given, or the row-major ones (extent-1 dimensions may have any
// stride, as torch gives them).
bool is_dense(const Shape& shape, const std::vector<std::int64_t>& strides) {
    if (strides.empty()) return true;
    if (strides.size() != shape.size()) return false;
    const auto dense = contiguous_strides(shape);
    for (std::size_t d = 0; d < shape.size(); ++d)
        if (shape[d] != 1 && strides[d] != dense[d]) return false;
    return true;
}

unsigned alignment_of(std::span<const TensorView> inputs, const OutputView* output) {
    unsigned bits = 0;
    for (std::size_t k = 0; k < inputs.size() && k < 31; ++k)
        if (reinterpret_cast<std::uintptr_t>(inputs[k].data) % 16 == 0) bits |= 1u << k;
    if (output && reinterpret_cast<std::uintptr_t>(output->data) % 16 == 0) bits |= 1u << 31;
    return bits;
}

}  // namespace

// What compile() produced; never changes afterwards, so copies of a Loss share it.
struct Loss::Compiled {
    Options options;
    ast::Program syntax;
    ir::Program program;
    double parse_ms = 0, check_ms = 0;
    // The names of what a kernel reads: the program's inputs, then a map's upstream gradient.
    std::vector<std::string> inputs_and_upstream;
};

struct Loss::State {
    explicit State(std::shared_ptr<const Compiled> shared)
        : compiled(std::move(shared)), options(compiled->options), program(compiled->program),
          inputs_and_upstream(compiled->inputs_and_upstream) {
        for (const auto& p : program.params) param_values.push_back(p.default_value);
        timings.parse_ms = compiled->parse_ms;
        timings.check_ms = compiled->check_ms;
    }

    const std::shared_ptr<const Compiled> compiled;
    const Options& options;
    const ir::Program& program;
    const std::vector<std::string>& inputs_and_upstream;

    mutable std::mutex mutex;  // guards everything below; never held while waiting for the GPU
    std::vector<double> param_values;
    Timings timings;

    struct Emitted {
        std::string source;
        bool fast_math = false;
    };
    // The kernel a call with these inputs would run (tuned knobs included where the GPU is known).
    Emitted emit_for(std::span<const TensorView> inputs) const;
    std::vector<ReferenceGradient> gradients_on_cpu(std::span<const TensorView> host_inputs,
                                                    std::span<const std::string> wrt, double upstream,
                                                    const TensorView* host_upstream) const;

    std::vector<double> params_now() const {
        std::lock_guard lock(mutex);
        return param_values;
    }
    std::shared_ptr<cuda::Context> context;
    int multiprocessors = 0;
    int max_threads_per_sm = 0;
    std::string target;
    std::string device_text;  // the tuning key's GPU: "NVIDIA H100 80GB HBM3 (sm_90)"
    std::map<std::string, LoadedKernel> kernels;  // by KernelSpec::signature()
    std::map<Stream, Workspace> workspaces;
    LaunchPlan plan;
    struct GradientVariant {  // the program differentiated for one list of inputs, and its plan
        ir::Program program;
        LaunchPlan plan;
        std::string label;  // tells its kernels apart from the loss's: "grad(p,t) "
    };
    struct NamesLess {  // lets a span of names find a vector of names
        using is_transparent = void;
        template <class A, class B>
        bool operator()(const A& a, const B& b) const {
            return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
        }
    };
    std::map<std::vector<std::string>, GradientVariant, NamesLess> gradient_variants;  // by the inputs' names
    const LaunchPlan* last_plan = nullptr;  // the most recent call's, for kernel_info()

    int workspace_slots() const { return multiprocessors * kMaxBlocksPerSm; }

    // The names of what a kernel of `prog` reads: the program's inputs, and a map's upstream gradient.
    const std::vector<std::string>& operand_names(const ir::Program& prog) const {
        return prog.is_map() && !prog.derivatives.empty() ? inputs_and_upstream : prog.inputs;
    }

    Layout layout_for(std::span<const TensorView> inputs, const OutputView* output) const {
        return layout_for(program, inputs, output);
    }
    Layout layout_for(const ir::Program& prog, std::span<const TensorView> inputs, const OutputView* output) const {
        const auto shapes = shapes_of(operand_names(prog), inputs);
        if (!output) return plan_layout(shapes, nullptr);
        const OperandShape out{"output", output->shape, output->strides};
        return plan_layout(shapes, &out);
    }

    // The knobs for this program and layout: the options', with the automatic ones taken from the
    // tuning store where it has a record for (program, shapes, GPU). `device` is the GPU's tuning
    // text, or "" for none known (then the driver is asked only if the store has the program and
    // shapes at all). Gradient kernels (`variant` non-empty) are not tuned.
    Variant variant_for(const ir::Program& prog, const std::string& variant, const Layout& layout,
                        std::span<const TensorView> inputs, const OutputView* output, std::string device) const {
        Variant v;
        Knobs knobs = options.knobs;
        const bool automatic = knobs.block_threads == 0 || (knobs.unroll == 0 && knobs.items_per_thread == 0) ||
                               knobs.vector_width == 0 || knobs.max_blocks_per_sm == 0 ||
                               knobs.accumulator == Accumulator::Auto || !knobs.fast_math;
        TuningStore* store = options.use_tuning && automatic && variant.empty() ? TuningStore::process() : nullptr;
        if (store) {
            TuningKey key{tuning_program_text(prog), tuning_shape_text(prog.inputs, inputs, output), "float32", ""};
            if (device.empty() && store->has_program(key.program, key.shapes)) {
                try {
                    if (cuda_available()) device = tuning_device_text(options.device);
                } catch (const Error&) {  // no such device: the launch will say so; the source is untuned
                }
            }
            key.device = std::move(device);
            if (!key.device.empty()) {
                if (const auto record = store->find(key, &v.warning); record && apply_tuned(knobs, record->knobs))
                    v.tuned = fmt::format("{} (from {})", describe(record->knobs), store->file().string());
            }
        }
        std::vector<const void*> data;
        for (const auto& view : inputs) data.push_back(view.data);
        v.spec = KernelSpec::choose(prog, layout, data, output ? output->data : nullptr, knobs, !v.tuned.empty());
        v.max_blocks_per_sm = knobs.max_blocks_per_sm;
        return v;
    }

    KernelSpec spec_for(const ir::Program& prog, const Layout& layout, std::span<const TensorView> inputs,
                        const OutputView* output, const std::string& variant = "") const {
        return variant_for(prog, variant, layout, inputs, output, "").spec;
    }

    void ensure_device() {
        if (context) return;
        const auto start = Clock::now();
        context = cuda::Context::for_device(options.device);
        const auto info = device_info(options.device);
        multiprocessors = info.multiprocessors;
        max_threads_per_sm = cuda::attribute(context->device(), CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
        target = target_for(info.major, info.minor);
        device_text = tuning_device_text(options.device);
        timings.device_ms = ms_since(start);
    }

    // `variant` tells apart programs that share a signature: the loss, or it with gradients.
    const LoadedKernel& kernel_for(const ir::Program& prog, const KernelSpec& spec, const std::string& variant) {
        const std::string signature = variant + spec.signature();
        if (auto it = kernels.find(signature); it != kernels.end()) return it->second;

        auto start = Clock::now();
        const std::string source = emit_cuda(prog, spec);
        timings.emit_ms = ms_since(start);

        start = Clock::now();
        const CacheLookup lookup = KernelCache::process().get(source, target, spec.fast_math);
        timings.cache_ms = ms_since(start);
        timings.nvrtc_ms = lookup.compile_ms;
        timings.cache = lookup.outcome;
        timings.cache_warning = lookup.warning;
        timings.target = target;

        start = Clock::now();
        LoadedKernel kernel;
        kernel.module = std::make_unique<cuda::Module>(context, lookup.image->data);
        kernel.function = kernel.module->function(kKernelName);
        LOSSJIT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&kernel.resident_per_sm, kernel.function,
                                                               spec.block_threads, 0));
        auto& info = kernel.info;
        LOSSJIT_CU(cuFuncGetAttribute(&info.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, kernel.function));
        LOSSJIT_CU(cuFuncGetAttribute(&info.local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, kernel.function));
        LOSSJIT_CU(cuFuncGetAttribute(&info.shared_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, kernel.function));
        info.signature = spec.signature();
        info.strided = spec.loop == KernelSpec::Loop::Strided;
        info.knobs.block_threads = spec.block_threads;
        info.knobs.unroll = info.strided ? 1 : spec.unroll;
        info.knobs.vector_width = info.strided ? 1 : spec.vector_width;
        info.knobs.items_per_thread = info.knobs.unroll * info.knobs.vector_width;
        info.knobs.accumulator = spec.accumulator;
        info.knobs.fast_math = spec.fast_math;
        info.resident_blocks_per_sm = kernel.resident_per_sm;
        info.target = target;
        timings.load_ms = ms_since(start);
        return kernels.emplace(signature, std::move(kernel)).first->second;
    }

    Workspace& workspace_for(Stream stream) {
        auto& ws = workspaces[stream];
        if (!ws.memory) {
            const std::size_t bytes = sizeof(double) * static_cast<std::size_t>(workspace_slots()) + 32;
            ws.memory = std::make_unique<cuda::Memory>(context, bytes);
            // Arrivals start at 0. On the caller's stream, so the first kernel on it is ordered after
            // the memset even when the stream does not synchronise with the legacy default stream.
            LOSSJIT_CU(cuMemsetD32Async(ws.memory->get(), 0, bytes / 4, stream));
        }
        return ws;
    }

    static bool plan_matches(const LaunchPlan& plan, std::span<const TensorView> inputs, const OutputView* output) {
        if (!plan.valid || inputs.size() != plan.shapes.size() || (output != nullptr) != plan.has_output) return false;
        for (std::size_t k = 0; k < inputs.size(); ++k)
            if (inputs[k].shape != plan.shapes[k] || inputs[k].strides != plan.strides[k]) return false;
        if (output && (output->shape != plan.output_shape || output->strides != plan.output_strides)) return false;
        return alignment_of(inputs, output) == plan.alignment;
    }

    // The slow path: layout, kernel choice (compiling if needed), grid and the parameter buffers.
    void make_plan(const ir::Program& prog, const std::string& variant, LaunchPlan& plan,
                   std::span<const TensorView> inputs, const OutputView* output) {
        plan.valid = false;
        plan.layout = layout_for(prog, inputs, output);
        Variant chosen = variant_for(prog, variant, plan.layout, inputs, output, device_text);
        plan.spec = std::move(chosen.spec);
        plan.max_blocks_per_sm = chosen.max_blocks_per_sm;
        plan.tuned = chosen.tuned;
        timings.tuned = chosen.tuned;
        if (!chosen.warning.empty()) timings.tuning_warning = chosen.warning;
        plan.kernel = &kernel_for(prog, plan.spec, variant);
        plan.slots = read_inputs(prog);
        const bool map_backward = prog.is_map() && !prog.derivatives.empty();
        if (map_backward) plan.slots.push_back(static_cast<int>(prog.inputs.size()));  // the upstream gradient

        const Occupancy occupancy{plan.kernel->resident_per_sm, plan.max_blocks_per_sm, multiprocessors};
        const LaunchGrid grid = plan_grid(prog, plan.spec, plan.layout, occupancy);
        plan.grid = grid.blocks;
        plan.columns = {};
        plan.columns.chunk_rows = grid.chunk_rows;
        plan.columns.chunks = grid.chunks;
        plan.columns.strip_blocks = grid.strip_blocks;
        plan.column_partials = grid.column_partials;
        plan.column_strips = grid.column_strips;

        const auto& dims = plan.layout.dims;
        plan.extents = {};
        plan.extents.count = plan.layout.count;
        std::copy(dims.begin(), dims.end(), plan.extents.dims);
        plan.inputs = std::make_unique<abi::Inputs>(plan.slots.size());
        for (std::size_t k = 0; k < plan.slots.size(); ++k)
            plan.inputs->set_strides(k, plan.layout.inputs[static_cast<std::size_t>(plan.slots[k])].strides.data());
        plan.output = {};
        std::copy(plan.layout.output.strides.begin(), plan.layout.output.strides.end(), plan.output.strides);
        plan.reduce = {};
        plan.divisor = prog.is_map() ? 1.0 : reduction_divisor(prog, plan.layout.shape);
        plan.reduce.scale = 1.0 / plan.divisor;
        plan.params.assign(param_values.size(), 0.0f);
        const std::size_t g = prog.derivatives.size();
        plan.grads.assign(g + kMaxRank + 2, 0);
        std::copy(plan.layout.output.strides.begin(), plan.layout.output.strides.end(), plan.grads.begin() + static_cast<std::ptrdiff_t>(g));

        plan.args.clear();
        plan.args.push_back(&plan.extents);
        plan.args.push_back(plan.inputs->data());
        for (auto& p : plan.params) plan.args.push_back(&p);
        const bool map_forward = prog.is_map() && g == 0;
        plan.args.push_back(map_forward ? static_cast<void*>(&plan.output) : static_cast<void*>(&plan.reduce));
        if (g > 0) plan.args.push_back(plan.grads.data());
        if (plan.spec.loop == KernelSpec::Loop::Columns) plan.args.push_back(&plan.columns);

        plan.shapes.clear();
        plan.strides.clear();
        for (const auto& v : inputs) {
            plan.shapes.push_back(v.shape);
            plan.strides.push_back(v.strides);
        }
        plan.output_shape = output ? output->shape : Shape{};
        plan.output_strides = output ? output->strides : std::vector<std::int64_t>{};
        plan.alignment = alignment_of(inputs, output);
        plan.has_output = output != nullptr;
        plan.valid = true;
    }

    // Validates, plans (or reuses the plan) and launches once; the caller holds `mutex`.
    void run(std::span<const TensorView> inputs, const OutputView* output, float* result, Stream stream) {
        run(program, "", plan, inputs, output, result, stream, {}, {});
    }

    // `output` is a map's output or, with gradients, the layout the full-shape gradients share (its
    // data: the least aligned of them, or null). `inputs` ends with the upstream gradient for a map's
    // backward.
    void run(const ir::Program& prog, const std::string& variant, LaunchPlan& p, std::span<const TensorView> inputs,
             const OutputView* output, float* result, Stream stream, std::span<const OutputView> grads,
             Upstream upstream) {
        const bool map_forward = prog.is_map() && prog.derivatives.empty();
        check_operands(prog, inputs);
        if (output && map_forward) check_data("output", output->dtype, output->data, output->numel());
        ensure_device();
        cuda::ScopedContext scope(*context);
        if (!plan_matches(p, inputs, output)) make_plan(prog, variant, p, inputs, output);
        last_plan = &p;
        // Nothing to differentiate: every gradient is 0, also those of broadcast inputs, which have
        // elements of their own ([C] against [0, C]).
        if (p.layout.count == 0) {
            for (const auto& g : grads)
                if (g.numel() > 0)
                    LOSSJIT_CU(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(g.data), 0,
                                                static_cast<std::size_t>(g.numel()), stream));
        }
        if (prog.is_map() && p.layout.count == 0) return;  // an empty map has nothing to write

        // A host pointer or another device's memory would fault inside the kernel and poison the
        // context; ask the driver once per new pointer (a training loop reuses its buffers).
        std::size_t check_slot = 0;
        // `name` makes the error message's name, only for a pointer not seen before.
        auto check_pointer = [&](auto&& name, const void* data, bool empty) {
            const void*& seen = p.checked[check_slot++];
            if (empty || data == seen) return;
            check_device_pointer(name(), data);
            seen = data;
        };
        const auto& names = operand_names(prog);
        p.checked.resize(p.slots.size() + grads.size() + 3, nullptr);
        for (std::size_t k = 0; k < p.slots.size(); ++k) {
            const auto& view = inputs[static_cast<std::size_t>(p.slots[k])];
            check_pointer([&] { return fmt::format("'{}'", names[static_cast<std::size_t>(p.slots[k])]); },
                          view.data, p.layout.count == 0);
            p.inputs->set_pointer(k, view.data);
        }
        for (std::size_t g = 0; g < grads.size(); ++g)
            check_pointer([&] { return fmt::format("the gradient {}", g); }, grads[g].data, p.layout.count == 0);
        auto named = [](const char* text) { return [text] { return std::string(text); }; };
        if (map_forward) check_pointer(named("the output"), output->data, p.layout.count == 0);
        if (result) check_pointer(named("the result pointer"), result, false);
        if (upstream.device) check_pointer(named("the upstream gradient"), upstream.device, false);
        for (std::size_t i = 0; i < param_values.size(); ++i) p.params[i] = static_cast<float>(param_values[i]);
        if (map_forward) {
            p.output.ptr = output->data;
        } else if (!prog.is_map()) {
            Workspace& ws = workspace_for(stream);
            p.reduce.partials = ws.partials();
            p.reduce.arrivals = ws.arrivals(workspace_slots());
            p.reduce.result = result ? result : ws.result(workspace_slots());
        }
        if (p.spec.loop == KernelSpec::Loop::Columns) {
            Workspace& ws = workspace_for(stream);
            if (ws.column_strips < p.column_strips || ws.column_partials < p.column_partials) {
                // Earlier kernels on this stream may still use the smaller buffer: let them finish,
                // free it, then allocate the larger one (rare: the first call of a larger layout).
                if (ws.columns) LOSSJIT_CU(cuStreamSynchronize(stream));
                ws.columns.reset();
                const std::size_t strips = std::max(ws.column_strips, p.column_strips);
                const std::size_t partials = std::max(ws.column_partials, p.column_partials);
                const std::size_t bytes = sizeof(double) * ((strips + 1) / 2 + partials);
                ws.column_strips = ws.column_partials = 0;
                ws.columns = std::make_unique<cuda::Memory>(context, bytes);
                ws.column_strips = strips;
                ws.column_partials = partials;
                LOSSJIT_CU(cuMemsetD32Async(ws.columns->get(), 0, bytes / 4, stream));
            }
            p.columns.partials = ws.column_sums();
            p.columns.arrivals = ws.column_arrivals();
        }
        const std::size_t g_count = grads.size();
        for (std::size_t g = 0; g < g_count; ++g) p.grads[g] = reinterpret_cast<std::int64_t>(grads[g].data);
        if (g_count > 0) {
            p.grads[g_count + kMaxRank] = reinterpret_cast<std::int64_t>(upstream.device);
            const float scale = static_cast<float>(upstream.value / p.divisor);
            std::memcpy(&p.grads.back(), &scale, sizeof scale);
        }
        LOSSJIT_CU(cuLaunchKernel(p.kernel->function, p.grid, 1, 1, static_cast<unsigned>(p.spec.block_threads), 1, 1,
                                  0, stream, p.args.data(), nullptr));
    }

    // value_and_grad() and grad(): validates the gradients' views, differentiates once per list of
    // inputs, and runs that list's fused kernel. The caller holds `mutex`.
    void run_gradients(std::span<const TensorView> inputs, const TensorView* upstream_tensor,
                       std::span<const std::string> wrt, std::span<const OutputView> grads, float* device_value,
                       Stream stream, Upstream upstream) {
        if (wrt.empty()) throw UsageError("a gradient needs at least one input to differentiate");
        if (grads.size() != wrt.size())
            throw UsageError(fmt::format("{} gradient{} requested but {} output{} given", wrt.size(),
                                         wrt.size() == 1 ? "" : "s", grads.size(), grads.size() == 1 ? "" : "s"));
        auto it = gradient_variants.find(wrt);
        if (it == gradient_variants.end()) {
            const auto slots = gradient_slots(program, wrt);
            GradientVariant variant{differentiate(program, slots), {}, fmt::format("grad({}) ", fmt::join(wrt, ","))};
            it = gradient_variants.emplace(std::vector<std::string>(wrt.begin(), wrt.end()), std::move(variant)).first;
        }
        GradientVariant& variant = it->second;

        const Shape shape = broadcast_shapes(shapes_of(program.inputs, inputs));
        if (upstream_tensor && upstream_tensor->shape != shape)
            throw UsageError(fmt::format("the upstream gradient has shape [{}], but the output's shape is [{}]",
                                         fmt::join(upstream_tensor->shape, ", "), fmt::join(shape, ", ")));
        const OutputView* least_aligned = nullptr;  // of the full-shape gradients, which share one layout
        for (std::size_t k = 0; k < wrt.size(); ++k) {
            const auto& input = inputs[static_cast<std::size_t>(variant.program.derivatives[k].input)];
            const auto& g = grads[k];
            check_data([&] { return fmt::format("the gradient of '{}'", wrt[k]); }, g.dtype, g.data, g.numel());
            if (g.shape != input.shape || !is_dense(g.shape, g.strides))
                throw UsageError(fmt::format("the gradient of '{}' must be a contiguous tensor of its shape [{}]",
                                             wrt[k], fmt::join(input.shape, ", ")));
            // One gradient element per element (the input's own shape may still differ, e.g. [1, C]
            // against [C]): stored where the output walks, with 16-byte stores if all are aligned.
            if (element_count(input.shape) == element_count(shape)) {
                if (!least_aligned || reinterpret_cast<std::uintptr_t>(g.data) % 16 != 0) least_aligned = &g;
            } else if (!is_dense(input.shape, input.strides)) {
                throw UsageError(fmt::format("'{}' is broadcast to [{}] and not contiguous: its gradient on the GPU "
                                             "needs a contiguous tensor", wrt[k], fmt::join(shape, ", ")));
            }
        }
        const OutputView layout_view = OutputView::contiguous(least_aligned ? least_aligned->data : nullptr, shape);
        std::vector<TensorView> operands;
        if (upstream_tensor) {
            operands.assign(inputs.begin(), inputs.end());
            operands.push_back(*upstream_tensor);
            inputs = operands;
        }
        run(variant.program, variant.label, variant.plan, inputs, &layout_view, device_value, stream, grads, upstream);
    }

    void check_device_pointer(const std::string& name, const void* data) const {
        int ordinal = -1;
        const CUresult r = cuda::api().cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                                             reinterpret_cast<CUdeviceptr>(data));
        if (r != CUDA_SUCCESS)
            throw UsageError(fmt::format("{} is not CUDA device memory (a host pointer?)", name));
        if (ordinal != options.device)
            throw UsageError(fmt::format("{} is memory of CUDA device {}, but this loss runs on device {}", name,
                                         ordinal, options.device));
    }

    void check_inputs(std::span<const TensorView> inputs) const { check_operands(program, inputs); }

    void check_operands(const ir::Program& prog, std::span<const TensorView> inputs) const {
        const auto& names = operand_names(prog);
        if (inputs.size() != names.size()) shapes_of(names, inputs);  // throws the message
        for (std::size_t k = 0; k < inputs.size(); ++k)
            check_data(names[k], inputs[k].dtype, inputs[k].data, inputs[k].numel());
    }
};

Loss::Loss(std::shared_ptr<const Compiled> compiled) : state_(std::make_unique<State>(std::move(compiled))) {}

Loss::Loss(const Loss& other) : Loss(other.state_->compiled) {
    std::lock_guard lock(other.state_->mutex);
    state_->param_values = other.state_->param_values;
}

Loss& Loss::operator=(const Loss& other) {
    if (this != &other) {
        Loss copy(other);
        std::swap(state_, copy.state_);
    }
    return *this;
}

Loss::~Loss() = default;

Loss compile(std::string_view source, Options options) {
    validate_knobs(options.knobs);
    auto compiled = std::make_shared<Loss::Compiled>();

    auto start = Clock::now();
    compiled->syntax = parse(source, options.source_name);
    compiled->parse_ms = ms_since(start);

    start = Clock::now();
    CheckOptions check_options;
    check_options.inputs = options.inputs;
    for (const auto& p : options.params) check_options.params.push_back({p.name, p.value});
    compiled->program = check(compiled->syntax, check_options);
    compiled->check_ms = ms_since(start);

    const ir::Program& program = compiled->program;
    if (options.expect && *options.expect != (program.is_map() ? Kind::Map : Kind::Reduction)) {
        const ast::Pos at = program.node(program.body).pos;
        throw SourceError({options.source_name, at.line, at.column},
                          program.is_map() ? "expected a reduction (sum, mean or batchmean of an expression), but "
                                             "this program is an elementwise map"
                                           : fmt::format("expected an elementwise map, but this program is a {} "
                                                         "reduction", ir::to_string(program.reduction)),
                          program.source);
    }
    compiled->inputs_and_upstream = program.inputs;
    compiled->inputs_and_upstream.push_back("upstream");
    compiled->options = std::move(options);
    return Loss(std::move(compiled));
}

Kind Loss::kind() const { return state_->program.is_map() ? Kind::Map : Kind::Reduction; }

std::string_view Loss::reduction() const {
    return state_->program.is_map() ? std::string_view() : ir::to_string(state_->program.reduction);
}

const std::vector<std::string>& Loss::inputs() const { return state_->program.inputs; }

std::vector<Param> Loss::params() const {
    std::vector<Param> out;
    const std::vector<double> values = state_->params_now();
    for (std::size_t i = 0; i < state_->program.params.size(); ++i)
        out.push_back({state_->program.params[i].name, values[i]});
    return out;
}

void Loss::set_param(std::string_view name, double value) {
    std::lock_guard lock(state_->mutex);
    for (std::size_t i = 0; i < state_->program.params.size(); ++i) {
        if (state_->program.params[i].name == name) {
            state_->param_values[i] = value;
            return;
        }
    }
    std::vector<std::string> names;
    for (const auto& p : state_->program.params) names.push_back(p.name);
    throw UsageError(fmt::format("the program has no parameter '{}' (its parameters: {})", printable(name),
                                 names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
}

bool Loss::uses(std::string_view name) const {
    const auto& program = state_->program;
    for (const auto& n : program.nodes) {
        if (n.kind == ir::NodeKind::Input && program.inputs[static_cast<std::size_t>(n.slot)] == name) return true;
        if (n.kind == ir::NodeKind::Param && program.params[static_cast<std::size_t>(n.slot)].name == name) return true;
    }
    return false;
}

Shape Loss::output_shape(std::span<const TensorView> inputs) const {
    return broadcast_shapes(shapes_of(state_->program.inputs, inputs));
}

float Loss::operator()(std::span<const TensorView> inputs, Stream stream) {
    if (kind() != Kind::Reduction) throw UsageError("this program is an elementwise map: call map() with an output");
    // The lock also covers the copy: another call on this stream must not overwrite the result first.
    float value = 0.0f;
    std::shared_ptr<cuda::Context> context;
    {
        // The copy is queued under the lock: a later call on this stream is queued after it, so it
        // cannot overwrite the result first. The wait is not.
        std::lock_guard lock(state_->mutex);
        state_->run(inputs, nullptr, nullptr, stream);
        context = state_->context;
        cuda::ScopedContext scope(*context);
        const Workspace& ws = state_->workspaces.at(stream);
        LOSSJIT_CU(cuMemcpyDtoHAsync(&value, reinterpret_cast<CUdeviceptr>(ws.result(state_->workspace_slots())),
                                     sizeof value, stream));
    }
    cuda::ScopedContext scope(*context);
    LOSSJIT_CU(cuStreamSynchronize(stream));
    return value;
}

void Loss::evaluate(std::span<const TensorView> inputs, float* device_result, Stream stream) {
    if (kind() != Kind::Reduction) throw UsageError("this program is an elementwise map: call map() with an output");
    if (!device_result) throw UsageError("evaluate() needs a device pointer for the result");
    std::lock_guard lock(state_->mutex);
    state_->run(inputs, nullptr, device_result, stream);
}

void Loss::map(std::span<const TensorView> inputs, const OutputView& output, Stream stream) {
    if (kind() != Kind::Map)
        throw UsageError(fmt::format("this program is a {} reduction: call it for a value, not map()", reduction()));
    std::lock_guard lock(state_->mutex);
    state_->run(inputs, &output, nullptr, stream);
}

void Loss::value_and_grad(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                          std::span<const OutputView> grads, float* device_value, Stream stream, Upstream upstream) {
    if (kind() != Kind::Reduction)
        throw UsageError("this program is an elementwise map: call grad() with an upstream gradient tensor");
    std::lock_guard lock(state_->mutex);
    state_->run_gradients(inputs, nullptr, wrt, grads, device_value, stream, upstream);
}

void Loss::grad(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                std::span<const OutputView> grads, Stream stream, Upstream upstream) {
    if (kind() != Kind::Reduction)
        throw UsageError("this program is an elementwise map: its gradient needs an upstream tensor of the output's shape");
    std::lock_guard lock(state_->mutex);
    state_->run_gradients(inputs, nullptr, wrt, grads, nullptr, stream, upstream);
}

std::vector<DeviceGradient> Loss::grad(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                                       Stream stream, Upstream upstream) {
    if (kind() != Kind::Reduction)
        throw UsageError("this program is an elementwise map: its gradient needs an upstream tensor of the output's shape");
    const auto slots = gradient_slots(state_->program, wrt);  // unknown names fail before any allocation
    if (inputs.size() != state_->program.inputs.size()) shapes_of(state_->program.inputs, inputs);  // throws
    std::vector<DeviceGradient> out;
    std::vector<OutputView> views;
    for (std::size_t k = 0; k < slots.size(); ++k) {
        const Shape& shape = inputs[static_cast<std::size_t>(slots[k])].shape;
        const auto count = static_cast<std::size_t>(std::max<std::int64_t>(element_count(shape), 1));
        out.push_back({wrt[k], shape, DeviceBuffer(count * sizeof(float), state_->options.device)});
        views.push_back(out.back().view());
    }
    grad(inputs, wrt, views, stream, upstream);
    return out;
}

void Loss::grad(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                std::span<const OutputView> grads, const TensorView& upstream, Stream stream) {
    if (kind() != Kind::Map)
        throw UsageError("this program is a reduction: its upstream gradient is a number, not a tensor");
    std::lock_guard lock(state_->mutex);
    state_->run_gradients(inputs, &upstream, wrt, grads, nullptr, stream, {});
}

double Loss::reference(std::span<const TensorView> host_inputs) const {
    if (kind() != Kind::Reduction) throw UsageError("this program is an elementwise map: use reference_map()");
    state_->check_inputs(host_inputs);
    const Layout layout = state_->layout_for(host_inputs, nullptr);
    std::vector<const float*> data;
    for (const auto& v : host_inputs) data.push_back(static_cast<const float*>(v.data));
    return reference_reduce(state_->program, layout, data, state_->params_now());
}

void Loss::reference_map(std::span<const TensorView> host_inputs, const OutputView& host_output) const {
    if (kind() != Kind::Map) throw UsageError("this program is a reduction: use reference()");
    state_->check_inputs(host_inputs);
    check_data("output", host_output.dtype, host_output.data, host_output.numel());
    const Layout layout = state_->layout_for(host_inputs, &host_output);
    std::vector<const float*> data;
    for (const auto& v : host_inputs) data.push_back(static_cast<const float*>(v.data));
    lossjit::reference_map(state_->program, layout, data, state_->params_now(), static_cast<float*>(host_output.data));
}

std::vector<ReferenceGradient> Loss::State::gradients_on_cpu(std::span<const TensorView> host_inputs,
                                                             std::span<const std::string> wrt, double upstream,
                                                             const TensorView* host_upstream) const {
    const State& impl = *this;
    const ir::Program program = differentiate(impl.program, gradient_slots(impl.program, wrt));
    std::optional<OperandShape> up;
    if (host_upstream) {
        check_data("upstream", host_upstream->dtype, host_upstream->data, host_upstream->numel());
        up = OperandShape{"upstream", host_upstream->shape, host_upstream->strides};
    }
    const GradientLayout layout = plan_gradient_layout(shapes_of(program.inputs, host_inputs), up ? &*up : nullptr);
    std::vector<const float*> data;
    for (const auto& v : host_inputs) data.push_back(static_cast<const float*>(v.data));
    auto values = reference_gradients(program, layout, data, impl.params_now(), upstream,
                                      host_upstream ? static_cast<const float*>(host_upstream->data) : nullptr);
    std::vector<ReferenceGradient> out;
    for (std::size_t k = 0; k < values.size(); ++k) {
        const auto slot = static_cast<std::size_t>(program.derivatives[k].input);
        out.push_back({program.inputs[slot], host_inputs[slot].shape, std::move(values[k])});
    }
    return out;
}

std::vector<ReferenceGradient> Loss::reference_grad(std::span<const TensorView> host_inputs,
                                                    std::span<const std::string> wrt, double upstream) const {
    if (kind() != Kind::Reduction)
        throw UsageError("this program is an elementwise map: its gradient needs an upstream tensor of the output's shape");
    state_->check_inputs(host_inputs);
    return state_->gradients_on_cpu(host_inputs, wrt, upstream, nullptr);
}

std::vector<ReferenceGradient> Loss::reference_grad(std::span<const TensorView> host_inputs,
                                                    std::span<const std::string> wrt,
                                                    const TensorView& host_upstream) const {
    if (kind() != Kind::Map)
        throw UsageError("this program is a reduction: its upstream gradient is a number, not a tensor");
    state_->check_inputs(host_inputs);
    return state_->gradients_on_cpu(host_inputs, wrt, 0.0, &host_upstream);
}

std::string Loss::derivatives(std::span<const std::string> wrt) const {
    return dump_gradients(differentiate(state_->program, gradient_slots(state_->program, wrt)));
}

std::string Loss::ast() const { return dump_ast(state_->compiled->syntax); }
std::string Loss::checked() const { return dump_checked(state_->program); }

Loss::State::Emitted Loss::State::emit_for(std::span<const TensorView> inputs) const {
    const State& impl = *this;
    // A map's output is taken to be contiguous, as the CLI allocates it.
    std::optional<OutputView> output;
    if (impl.program.is_map())
        output = OutputView::contiguous(nullptr, broadcast_shapes(shapes_of(impl.program.inputs, inputs)));
    const OutputView* out = output ? &*output : nullptr;
    const Layout layout = impl.layout_for(inputs, out);
    const KernelSpec spec = impl.spec_for(impl.program, layout, inputs, out);
    return {emit_cuda(impl.program, spec), spec.fast_math};
}

std::string Loss::cuda_source(std::span<const TensorView> inputs) const { return state_->emit_for(inputs).source; }

std::string Loss::cuda_source(std::span<const TensorView> inputs, std::span<const std::string> wrt) const {
    if (wrt.empty()) return cuda_source(inputs);
    const auto program = differentiate(state_->program, gradient_slots(state_->program, wrt));
    const Shape shape = output_shape(inputs);
    const OutputView gradients = OutputView::contiguous(nullptr, shape);
    std::vector<TensorView> operands(inputs.begin(), inputs.end());
    if (program.is_map()) operands.push_back(TensorView::contiguous(nullptr, shape));  // the upstream gradient
    const Layout layout = state_->layout_for(program, operands, &gradients);
    return emit_cuda(program, state_->spec_for(program, layout, operands, &gradients, "grad"));
}

std::string Loss::cuda_source() const {
    // The variant for large, aligned, contiguous inputs that all have one shape.
    const std::vector<TensorView> inputs(state_->program.inputs.size(), TensorView::contiguous(nullptr, {1 << 24}));
    return cuda_source(inputs);
}

KernelBuild Loss::compile_kernel(std::span<const TensorView> inputs, const std::string& target) const {
    KernelBuild build;
    const std::vector<TensorView> defaults(state_->program.inputs.size(), TensorView::contiguous(nullptr, {1 << 24}));
    const State::Emitted emitted = state_->emit_for(inputs.empty() && !state_->program.inputs.empty() ? defaults : inputs);
    build.source = emitted.source;
    build.target = normalize_target(target);
    const CacheLookup lookup = KernelCache::process().get(build.source, build.target, emitted.fast_math);
    build.key = lookup.key;
    build.cache = lookup.outcome;
    build.image_bytes = lookup.image->data.size();
    build.nvrtc_ms = lookup.compile_ms;
    build.warning = lookup.warning;
    return build;
}

std::string Loss::ptx(std::span<const TensorView> inputs, const std::string& arch) const {
    std::string target = normalize_target(arch);
    if (target.rfind("sm_", 0) == 0) target = "compute_" + target.substr(3);
    const std::vector<TensorView> defaults(state_->program.inputs.size(), TensorView::contiguous(nullptr, {1 << 24}));
    const State::Emitted emitted = state_->emit_for(inputs.empty() && !state_->program.inputs.empty() ? defaults : inputs);
    return KernelCache::process().get(emitted.source, target, emitted.fast_math).image->data;
}

Timings Loss::timings() const {
    std::lock_guard lock(state_->mutex);
    return state_->timings;
}

std::optional<KernelInfo> Loss::kernel_info() const {
    std::lock_guard lock(state_->mutex);
    const LaunchPlan* plan = state_->last_plan;
    if (!plan || !plan->valid || !plan->kernel) return std::nullopt;
    KernelInfo info = plan->kernel->info;
    info.knobs.max_blocks_per_sm = plan->max_blocks_per_sm;
    info.grid = plan->grid;
    const Occupancy occupancy{info.resident_blocks_per_sm, plan->max_blocks_per_sm, state_->multiprocessors};
    // The launch puts at most this many blocks on one SM at once (fewer when the grid is small).
    info.blocks_per_sm = occupancy.blocks_per_sm(plan->grid);
    info.occupancy = occupancy.fraction(plan->grid, info.knobs.block_threads, state_->max_threads_per_sm);
    info.tuned = plan->tuned;
    info.notes = plan->spec.notes;
    return info;
}

}  // namespace lossjit
