// loss: lossjit::Loss, the public face of the runtime, wiring its parts together. compile() runs
// parse and check; a GPU call checks the views (validate), finds or makes the plan for their layout
// (plans; the first call for a layout loads its kernel: kernels), patches the stream's kernel
// arguments with the call's pointers and launches once.
//
// Locks (the contract is in lossjit.hpp, at class Loss):
// - each stream's StreamState::mutex, held by a launch on that stream from finding its plan to
//   cuLaunchKernel: launches on one stream are queued in call order, launches on different streams
//   do not wait for each other;
// - `streams_mutex` and `gradients_mutex`, shared locks around finding a stream's state or a list of
//   inputs' gradient program (exclusive only to add one);
// - `memo_mutex`, around reading or replacing the pointer to the last gradient call's layout;
// - `mutex`, around the rest that streams share: the device's facts, the loaded kernels, the plan
//   caches and the timings. A launch takes it only for a layout its stream has not launched before
//   (to find the plan, or make it: compiling and loading a kernel happens under it);
// - none of them while waiting for the GPU, except where the scratch of a stream's summed
//   gradients grows (it waits for that stream's earlier kernels under that stream's lock).
// Lock order: a stream's lock, then `mutex`.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>

#include <fmt/format.h>

#include "codegen/kernel_spec.hpp"
#include "cuda/driver.hpp"
#include "jit/cache.hpp"
#include "jit/compile.hpp"
#include "jit/resources.hpp"
#include "lossjit/lossjit.hpp"
#include "pipeline.hpp"
#include "runtime/kernels.hpp"
#include "runtime/plans.hpp"
#include "runtime/scratch.hpp"
#include "runtime/validate.hpp"
#include "tuning/knobs.hpp"
#include "util/timing.hpp"

namespace lossjit {
namespace {

std::vector<HostOperand> host_operands(std::span<const TensorView> views) {
    std::vector<HostOperand> operands;
    for (const auto& v : views) operands.push_back({v.data, v.dtype});
    return operands;
}

// A float32 pointer's result. A bare pointer says nothing of its room: a program of several results
// needs a view that says it holds them all.
OutputView result_view(float* data, const ir::Program& program) {
    if (program.result_count() > 1)
        throw UsageError(fmt::format("this program has {} results: pass an OutputView of {} elements, not a float pointer",
                                     program.result_count(), program.result_count()));
    return OutputView{data, DType::float32, {}, {}};
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
    State(std::shared_ptr<const Compiled> shared, int device_ordinal)
        : compiled(std::move(shared)), options(compiled->options), program(compiled->program),
          device_ordinal(device_ordinal), param_values(compiled->program.caller_params()) {
        for (std::size_t i = 0; i < param_values.size(); ++i) param_values[i] = program.params[i].default_value;
        timings.parse_ms = compiled->parse_ms;
        timings.check_ms = compiled->check_ms;
        loss.program = &program;
        loss.operands = &operand_names(program);
        statistics.resize(program.statistics.size());
        for (std::size_t i = 0; i < statistics.size(); ++i) {
            statistics[i].program = program.statistics[i].get();
            statistics[i].operands = &program.statistics[i]->inputs;
            statistics[i].label = fmt::format("statistic{} ", i);
        }
    }

    const std::shared_ptr<const Compiled> compiled;
    const Options& options;
    const ir::Program& program;
    // The CUDA device this Loss runs on: Options::device, or what on_device() chose.
    const int device_ordinal;

    // Read by every launch, written by set_param: one atomic each, so neither waits for the other.
    std::vector<std::atomic<double>> param_values;

    // Shared by the streams; see the locks at the top of this file.
    mutable std::mutex mutex;
    Timings timings;
    std::atomic<bool> device_open{false};
    DeviceFacts device;  // written once, under `mutex`, before device_open is set
    KernelMap kernels;
    Launchable loss;
    std::vector<Launchable> statistics;  // program.statistics', run before any kernel that reads them
    std::map<const Launchable*, PlanCache> plans;

    struct GradientProgram {  // the program differentiated for one list of inputs
        ir::Program program;
        Launchable launchable;
        Launchable factor;  // a Composite program's gradient factor (program.gradient_factor), if any
    };
    // A gradient program is made for a list of inputs and, where the program reduces along rows,
    // for which inputs hold one value per row and which K (their derivatives differ: differentiate();
    // `levels` is input_levels').
    struct GradientKey {
        std::vector<std::string> wrt;
        std::vector<bool> levels;
    };
    struct GradientLookup {
        std::span<const std::string> wrt;
        const std::vector<bool>& levels;
    };
    struct KeyLess {  // lets a lookup (a span of names) find a key (a vector of names)
        using is_transparent = void;
        template <class A, class B>
        bool operator()(const A& a, const B& b) const {
            if (std::lexicographical_compare(a.wrt.begin(), a.wrt.end(), b.wrt.begin(), b.wrt.end())) return true;
            if (std::lexicographical_compare(b.wrt.begin(), b.wrt.end(), a.wrt.begin(), a.wrt.end())) return false;
            return a.levels < b.levels;
        }
    };
    mutable std::shared_mutex gradients_mutex;
    std::map<GradientKey, std::unique_ptr<GradientProgram>, KeyLess> gradients;

    // The value's layout and gradient program of the last gradient call: a training loop repeats one
    // call, and planning the layout was half of a repeated call's host work (bench/host_path.sh). The
    // layout depends on the inputs' shapes and strides alone, the program on it and `wrt`.
    struct GradientMemo {
        ViewShapes inputs;
        std::vector<std::string> wrt;
        Layout value_layout;
        const GradientProgram* differentiated = nullptr;  // gradients' entries live as long as the Loss

        bool matches(std::span<const TensorView> views, std::span<const std::string> names) const {
            return std::equal(names.begin(), names.end(), wrt.begin(), wrt.end()) && inputs.matches(views);
        }
    };
    mutable std::mutex memo_mutex;
    std::shared_ptr<const GradientMemo> memo;

    std::shared_ptr<const GradientMemo> gradient_memo(std::span<const TensorView> inputs, std::span<const std::string> wrt) {
        {
            std::lock_guard lock(memo_mutex);
            if (memo && memo->matches(inputs, wrt)) return memo;
        }
        (void)gradient_slots(program, wrt);  // an unknown or repeated name first
        auto made = std::make_shared<GradientMemo>();
        made->inputs = ViewShapes(inputs);
        made->wrt.assign(wrt.begin(), wrt.end());
        made->value_layout = plan_program_layout(program, operand_shapes(program.inputs, inputs), nullptr);
        made->differentiated = &gradient_program(wrt, input_levels(made->value_layout));
        std::lock_guard lock(memo_mutex);
        memo = made;
        return made;
    }

    mutable std::shared_mutex streams_mutex;
    std::map<Stream, std::unique_ptr<StreamState>> streams;
    std::atomic<std::uint64_t> calls{0};  // numbers the launches, so kernel_info() finds the most recent

    std::vector<double> params_now() const {
        std::vector<double> values;
        for (const auto& v : param_values) values.push_back(v.load());
        return values;
    }

    // The values of the program's statistics, on the CPU (each with those before it).
    std::vector<double> reference_statistics(std::span<const TensorView> host_inputs) const {
        const auto views = host_inputs.first(program.inputs.size());  // not a map backward's upstream
        return lossjit::reference_statistics(program, operand_shapes(program.inputs, views), host_operands(views),
                                             params_now());
    }

    // The names of what a kernel of `prog` reads: the program's inputs, and a map's upstream gradient.
    const std::vector<std::string>& operand_names(const ir::Program& prog) const {
        return prog.is_map() && !prog.derivatives.empty() ? compiled->inputs_and_upstream : prog.inputs;
    }

    Layout layout_for(const ir::Program& prog, std::span<const TensorView> inputs, const OutputView* output) const {
        const auto shapes = operand_shapes(operand_names(prog), inputs);
        if (!output) return plan_program_layout(prog, shapes, nullptr);
        const OperandShape out{"output", output->shape.to_vector(), output->strides.to_vector()};
        return plan_program_layout(prog, shapes, &out);
    }

    // The kernel a call would run, without a GPU: no tuning record is looked up for a GPU that was
    // not asked for, and the defaults are those of the GPU named by Options::gpu, else those for any
    // GPU (a GPU with defaults of its own, kinds/defaults.cpp, may run another variant), so the
    // source does not depend on the machine.
    KernelSpec spec_for(const ir::Program& prog, const Layout& layout, const CallViews& views, bool tunable) const {
        return choose_variant(options, prog, tunable, layout, views, "", named_gpu_facts(options.gpu)).spec;
    }

    struct Emitted {
        std::string source;
        bool fast_math = false;
    };
    // An emitted kernel compiled through the cache for `target` ("sm_90", "compute_90"); no GPU
    // needed. A kernel chosen for a named GPU is built for its architecture only.
    KernelBuild build_kernel(const Emitted& emitted, const std::string& target) const {
        KernelBuild build;
        build.source = emitted.source;
        build.target = normalize_target(target);
        require_target_of(options.gpu, build.target);
        const CacheLookup lookup = KernelCache::process().get(build.source, build.target, emitted.fast_math);
        build.key = lookup.key;
        build.cache = lookup.outcome;
        build.image_bytes = lookup.image->data.size();
        build.nvrtc_ms = lookup.compile_ms;
        build.warning = lookup.warning;
        if (const auto resources = read_resources(*lookup.image)) {
            build.registers = resources->registers;
            build.local_bytes = resources->local_bytes;
        }
        return build;
    }
    // The kernel a call with these inputs would run (tuned knobs included where the GPU is known).
    Emitted emit_for(std::span<const TensorView> inputs) const;
    // Statistic `index`'s kernel for these inputs (its value goes to a float64 result).
    Emitted emit_statistic_for(std::size_t index, std::span<const TensorView> inputs) const;
    // A kernel of float64 results computed before the program's own (a statistic, a gradient factor).
    Emitted emit_statistic_like(const ir::Program& kernel, std::span<const TensorView> inputs) const;
    // The fused value-and-gradient kernel value_and_grad() (a map: grad()) would run.
    Emitted emit_gradient_for(std::span<const TensorView> inputs, std::span<const std::string> wrt) const;
    // The differentiated program those kernels come from (its gradient_factor: the kernel before
    // them), and the value's layout it was differentiated for.
    struct Differentiated {
        ir::Program program;
        Layout value_layout;
    };
    Differentiated differentiated_for(std::span<const TensorView> inputs, std::span<const std::string> wrt) const;
    std::optional<Emitted> emit_factor_for(std::span<const TensorView> inputs, std::span<const std::string> wrt) const;
    std::vector<ReferenceGradient> gradients_on_cpu(std::span<const TensorView> host_inputs,
                                                    std::span<const std::string> wrt, double upstream,
                                                    const TensorView* host_upstream) const;

    const DeviceFacts& ensure_device() {
        if (!device_open.load(std::memory_order_acquire)) {
            std::lock_guard lock(mutex);
            if (!device_open.load(std::memory_order_relaxed)) {
                util::Stopwatch watch;
                device = open_device(device_ordinal);
                timings.device_ms = watch.lap_ms();
                device_open.store(true, std::memory_order_release);
            }
        }
        return device;
    }

    int workspace_slots() const { return device.multiprocessors * kMaxBlocksPerSm; }

    StreamState& stream_state(Stream stream) {
        {
            std::shared_lock lock(streams_mutex);
            if (auto it = streams.find(stream); it != streams.end()) return *it->second;
        }
        std::unique_lock lock(streams_mutex);
        auto& state = streams[stream];
        if (!state) state = std::make_unique<StreamState>();
        return *state;
    }

    // Which inputs hold one value per row, then which hold K values per row (per_row_inputs, then
    // k_inputs, one entry per input each): what a gradient program depends on beyond `wrt`.
    std::vector<bool> input_levels(const Layout& layout) const {
        const std::size_t n = program.inputs.size();
        std::vector<bool> levels = per_row_inputs(program, layout), k = k_inputs(layout);
        levels.resize(n, false);
        k.resize(n, false);
        levels.insert(levels.end(), k.begin(), k.end());
        return levels;
    }

    // The gradient program for `wrt` in a layout whose inputs are one per row and K per row as
    // `levels` (input_levels) says, differentiating on first use.
    const GradientProgram& gradient_program(std::span<const std::string> wrt, const std::vector<bool>& levels) {
        {
            std::shared_lock lock(gradients_mutex);
            if (auto it = gradients.find(GradientLookup{wrt, levels}); it != gradients.end()) return *it->second;
        }
        const auto slots = gradient_slots(program, wrt);
        auto entry = std::make_unique<GradientProgram>();
        const auto middle = levels.begin() + static_cast<std::ptrdiff_t>(program.inputs.size());
        entry->program = differentiate(program, slots, std::vector<bool>(levels.begin(), middle),
                                       std::vector<bool>(middle, levels.end()));
        std::unique_lock lock(gradients_mutex);
        auto& slot = gradients[GradientKey{std::vector<std::string>(wrt.begin(), wrt.end()), levels}];
        if (!slot) {  // else another thread was first: its program is the same
            slot = std::move(entry);
            slot->launchable.program = &slot->program;
            slot->launchable.operands = &operand_names(slot->program);
            slot->launchable.label = fmt::format("grad({}) ", fmt::join(wrt, ","));
            if (const auto& factor = slot->program.gradient_factor) {
                slot->factor.program = factor.get();
                slot->factor.operands = &factor->inputs;
                slot->factor.label = fmt::format("grad({}) factor ", fmt::join(wrt, ","));
            }
        }
        return *slot;
    }

    // A call's views as planning sees them, and where a reduction's value goes (null: the workspace).
    struct Call {
        CallViews views;
        const OutputView* result = nullptr;
    };

    // A launch holds its stream's lock until the caller drops this (operator() first queues the
    // copy of the result).
    struct Launched {
        std::unique_lock<std::mutex> lock;
        StreamState* stream = nullptr;
    };

    // Where a call keeps the float64 values one kernel leaves for the next (a Composite program's
    // gradient factor, the statistics): the caller's lent scratch, or the stream's workspace. The
    // caller holds the stream's lock (hold()) from the first of those kernels to the last, so that
    // no other call on the stream writes them in between.
    struct BetweenKernels {
        double* factor = nullptr;
        double* statistics = nullptr;
    };
    BetweenKernels between_kernels(StreamState& here, Stream stream) {
        cuda::ScopedContext scope(*device.context);
        const ReduceScratch area(workspace_slots());
        if (const auto lent = lent_scratch()) {  // ReduceScratch's layout, as the Workspace's
            if (lent->bytes < reduce_scratch_bytes(workspace_slots()))
                throw ScratchTooSmall(fmt::format("this call needs {} bytes of scratch, but {} were lent",
                                                  reduce_scratch_bytes(workspace_slots()), lent->bytes),
                                      reduce_scratch_bytes(workspace_slots()));
            return {area.factor(lent->data), area.statistics(lent->data)};
        }
        here.workspace.ensure(device.context, workspace_slots(), stream);
        return {here.workspace.factor(), here.workspace.statistics()};
    }

    // The statistics' values on the device, each computed by its own kernel on `stream` into
    // `values`, in order; null where the program has none. `held`: the stream's lock.
    const double* run_statistics(Launched& held, std::span<const TensorView> inputs, double* values, Stream stream) {
        if (statistics.empty()) return nullptr;
        const auto views = inputs.first(program.inputs.size());  // not a map backward's upstream
        for (std::size_t i = 0; i < statistics.size(); ++i) {
            const OutputView value{values + i, DType::float64, {}, {}};
            launch_held(held, statistics[i], validate(statistics[i], views, nullptr, &value, {}), stream, {}, {}, nullptr,
                        values);
        }
        return values;
    }

    Launched run(std::span<const TensorView> inputs, const OutputView* output, const OutputView* result,
                 Stream stream) {
        if (statistics.empty()) return run(loss, inputs, output, result, stream, {}, {});
        const Call call = validate(loss, inputs, output, result, {});
        Launched held = hold(stream);
        const double* values = run_statistics(held, inputs, between_kernels(*held.stream, stream).statistics, stream);
        launch_held(held, loss, call, stream, {}, {}, nullptr, values);
        return held;
    }

    // The stream's lock (and the device open): a call holds it from its first launch to its last.
    Launched hold(Stream stream) {
        ensure_device();
        StreamState& here = stream_state(stream);
        return Launched{std::unique_lock(here.mutex), &here};
    }

    // One launch, in four steps: validate the caller's views, find (or make) the plan for their
    // layout, bind this call's pointers, parameters and scratch into the plan's arguments, launch.
    // `output` is a map's output or, with gradients, the layout the full-shape gradients share (no
    // data). `result`: where a reduction's value goes (null: the stream's workspace, as float32).
    // `inputs` ends with the upstream gradient for a map's backward.
    Launched run(const Launchable& what, std::span<const TensorView> inputs, const OutputView* output,
                 const OutputView* result, Stream stream, std::span<const OutputView> grads, Upstream upstream) {
        const Call call = validate(what, inputs, output, result, grads);
        Launched held = hold(stream);
        launch_held(held, what, call, stream, grads, upstream, nullptr, nullptr);
        return held;
    }

    // The launch of a validated call, its stream's lock held (hold()). `factor`: a Composite
    // program's gradient factor, on the device (its own kernel's result); `statistics`: the values
    // of the statistics the program reads (run_statistics).
    void launch_held(Launched& held, const Launchable& what, const Call& call, Stream stream,
                     std::span<const OutputView> grads, Upstream upstream, const double* factor,
                     const double* statistics) {
        const DeviceFacts& dev = ensure_device();
        cuda::ScopedContext scope(*dev.context);
        StreamState& here = *held.stream;
        StreamState::Binding& binding = plan(what, call.views, here, stream, dev);
        const Plan& p = *binding.args.plan();
        const ir::Program& prog = *what.program;

        // Nothing to differentiate: every gradient is 0, also those of broadcast inputs, which have
        // elements of their own ([C] against [0, C]).
        if (p.layout.count == 0) {
            for (const auto& g : grads)
                if (g.numel() > 0)  // zero bits are 0 in every floating dtype
                    LOSSJIT_CU(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(g.data), 0,
                                               static_cast<std::size_t>(g.numel()) * size_of(g.dtype), stream));
        }
        // An empty map has nothing to write (one of rows of no elements still writes a value per row).
        if (prog.is_map() && p.layout.count == 0 && !(p.layout.by_rows && p.layout.rows > 0)) return;

        if (prog.reads_statistics() && !statistics) throw InternalError("a kernel launched before its statistics");
        const ScratchPointers scratch = bind(what, binding, call, stream, here, upstream, factor);
        binding.args.statistics = statistics;
        launch(p, binding.args, stream);
        if (p.spec.scatters()) scatter(p, scratch, call.views.grads, stream);
    }

    // The caller's views, before anything touches the device.
    Call validate(const Launchable& what, std::span<const TensorView> inputs, const OutputView* output,
                  const OutputView* result, std::span<const OutputView> grads) const {
        const ir::Program& prog = *what.program;
        check_views(*what.operands, inputs);
        check_indices(prog, inputs);
        if (output && is_map_forward(prog)) check_data("output", output->dtype, output->data, output->numel(), true);
        if (result) {
            const auto count = static_cast<std::int64_t>(prog.result_count());
            check_data("the result", result->dtype, result->data, count, true);
            if (result->numel() != count)
                throw UsageError(count == 1 ? fmt::format("the result must be one element, not [{}]", fmt::join(result->shape, ", "))
                                            : fmt::format("the results must be {} elements (one per result), not [{}]", count,
                                                          fmt::join(result->shape, ", ")));
            if (count > 1 && !result->strides.empty() && result->strides != Dims(contiguous_strides(result->shape)))
                throw UsageError("the results must be contiguous");
        }
        return Call{CallViews{inputs, output, result ? result->dtype : DType::float32, grads}, result};
    }

    static bool is_map_forward(const ir::Program& prog) { return prog.is_map() && prog.derivatives.empty(); }

    // This stream's arguments for `what`, bound to the plan for these views' layout: the one bound
    // last when it still matches, else one from the Loss's plan cache, else a new one (the only
    // path that emits, compiles and loads).
    StreamState::Binding& plan(const Launchable& what, const CallViews& views, StreamState& here, Stream stream,
                               const DeviceFacts& dev) {
        auto binding = here.bindings.find(&what);
        if (binding == here.bindings.end()) binding = here.bindings.try_emplace(&what, device_ordinal).first;
        LaunchArgs& args = binding->second.args;
        if (!args.plan() || !args.plan()->matches(views)) {
            std::shared_ptr<const Plan> found;
            {
                std::lock_guard lock(mutex);
                PlanCache& cache = plans[&what];
                found = cache.find(views);
                if (!found) {
                    // Compiling and loading a module would invalidate a CUDA graph capture.
                    refuse_if_capturing(stream, "compile and load the kernel for a new layout of its inputs");
                    found = make_plan(what, options, views, dev, kernels, timings);
                    cache.add(found);
                }
            }
            args.bind(std::move(found));
        }
        if (here.last != args.plan()) here.last = args.plan();  // a reference count touched only on a change
        here.last_call.store(++calls);
        return binding->second;
    }

    // Where this call's scratch lives: the caller's (ScratchScope) or the stream's workspace, both in
    // ReduceScratch's layout followed by the summed gradients' area.
    struct ScratchPointers {
        double* partials = nullptr;
        unsigned int* arrivals = nullptr;
        float* result = nullptr;  // a reduction's value when the caller gives no place for it
        unsigned int* sum_arrivals = nullptr;
        double* sum_partials = nullptr;
    };
    ScratchPointers scratch_for(const Plan& p, bool reduces, StreamState& here, Stream stream) const {
        ScratchPointers out;
        const bool sums = p.spec.sums() || p.spec.scatters();
        if (const auto lent = lent_scratch()) {
            const std::size_t reduce_bytes = reduce_scratch_bytes(workspace_slots());
            const std::size_t needed =
                reduce_bytes + (sums ? sum_scratch_bytes(p.grid.sum_arrivals, p.grid.sum_partials) : 0);
            if (lent->bytes < needed)
                throw ScratchTooSmall(fmt::format("this call needs {} bytes of scratch on device {}, but {} were lent",
                                                  needed, device_ordinal, lent->bytes),
                                      needed);
            auto* base = static_cast<unsigned char*>(lent->data);
            if (reduces) {
                const ReduceScratch area(workspace_slots());
                out.partials = area.partials(base);
                out.arrivals = area.arrivals(base);
                out.result = area.result(base);
            }
            if (sums) {
                // Another layout may have left partial sums where this one keeps its counters, so
                // they are cleared on the stream (a memset node when captured).
                unsigned char* area = base + reduce_bytes;
                const std::size_t counters = sum_arrival_doubles(p.grid.sum_arrivals);
                if (counters > 0) LOSSJIT_CU(cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(area), 0, counters * 2, stream));
                out.sum_arrivals = reinterpret_cast<unsigned int*>(area);
                out.sum_partials = reinterpret_cast<double*>(area + sizeof(double) * counters);
            }
            return out;
        }
        if (reduces) {
            here.workspace.ensure(device.context, workspace_slots(), stream);
            out.partials = here.workspace.partials();
            out.arrivals = here.workspace.arrivals();
            out.result = here.workspace.result();
        }
        if (sums) {
            here.workspace.ensure_sums(device.context, p.grid.sum_arrivals, p.grid.sum_partials, stream);
            out.sum_partials = here.workspace.sum_partials();
            out.sum_arrivals = here.workspace.sum_arrivals();
        }
        return out;
    }

    // This call's pointers (each checked once against the device), parameters, scratch and
    // gradient arguments, patched into the plan's argument block.
    ScratchPointers bind(const Launchable& what, StreamState::Binding& binding, const Call& call, Stream stream,
                         StreamState& here, Upstream upstream, const double* factor) {
        const CallViews& views = call.views;
        const ir::Program& prog = *what.program;
        const Plan& p = *binding.args.plan();
        LaunchArgs& args = binding.args;
        const std::span<const TensorView> inputs = views.inputs;
        const std::span<const OutputView> grads = views.grads;
        const bool map_forward = is_map_forward(prog);

        // A host pointer or another device's memory would fault inside the kernel and poison the
        // context; the driver is asked once per new pointer.
        DevicePointers& pointers = binding.pointers;
        pointers.begin(p.slots.size() + grads.size() + 3);
        const auto& names = *what.operands;
        for (std::size_t k = 0; k < p.slots.size(); ++k) {
            const auto& view = inputs[static_cast<std::size_t>(p.slots[k])];
            // Asked about where the kernel may read it: an index of rows of no elements still is.
            pointers.check([&] { return fmt::format("'{}'", names[static_cast<std::size_t>(p.slots[k])]); }, view.data,
                           p.layout.count == 0 && !(p.layout.by_rows && view.numel() > 0));
            args.inputs->set_pointer(k, view.data);
        }
        for (std::size_t g = 0; g < grads.size(); ++g)
            pointers.check([&] { return fmt::format("the gradient {}", g); }, grads[g].data, p.layout.count == 0);
        auto named = [](const char* text) { return [text] { return std::string(text); }; };
        if (map_forward) pointers.check(named("the output"), views.output->data, views.output->numel() == 0);
        if (call.result) pointers.check(named("the result pointer"), call.result->data, false);
        if (upstream.device) pointers.check(named("the upstream gradient"), upstream.device, false);
        for (std::size_t i = 0; i < args.params.size(); ++i) args.params[i] = param_values[i].load();
        if (map_forward) args.output.ptr = views.output->data;

        const ScratchPointers scratch = scratch_for(p, !prog.is_map(), here, stream);
        if (!prog.is_map()) {
            args.reduce.partials = args.rows.partials = scratch.partials;
            args.reduce.arrivals = args.rows.arrivals = scratch.arrivals;
            args.reduce.result = args.rows.result =
                call.result ? call.result->data : static_cast<void*>(scratch.result);
        }
        if (p.spec.sums()) {
            args.sums.arrivals = scratch.sum_arrivals;
            args.sums.partials = scratch.sum_partials;
        }
        const std::size_t g_count = grads.size();
        for (std::size_t g = 0; g < g_count; ++g) args.grads[g] = reinterpret_cast<std::int64_t>(grads[g].data);
        // A scattered gradient's kernel writes its rows into the scratch; the scatter kernels write
        // the gradient (scatter()).
        for (std::size_t g = 0, k = 0; g < g_count && g < p.spec.row_gradients.size(); ++g)
            if (p.spec.row_gradients[g] == RowGradient::Scattered)
                args.grads[g] = reinterpret_cast<std::int64_t>(scattered_rows(p, scratch, k++));
        if (g_count > 0) {
            args.grads[abi::grads_upstream_slot(g_count)] = reinterpret_cast<std::int64_t>(upstream.device);
            args.grads[abi::grads_factor_slot(g_count)] = reinterpret_cast<std::int64_t>(factor);
            for (std::size_t j = 0; j < p.seed_divisors.size(); ++j) {
                const double scale = static_cast<double>(upstream.value) / p.seed_divisors[j];
                std::memcpy(&args.grads[abi::grads_scale_slot(g_count) + j], &scale, sizeof scale);
            }
        }
        // A reduction's last block reads one partial per block from the workspace's slots.
        if (!prog.is_map() && p.grid.blocks > static_cast<unsigned>(workspace_slots()))
            throw InternalError(fmt::format("a reduction planned with {} blocks, more than its {} partial slots",
                                            p.grid.blocks, workspace_slots()));
        return scratch;
    }

    // Where the kernel leaves the rows of the k-th scattered gradient (LaunchGrid::Scatter).
    static double* scattered_rows(const Plan& p, const ScratchPointers& scratch, std::size_t k) {
        return scratch.sum_partials + p.grid.scatter.rows_at + k * p.grid.scatter.row_doubles;
    }

    // After a kernel with scattered gradients: for each, the chunks' sums of its rows into the
    // classes, then their sum in chunk order into the gradient (templates/scatter.cuh), as the
    // plan's grid says.
    static void scatter(const Plan& p, const ScratchPointers& scratch, std::span<const OutputView> grads, Stream stream) {
        LaunchGrid::Scatter s = p.grid.scatter;  // a copy: the launch takes its arguments' addresses
        if (s.classes <= 0) return;  // no class to add into (the gradients, of no elements, are written)
        double* chunk_sums = scratch.sum_partials + s.sums_at;
        for (std::size_t g = 0, k = 0; g < p.spec.row_gradients.size(); ++g) {
            if (p.spec.row_gradients[g] != RowGradient::Scattered) continue;
            void* rows_in = scattered_rows(p, scratch, k++);
            void* grad = grads[g].data;
            int dtype = abi::kernel_dtype_code(grads[g].dtype);
            void* chunk_args[] = {&rows_in, &s.rows, &s.classes, &s.chunk_rows, &chunk_sums};
            LOSSJIT_CU(cuLaunchKernel(p.kernel->scatter_chunks, s.class_blocks, static_cast<unsigned>(s.chunks), 1,
                                      lj::kScatterThreads, 1, 1, 0, stream, chunk_args, nullptr));
            void* finish_args[] = {&chunk_sums, &s.chunks, &s.classes, &grad, &dtype};
            LOSSJIT_CU(cuLaunchKernel(p.kernel->scatter_finish, s.finish_blocks, 1, 1, lj::kScatterThreads, 1, 1, 0,
                                      stream, finish_args, nullptr));
        }
    }

    static void launch(const Plan& p, LaunchArgs& args, Stream stream) {
        LOSSJIT_CU(cuLaunchKernel(p.kernel->function, p.grid.blocks, 1, 1, static_cast<unsigned>(p.spec.block_threads),
                                  1, 1, static_cast<unsigned>(p.spec.dynamic_shared_bytes()), stream, args.data(),
                                  nullptr));
    }

    // A map that reduces along rows is differentiated as sum(U * body) (differentiate()): its
    // upstream gradient U, checked against the map's output shape, becomes that program's last
    // input in the layout's shape (a per-row output's [N, D] as [N, 1, D] where the row is dimension 1).
    TensorView upstream_as_input(const TensorView& upstream, const Layout& value_layout) const {
        const Shape output = program_output_shape(program, value_layout);  // no second layout plan per call
        const Shape shape = keepdim_shape(value_layout);
        // The output's shape, or for one value per row that with the row's dimensions as 1 (an
        // output of that shape is accepted too).
        if (output != value_layout.shape && upstream.shape.to_vector() == shape) return upstream;
        if (upstream.shape.to_vector() != output)
            throw UsageError(fmt::format("the upstream gradient has shape [{}], but the output's shape is [{}]",
                                         fmt::join(upstream.shape, ", "), fmt::join(output, ", ")));
        if (output == value_layout.shape) return upstream;
        TensorView per_row = upstream;
        per_row.shape = Dims(shape);
        per_row.strides = Dims(keepdim_strides(value_layout, upstream.effective_strides().to_vector()));
        return per_row;
    }

    // value_and_grad() and grad(): validates the gradients' views, differentiates once per list of
    // inputs, and runs that list's fused kernel.
    void run_gradients(std::span<const TensorView> inputs, const TensorView* upstream_tensor,
                       std::span<const std::string> wrt, std::span<const OutputView> grads,
                       const OutputView* device_value, Stream stream, Upstream upstream) {
        if (wrt.empty()) throw UsageError("a gradient needs at least one input to differentiate");
        if (grads.size() != wrt.size())
            throw UsageError(fmt::format("{} gradient{} requested but {} output{} given", wrt.size(),
                                         wrt.size() == 1 ? "" : "s", grads.size(), grads.size() == 1 ? "" : "s"));
        const auto known = gradient_memo(inputs, wrt);
        const Layout& value_layout = known->value_layout;
        const GradientProgram& differentiated = *known->differentiated;
        const Launchable& what = differentiated.launchable;

        const Shape& shape = value_layout.shape;
        std::vector<TensorView> with_upstream;
        if (upstream_tensor && differentiates_as_weighted_sum(program)) {
            with_upstream.assign(inputs.begin(), inputs.end());
            with_upstream.push_back(upstream_as_input(*upstream_tensor, value_layout));
            inputs = with_upstream;
            upstream_tensor = nullptr;  // an input of the weighted sum now; its scale is 1
            upstream = Upstream(1.0f);
        }
        if (upstream_tensor && upstream_tensor->shape != shape)
            throw UsageError(fmt::format("the upstream gradient has shape [{}], but the output's shape is [{}]",
                                         fmt::join(upstream_tensor->shape, ", "), fmt::join(shape, ", ")));
        std::vector<int> slots;
        for (const auto& d : what.program->derivatives) slots.push_back(d.input);
        check_gradients(wrt, slots, grads, inputs, shape);
        const OutputView layout_view = OutputView::contiguous(nullptr, shape);
        std::vector<TensorView> operands;
        if (upstream_tensor) {
            operands.assign(inputs.begin(), inputs.end());
            operands.push_back(*upstream_tensor);
            inputs = operands;
        }
        if (!differentiated.factor.program && statistics.empty()) {
            run(what, inputs, &layout_view, device_value, stream, grads, upstream);
            return;
        }
        // Kernels before the gradient kernel: the statistics, then a Composite program's factor (its
        // gradient kernel reads it where it left it, in stream order: no host sync).
        if (differentiated.factor.program && upstream.device)
            throw UnsupportedError("an upstream gradient in device memory is not supported for a program that "
                                   "combines several whole-tensor reductions");
        const Call call = validate(what, inputs, &layout_view, device_value, grads);
        Launched held = hold(stream);
        const BetweenKernels area = between_kernels(*held.stream, stream);
        const double* values = run_statistics(held, inputs, area.statistics, stream);
        const double* factor = nullptr;
        if (differentiated.factor.program) {
            const auto factors = static_cast<std::int64_t>(differentiated.factor.program->result_count());
            const OutputView factor_view = OutputView::contiguous(area.factor, Dims{factors}, DType::float64);
            launch_held(held, differentiated.factor, validate(differentiated.factor, inputs, nullptr, &factor_view, {}),
                        stream, {}, {}, nullptr, values);
            factor = area.factor;
        }
        launch_held(held, what, call, stream, grads, upstream, factor, values);
    }
};

Loss::Loss(std::shared_ptr<const Compiled> compiled, int device)
    : state_(std::make_unique<State>(std::move(compiled), device)) {}

Loss::Loss(const Loss& other) : Loss(other.state_->compiled, other.state_->device_ordinal) {
    for (std::size_t i = 0; i < state_->param_values.size(); ++i)
        state_->param_values[i] = other.state_->param_values[i].load();
}

Loss Loss::on_device(int device) const {
    if (device < 0) throw UsageError(fmt::format("device {} is not a CUDA device ordinal", device));
    Loss copy(state_->compiled, device);
    for (std::size_t i = 0; i < copy.state_->param_values.size(); ++i)
        copy.state_->param_values[i] = state_->param_values[i].load();
    return copy;
}

int Loss::device() const { return state_->device_ordinal; }

std::size_t Loss::scratch_bytes() {
    state_->ensure_device();
    return reduce_scratch_bytes(state_->workspace_slots());
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
    named_gpu_facts(options.gpu);  // an unknown name is refused here, not at the first emit
    auto compiled = std::make_shared<Loss::Compiled>();

    util::Stopwatch watch;
    compiled->syntax = parse(source, options.source_name);
    compiled->parse_ms = watch.lap_ms();

    CheckOptions check_options;
    check_options.inputs = options.inputs;
    for (const auto& p : options.params) check_options.params.push_back({p.name, p.value});
    compiled->program = check(compiled->syntax, check_options);
    compiled->check_ms = watch.lap_ms();

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
    const int device = options.device;
    if (device < 0) throw UsageError(fmt::format("device {} is not a CUDA device ordinal", device));
    compiled->options = std::move(options);
    return Loss(std::move(compiled), device);
}

const ir::Program& Loss::checked_program() const { return state_->program; }
const Options& Loss::options() const { return state_->options; }

Loss Loss::from_program(ir::Program program, Options options) {
    auto compiled = std::make_shared<Loss::Compiled>();
    compiled->program = std::move(program);
    compiled->inputs_and_upstream = compiled->program.inputs;
    compiled->inputs_and_upstream.push_back("upstream");
    const int device = options.device;
    compiled->options = std::move(options);
    return Loss(std::move(compiled), device);
}

std::vector<std::string> Loss::results() const {
    std::vector<std::string> out;
    for (const auto& r : state_->program.results) out.push_back(r.name);
    return out;
}
std::size_t Loss::result_count() const { return state_->program.result_count(); }

bool Loss::result_differentiable(std::size_t index) const {
    const ir::Program& program = state_->program;
    if (index >= program.result_count())
        throw UsageError(fmt::format("the program has {} result{}, not {}", program.result_count(),
                                     program.result_count() == 1 ? "" : "s", index + 1));
    // The result as the body of a program of its own, differentiated with respect to every input but
    // the indices: differentiable unless every derivative is the constant 0 (no path passes a gradient).
    ir::Program alone = program;
    alone.body = program.result_nodes()[index];
    alone.results.clear();
    std::vector<int> slots;
    const auto index_inputs = program.index_inputs();
    for (std::size_t k = 0; k < program.inputs.size(); ++k)
        if (!index_inputs[k]) slots.push_back(static_cast<int>(k));
    try {
        const ir::Program differentiated = differentiate(alone, slots, {});
        for (const auto& d : differentiated.derivatives) {
            const ir::Node& n = differentiated.node(d.node);
            if (n.kind != ir::NodeKind::Constant || n.value != 0.0) return true;
        }
        return false;
    } catch (const UnsupportedError&) {
        return true;  // a gradient it refuses (through a statistic) still reaches an input
    }
}

Kind Loss::kind() const { return state_->program.is_map() ? Kind::Map : Kind::Reduction; }

std::string_view Loss::reduction() const {
    return state_->program.is_map() ? std::string_view() : ir::to_string(state_->program.reduction);
}

const std::vector<std::string>& Loss::inputs() const { return state_->program.inputs; }

std::vector<Param> Loss::params() const {
    std::vector<Param> out;
    const std::vector<double> values = state_->params_now();
    for (std::size_t i = 0; i < values.size(); ++i) out.push_back({state_->program.params[i].name, values[i]});
    return out;
}

void Loss::set_param(std::string_view name, double value) {
    for (std::size_t i = 0; i < state_->param_values.size(); ++i) {
        if (state_->program.params[i].name == name) {
            state_->param_values[i] = value;
            return;
        }
    }
    std::vector<std::string> names;
    for (std::size_t i = 0; i < state_->param_values.size(); ++i) names.push_back(state_->program.params[i].name);
    throw UsageError(fmt::format("the program has no parameter '{}' (its parameters: {})", printable(name),
                                 names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
}

bool Loss::uses(std::string_view name) const {
    auto reads = [&](const ir::Program& program) {
        for (const auto& n : program.nodes) {
            if (n.kind == ir::NodeKind::Input && program.inputs[static_cast<std::size_t>(n.slot)] == name) return true;
            const auto slot = static_cast<std::size_t>(n.slot);
            if (n.kind == ir::NodeKind::Param && program.params[slot].statistic < 0 && program.params[slot].name == name)
                return true;
        }
        return false;
    };
    const auto& program = state_->program;
    return reads(program) || std::any_of(program.statistics.begin(), program.statistics.end(),
                                         [&](const auto& statistic) { return reads(*statistic); });
}

DType Loss::output_dtype(std::span<const TensorView> inputs) const {
    check_count(state_->program.inputs, inputs.size());
    return default_output_dtype(state_->program, inputs);
}

Shape Loss::output_shape(std::span<const TensorView> inputs) const {
    return program_output_shape(state_->program, operand_shapes(state_->program.inputs, inputs));
}

float Loss::operator()(std::span<const TensorView> inputs, Stream stream) { return values(inputs, stream).front(); }

std::vector<float> Loss::values(std::span<const TensorView> inputs, Stream stream) {
    if (kind() != Kind::Reduction) throw UsageError("this program is an elementwise map: call map() with an output");
    std::vector<float> out(state_->program.result_count());
    {
        // The copy is queued under the stream's lock: a later call on this stream is queued after
        // it, so it cannot overwrite the result first. The wait is not.
        State::Launched launched = state_->run(inputs, nullptr, nullptr, stream);
        cuda::ScopedContext scope(*state_->device.context);
        LOSSJIT_CU(cuMemcpyDtoHAsync(out.data(), reinterpret_cast<CUdeviceptr>(launched.stream->workspace.result()),
                                     sizeof(float) * out.size(), stream));
    }
    cuda::ScopedContext scope(*state_->device.context);
    LOSSJIT_CU(cuStreamSynchronize(stream));
    return out;
}

void Loss::evaluate(std::span<const TensorView> inputs, float* device_result, Stream stream) {
    if (!device_result) throw UsageError("evaluate() needs a device pointer for the result");
    evaluate(inputs, result_view(device_result, state_->program), stream);
}

void Loss::evaluate(std::span<const TensorView> inputs, const OutputView& device_result, Stream stream) {
    if (kind() != Kind::Reduction) throw UsageError("this program is an elementwise map: call map() with an output");
    if (!device_result.data) throw UsageError("evaluate() needs a device pointer for the result");
    state_->run(inputs, nullptr, &device_result, stream);
}

void Loss::map(std::span<const TensorView> inputs, const OutputView& output, Stream stream) {
    if (kind() != Kind::Map)
        throw UsageError(fmt::format("this program is a {} reduction: call it for a value, not map()", reduction()));
    state_->run(inputs, &output, nullptr, stream);
}

void Loss::value_and_grad(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                          std::span<const OutputView> grads, float* device_value, Stream stream, Upstream upstream) {
    const OutputView value = device_value ? result_view(device_value, state_->program) : OutputView{};
    if (kind() != Kind::Reduction)
        throw UsageError("this program is an elementwise map: call grad() with an upstream gradient tensor");
    state_->run_gradients(inputs, nullptr, wrt, grads, device_value ? &value : nullptr, stream, upstream);
}

void Loss::value_and_grad(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                          std::span<const OutputView> grads, const OutputView& device_value, Stream stream,
                          Upstream upstream) {
    if (kind() != Kind::Reduction)
        throw UsageError("this program is an elementwise map: call grad() with an upstream gradient tensor");
    if (!device_value.data) throw UsageError("value_and_grad() needs a device pointer for the value");
    state_->run_gradients(inputs, nullptr, wrt, grads, &device_value, stream, upstream);
}

void Loss::grad(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                std::span<const OutputView> grads, Stream stream, Upstream upstream) {
    if (kind() != Kind::Reduction)
        throw UsageError("this program is an elementwise map: its gradient needs an upstream tensor of the output's shape");
    state_->run_gradients(inputs, nullptr, wrt, grads, nullptr, stream, upstream);
}

std::vector<DeviceGradient> Loss::grad(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                                       Stream stream, Upstream upstream) {
    if (kind() != Kind::Reduction)
        throw UsageError("this program is an elementwise map: its gradient needs an upstream tensor of the output's shape");
    const auto slots = gradient_slots(state_->program, wrt);  // unknown names fail before any allocation
    check_count(state_->program.inputs, inputs.size());
    std::vector<DeviceGradient> out;
    std::vector<OutputView> views;
    for (std::size_t k = 0; k < slots.size(); ++k) {
        const TensorView& input = inputs[static_cast<std::size_t>(slots[k])];
        check_differentiable(wrt[k], input.dtype);
        const Shape shape = input.shape.to_vector();
        const auto count = static_cast<std::size_t>(std::max<std::int64_t>(element_count(shape), 1));
        out.push_back({wrt[k], shape, input.dtype, DeviceBuffer(count * size_of(input.dtype), state_->device_ordinal)});
        views.push_back(out.back().view());
    }
    grad(inputs, wrt, views, stream, upstream);
    return out;
}

void Loss::grad(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                std::span<const OutputView> grads, const TensorView& upstream, Stream stream) {
    if (kind() != Kind::Map)
        throw UsageError("this program is a reduction: its upstream gradient is a number, not a tensor");
    state_->run_gradients(inputs, &upstream, wrt, grads, nullptr, stream, {});
}

double Loss::reference(std::span<const TensorView> host_inputs) const { return reference_values(host_inputs).front(); }

std::vector<double> Loss::reference_values(std::span<const TensorView> host_inputs) const {
    if (kind() != Kind::Reduction) throw UsageError("this program is an elementwise map: use reference_map()");
    check_views(state_->program.inputs, host_inputs);
    check_indices(state_->program, host_inputs);
    const Layout layout = state_->layout_for(state_->program, host_inputs, nullptr);
    const auto statistics = state_->reference_statistics(host_inputs);
    return reference_results(state_->program, layout, host_operands(host_inputs),
                             parameter_values(state_->program, state_->params_now(), statistics));
}

void Loss::reference_map(std::span<const TensorView> host_inputs, const OutputView& host_output) const {
    if (kind() != Kind::Map) throw UsageError("this program is a reduction: use reference()");
    check_views(state_->program.inputs, host_inputs);
    check_indices(state_->program, host_inputs);
    check_data("output", host_output.dtype, host_output.data, host_output.numel(), true);
    const Layout layout = state_->layout_for(state_->program, host_inputs, &host_output);
    const auto statistics = state_->reference_statistics(host_inputs);
    lossjit::reference_map(state_->program, layout, host_operands(host_inputs),
                           parameter_values(state_->program, state_->params_now(), statistics),
                           {host_output.data, host_output.dtype});
}

std::vector<ReferenceGradient> Loss::State::gradients_on_cpu(std::span<const TensorView> host_inputs,
                                                             std::span<const std::string> wrt, double upstream,
                                                             const TensorView* host_upstream) const {
    // Nothing asked, nothing computed (a map's upstream would otherwise be one input too many).
    if (wrt.empty()) return {};
    const auto slots = gradient_slots(program, wrt);
    for (std::size_t k = 0; k < slots.size(); ++k) {
        const TensorView& input = host_inputs[static_cast<std::size_t>(slots[k])];
        check_differentiable(wrt[k], input.dtype);
    }
    const Layout value_layout = plan_program_layout(program, operand_shapes(program.inputs, host_inputs), nullptr);
    const ir::Program differentiated = differentiate(program, slots, per_row_inputs(program, value_layout), k_inputs(value_layout));
    std::vector<TensorView> with_upstream;
    if (host_upstream && differentiates_as_weighted_sum(program)) {
        check_data("upstream", host_upstream->dtype, host_upstream->data, host_upstream->numel());
        with_upstream.assign(host_inputs.begin(), host_inputs.end());
        with_upstream.push_back(upstream_as_input(*host_upstream, value_layout));
        host_inputs = with_upstream;
        host_upstream = nullptr;  // an input of the weighted sum now; its scale is 1
        upstream = 1.0;
    }
    std::optional<OperandShape> up;
    if (host_upstream) {
        check_data("upstream", host_upstream->dtype, host_upstream->data, host_upstream->numel());
        up = OperandShape{"upstream", host_upstream->shape.to_vector(), host_upstream->strides.to_vector()};
    }
    GradientLayout layout;
    if (differentiated.by_rows()) {  // read row by row, each gradient added into its input's own shape
        layout = plan_row_gradient_layout(differentiated, operand_shapes(differentiated.inputs, host_inputs));
    } else {
        layout = plan_gradient_layout(operand_shapes(differentiated.inputs, host_inputs), up ? &*up : nullptr);
    }
    std::vector<HostOperand> data = host_operands(host_inputs);
    if (host_upstream) data.push_back({host_upstream->data, host_upstream->dtype});
    const auto statistics = reference_statistics(host_inputs);
    std::vector<double> factors;  // d body / d each reduction differentiated
    if (const auto& factor = differentiated.gradient_factor) {
        const Layout factor_layout = plan_program_layout(*factor, operand_shapes(factor->inputs, host_inputs), nullptr);
        factors = reference_results(*factor, factor_layout, data, parameter_values(*factor, params_now(), statistics));
    }
    auto values = reference_gradients(differentiated, layout, data, parameter_values(differentiated, params_now(), statistics),
                                      upstream, factors);
    std::vector<ReferenceGradient> out;
    for (std::size_t k = 0; k < values.size(); ++k) {
        const auto slot = static_cast<std::size_t>(differentiated.derivatives[k].input);
        out.push_back({differentiated.inputs[slot], host_inputs[slot].shape.to_vector(), std::move(values[k])});
    }
    return out;
}

std::vector<ReferenceGradient> Loss::reference_grad(std::span<const TensorView> host_inputs,
                                                    std::span<const std::string> wrt, double upstream) const {
    if (kind() != Kind::Reduction)
        throw UsageError("this program is an elementwise map: its gradient needs an upstream tensor of the output's shape");
    check_views(state_->program.inputs, host_inputs);
    check_indices(state_->program, host_inputs);
    return state_->gradients_on_cpu(host_inputs, wrt, upstream, nullptr);
}

std::vector<ReferenceGradient> Loss::reference_grad(std::span<const TensorView> host_inputs,
                                                    std::span<const std::string> wrt,
                                                    const TensorView& host_upstream) const {
    if (kind() != Kind::Map)
        throw UsageError("this program is a reduction: its upstream gradient is a number, not a tensor");
    check_views(state_->program.inputs, host_inputs);
    check_indices(state_->program, host_inputs);
    return state_->gradients_on_cpu(host_inputs, wrt, 0.0, &host_upstream);
}

std::string Loss::derivatives(std::span<const std::string> wrt) const {
    // As for inputs that all have the broadcast shape: only indices hold one value per row.
    return dump_gradients(differentiate(state_->program, gradient_slots(state_->program, wrt), {}));
}

std::string Loss::derivatives(std::span<const std::string> wrt, std::span<const TensorView> inputs) const {
    const auto slots = gradient_slots(state_->program, wrt);
    check_count(state_->program.inputs, inputs.size());
    for (std::size_t k = 0; k < slots.size(); ++k) check_differentiable(wrt[k], inputs[static_cast<std::size_t>(slots[k])].dtype);
    const Layout layout = state_->layout_for(state_->program, inputs, nullptr);
    return dump_gradients(differentiate(state_->program, slots, per_row_inputs(state_->program, layout), k_inputs(layout)));
}

std::string Loss::ast() const { return dump_ast(state_->compiled->syntax); }
std::string Loss::checked() const { return dump_checked(state_->program); }

Loss::State::Emitted Loss::State::emit_for(std::span<const TensorView> inputs) const {
    // A map's output is taken to be contiguous, as the CLI allocates it.
    std::optional<OutputView> output;
    if (program.is_map()) {
        const Shape shape = program_output_shape(program, operand_shapes(program.inputs, inputs));
        output = OutputView::contiguous(nullptr, shape, default_output_dtype(program, inputs));
    }
    const OutputView* out = output ? &*output : nullptr;
    const Layout layout = layout_for(program, inputs, out);
    const KernelSpec spec = spec_for(program, layout, CallViews{inputs, out, DType::float32, {}}, true);
    return {emit_cuda(program, spec), spec.fast_math};
}

std::string Loss::cuda_source(std::span<const TensorView> inputs) const { return state_->emit_for(inputs).source; }

Loss::State::Emitted Loss::State::emit_statistic_for(std::size_t index, std::span<const TensorView> inputs) const {
    return emit_statistic_like(*program.statistics.at(index), inputs);
}

Loss::State::Emitted Loss::State::emit_statistic_like(const ir::Program& kernel, std::span<const TensorView> inputs) const {
    const auto views = inputs.first(std::min(inputs.size(), kernel.inputs.size()));
    const Layout layout = layout_for(kernel, views, nullptr);
    const KernelSpec spec = spec_for(kernel, layout, CallViews{views, nullptr, DType::float64, {}}, false);
    return {emit_cuda(kernel, spec), spec.fast_math};
}

namespace {

// The views a tool compiles for: the caller's, or where it gives none, inputs that all share one
// large contiguous shape (the variant for large, aligned, contiguous inputs). Not copied: `views`
// may point into `defaults`.
struct ShapesOrDefaults {
    std::vector<TensorView> defaults;
    std::span<const TensorView> views;
    ShapesOrDefaults(const ShapesOrDefaults&) = delete;
    ShapesOrDefaults& operator=(const ShapesOrDefaults&) = delete;
    ShapesOrDefaults(std::span<const TensorView> inputs, std::size_t count) {
        if (inputs.empty() && count > 0) {
            defaults.assign(count, TensorView::contiguous(nullptr, {1 << 24}));
            views = defaults;
        } else {
            views = inputs;
        }
    }
};

}  // namespace

std::vector<std::string> Loss::statistic_sources(std::span<const TensorView> inputs) const {
    const ShapesOrDefaults given(inputs, state_->program.inputs.size());
    const auto shapes = given.views;
    check_count(state_->program.inputs, shapes.size());
    std::vector<std::string> sources;
    for (std::size_t i = 0; i < state_->program.statistics.size(); ++i) sources.push_back(state_->emit_statistic_for(i, shapes).source);
    return sources;
}

std::vector<KernelBuild> Loss::compile_statistics(std::span<const TensorView> inputs, const std::string& target) const {
    const ShapesOrDefaults given(inputs, state_->program.inputs.size());
    const auto shapes = given.views;
    check_count(state_->program.inputs, shapes.size());
    std::vector<KernelBuild> builds;
    for (std::size_t i = 0; i < state_->program.statistics.size(); ++i)
        builds.push_back(state_->build_kernel(state_->emit_statistic_for(i, shapes), target));
    return builds;
}

Loss::State::Differentiated Loss::State::differentiated_for(std::span<const TensorView> inputs,
                                                           std::span<const std::string> wrt) const {
    const auto slots = gradient_slots(program, wrt);
    check_count(program.inputs, inputs.size());
    for (std::size_t k = 0; k < slots.size(); ++k) check_differentiable(wrt[k], inputs[static_cast<std::size_t>(slots[k])].dtype);
    Layout value_layout = plan_program_layout(program, operand_shapes(program.inputs, inputs), nullptr);
    ir::Program differentiated = differentiate(program, slots, per_row_inputs(program, value_layout), k_inputs(value_layout));
    return {std::move(differentiated), std::move(value_layout)};
}

Loss::State::Emitted Loss::State::emit_gradient_for(std::span<const TensorView> inputs,
                                                    std::span<const std::string> wrt) const {
    const auto [differentiated, value_layout] = differentiated_for(inputs, wrt);
    // The gradients' shared layout: the whole broadcast shape (even where the body is one per row).
    const Shape& shape = value_layout.shape;
    const OutputView gradients = OutputView::contiguous(nullptr, shape);
    std::vector<TensorView> operands(inputs.begin(), inputs.end());
    if (differentiated.is_map()) {  // the upstream gradient, in the output's dtype as torch passes it
        operands.push_back(TensorView::contiguous(nullptr, shape, default_output_dtype(program, inputs)));
    } else if (differentiates_as_weighted_sum(program)) {  // the same, as the weighted sum's last input
        const TensorView upstream = TensorView::contiguous(nullptr, program_output_shape(program, value_layout),
                                                           default_output_dtype(program, inputs));
        operands.push_back(upstream_as_input(upstream, value_layout));
    }
    const Layout layout = layout_for(differentiated, operands, &gradients);
    const KernelSpec spec = spec_for(differentiated, layout, CallViews{operands, &gradients, DType::float32, {}}, false);
    return {emit_cuda(differentiated, spec), spec.fast_math};
}

std::string Loss::cuda_source(std::span<const TensorView> inputs, std::span<const std::string> wrt) const {
    if (wrt.empty()) return cuda_source(inputs);
    return state_->emit_gradient_for(inputs, wrt).source;
}

std::optional<Loss::State::Emitted> Loss::State::emit_factor_for(std::span<const TensorView> inputs,
                                                                  std::span<const std::string> wrt) const {
    if (wrt.empty()) return std::nullopt;
    const auto factor = differentiated_for(inputs, wrt).program.gradient_factor;
    if (!factor) return std::nullopt;
    return emit_statistic_like(*factor, inputs);
}

std::optional<std::string> Loss::factor_source(std::span<const TensorView> inputs, std::span<const std::string> wrt) const {
    const ShapesOrDefaults given(inputs, state_->program.inputs.size());
    const auto emitted = state_->emit_factor_for(given.views, wrt);
    return emitted ? std::optional<std::string>(emitted->source) : std::nullopt;
}

std::optional<KernelBuild> Loss::compile_factor(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                                                const std::string& target) const {
    const ShapesOrDefaults given(inputs, state_->program.inputs.size());
    const auto emitted = state_->emit_factor_for(given.views, wrt);
    return emitted ? std::optional<KernelBuild>(state_->build_kernel(*emitted, target)) : std::nullopt;
}

std::string Loss::cuda_source() const { return cuda_source(ShapesOrDefaults({}, state_->program.inputs.size()).defaults); }

KernelBuild Loss::compile_kernel(std::span<const TensorView> inputs, const std::string& target) const {
    return compile_kernel(inputs, {}, target);
}

KernelBuild Loss::compile_kernel(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                                 const std::string& target) const {
    const ShapesOrDefaults given(inputs, state_->program.inputs.size());
    const auto shapes = given.views;
    return state_->build_kernel(wrt.empty() ? state_->emit_for(shapes) : state_->emit_gradient_for(shapes, wrt), target);
}

std::string Loss::ptx(std::span<const TensorView> inputs, const std::string& arch) const {
    std::string target = normalize_target(arch);
    require_target_of(state_->options.gpu, target);
    if (target.rfind("sm_", 0) == 0) target = "compute_" + target.substr(3);
    const State::Emitted emitted = state_->emit_for(ShapesOrDefaults(inputs, state_->program.inputs.size()).views);
    return KernelCache::process().get(emitted.source, target, emitted.fast_math).image->data;
}

Timings Loss::timings() const {
    std::lock_guard lock(state_->mutex);
    return state_->timings;
}

std::optional<KernelInfo> Loss::kernel_info() const {
    // The most recent launch is the one with the highest number, on whichever stream it was.
    StreamState* latest = nullptr;
    {
        std::shared_lock lock(state_->streams_mutex);
        std::uint64_t newest = 0;
        for (const auto& [stream, state] : state_->streams) {
            const std::uint64_t call = state->last_call.load();
            if (call > newest) newest = call, latest = state.get();
        }
    }
    if (!latest) return std::nullopt;
    std::shared_ptr<const Plan> plan;
    {
        std::lock_guard lock(latest->mutex);
        plan = latest->last;
    }
    if (!plan || !plan->kernel) return std::nullopt;
    const DeviceFacts& device = state_->device;  // open: there was a launch
    KernelInfo info = plan->kernel->info;
    info.knobs.max_blocks_per_sm = plan->max_blocks_per_sm;
    info.grid = plan->grid.blocks;
    const Occupancy occupancy{info.resident_blocks_per_sm, plan->max_blocks_per_sm, device.multiprocessors};
    // The launch puts at most this many blocks on one SM at once (fewer when the grid is small).
    info.blocks_per_sm = occupancy.blocks_per_sm(plan->grid.blocks);
    info.occupancy = occupancy.fraction(plan->grid.blocks, info.knobs.block_threads, device.max_threads_per_sm);
    info.tuned = plan->tuned;
    info.notes = plan->spec.notes;
    return info;
}

}  // namespace lossjit
