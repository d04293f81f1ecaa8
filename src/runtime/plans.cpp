// plans: making and finding a layout's plan, and the per-stream workspace and arguments (plans.hpp).
#include "runtime/plans.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "runtime/scratch.hpp"
#include "tuning/knobs.hpp"
#include "tuning/store.hpp"

namespace lossjit {
namespace {

// Bit k: input k allows vector accesses of `width` elements of its dtype; bits 48 and up: gradient g;
// bit 63: a map's output. (More than 48 inputs or 15 gradients share bits: a plan is then reused only
// for the same alignment of the first ones, which is still right: choose() decides from the views
// themselves.) A plan matches a call only where these agree for widths 4 and 8.
std::uint64_t alignment_of(const CallViews& views, int width) {
    auto aligned = [width](const void* data, DType dtype) {
        return reinterpret_cast<std::uintptr_t>(data) % vector_alignment(dtype, width) == 0;
    };
    std::uint64_t bits = 0;
    for (std::size_t k = 0; k < views.inputs.size(); ++k)
        if (aligned(views.inputs[k].data, views.inputs[k].dtype)) bits |= std::uint64_t{1} << (k % 48);
    for (std::size_t g = 0; g < views.grads.size(); ++g)
        if (aligned(views.grads[g].data, views.grads[g].dtype)) bits |= std::uint64_t{1} << (48 + g % 15);
    if (views.output && aligned(views.output->data, views.output->dtype)) bits |= std::uint64_t{1} << 63;
    return bits;
}

// Plan::dtypes, in its order.
std::size_t dtype_count(const CallViews& views) { return views.inputs.size() + 1 + views.grads.size(); }
DType dtype_at(const CallViews& views, std::size_t i) {
    if (i < views.inputs.size()) return views.inputs[i].dtype;
    if (i == views.inputs.size()) return views.output && views.grads.empty() ? views.output->dtype : views.result;
    return views.grads[i - views.inputs.size() - 1].dtype;
}

}  // namespace

KernelOperands kernel_operands(const ir::Program& program, const Layout& layout, const CallViews& views) {
    KernelOperands ops;
    for (const auto& v : views.inputs) {
        ops.input_data.push_back(v.data);
        ops.input_dtypes.push_back(v.dtype);
    }
    const bool map_forward = program.is_map() && program.derivatives.empty();
    if (map_forward && views.output) {
        ops.written_data.push_back(views.output->data);
        ops.written_dtypes.push_back(views.output->dtype);
        ops.result_dtype = views.output->dtype;
    } else {
        ops.result_dtype = views.result;
    }
    for (std::size_t g = 0; g < program.derivatives.size(); ++g) {
        if (g < views.grads.size()) {
            const OutputView& grad = views.grads[g];
            ops.grad_dtypes.push_back(grad.dtype);
            if (grad.numel() == layout.count) {  // stored where each element lives, with vector stores
                ops.written_data.push_back(grad.data);
                ops.written_dtypes.push_back(grad.dtype);
            }
        } else {  // emitting code only: the gradient of a floating input in its own dtype
            const DType d = views.inputs[static_cast<std::size_t>(program.derivatives[g].input)].dtype;
            ops.grad_dtypes.push_back(is_floating(d) ? d : DType::float32);
        }
    }
    return ops;
}

Variant choose_variant(const Options& options, const ir::Program& program, bool tunable, const Layout& layout,
                       const CallViews& views, std::string device, const GpuFacts& gpu) {
    Variant v;
    Knobs knobs = options.knobs;
    const bool automatic = knobs.block_threads == 0 || (knobs.unroll == 0 && knobs.items_per_thread == 0) ||
                           knobs.vector_width == 0 || knobs.max_blocks_per_sm == 0 || knobs.max_registers == 0 ||
                           knobs.accumulator == Accumulator::Auto || !knobs.fast_math || !knobs.row_cache ||
                           knobs.row_cluster == 0 || !knobs.row_prefetch;
    TuningStore* store = options.use_tuning && automatic && tunable ? TuningStore::process() : nullptr;
    if (store) {
        TuningKey key{tuning_program_text(program), tuning_shape_text(program.inputs, views.inputs, views.output),
                      tuning_dtype_text(views.inputs, views.output, default_output_dtype(program, views.inputs)), ""};
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
    v.spec = KernelSpec::choose(program, layout, kernel_operands(program, layout, views), knobs, !v.tuned.empty(), gpu);
    v.max_blocks_per_sm = knobs.max_blocks_per_sm;
    return v;
}

bool Plan::matches(const CallViews& views) const {
    const auto& inputs = views.inputs;
    if (!this->inputs.matches(inputs) || (views.output != nullptr) != has_output) return false;
    if (views.output && (views.output->shape != output_shape || views.output->strides != output_strides)) return false;
    if (dtype_count(views) != dtypes.size()) return false;
    for (std::size_t i = 0; i < dtypes.size(); ++i)
        if (dtype_at(views, i) != dtypes[i]) return false;
    return alignment_of(views, 4) == alignment && alignment_of(views, 8) == alignment8;
}

std::shared_ptr<const Plan> make_plan(const Launchable& launchable, const Options& options, const CallViews& views,
                                      const DeviceFacts& device, KernelMap& kernels, Timings& timings) {
    const ir::Program& program = *launchable.program;
    const auto& inputs = views.inputs;
    const OutputView* output = views.output;
    auto plan = std::make_shared<Plan>();
    const auto shapes = operand_shapes(*launchable.operands, inputs);
    if (output) {
        const OperandShape out{"output", output->shape.to_vector(), output->strides.to_vector()};
        plan->layout = plan_program_layout(program, shapes, &out);
    } else {
        plan->layout = plan_program_layout(program, shapes, nullptr);
    }
    Variant chosen = choose_variant(options, program, launchable.label.empty(), plan->layout, views, device.tuning_text, device.gpu);
    plan->spec = std::move(chosen.spec);
    plan->max_blocks_per_sm = chosen.max_blocks_per_sm;
    plan->tuned = chosen.tuned;
    timings.tuned = chosen.tuned;
    if (!chosen.warning.empty()) timings.tuning_warning = chosen.warning;
    plan->kernel = &kernels.get(program, plan->spec, launchable.label, device, timings);
    plan->slots = read_inputs(program);
    if (program.is_map() && !program.derivatives.empty())
        plan->slots.push_back(static_cast<int>(program.inputs.size()));  // the upstream gradient

    const Occupancy occupancy{plan->kernel->info.resident_blocks_per_sm, plan->max_blocks_per_sm,
                              device.multiprocessors};
    plan->grid = plan_grid(program, plan->spec, plan->layout, occupancy);
    if (program.by_rows()) {
        const std::vector<double> divisors = total_divisors(program, plan->layout);
        for (double d : divisors) plan->scales.push_back(1.0 / d);
        // The divisor of each reduction differentiated also scales its gradients (run: upstream / divisor).
        if (!program.derivatives.empty())
            for (int k : program.gradient_totals) plan->seed_divisors.push_back(divisors.at(static_cast<std::size_t>(k)));
    } else {
        plan->divisor = program.is_map() ? 1.0 : reduction_divisor(program, plan->layout.shape);
        if (!program.derivatives.empty()) plan->seed_divisors = {plan->divisor};
    }
    if (!program.derivatives.empty() && plan->seed_divisors.empty()) plan->seed_divisors = {1.0};  // a map's backward
    if (plan->seed_divisors.size() > static_cast<std::size_t>(kMaxTotals))
        throw InternalError("more reductions differentiated than the kernel ABI holds");
    plan->params = program.caller_params();
    plan->derivatives = program.derivatives.size();
    plan->map_forward = program.is_map() && program.derivatives.empty();
    plan->parameters = kernel_parameters(program, plan->spec);

    plan->inputs = ViewShapes(inputs);
    if (output) {
        plan->output_shape = output->shape;
        plan->output_strides = output->strides;
    }
    for (std::size_t i = 0; i < dtype_count(views); ++i) plan->dtypes.push_back(dtype_at(views, i));
    plan->alignment = alignment_of(views, 4);
    plan->alignment8 = alignment_of(views, 8);
    plan->has_output = output != nullptr;
    return plan;
}

std::shared_ptr<const Plan> PlanCache::find(const CallViews& views) const {
    for (auto it = recent_.rbegin(); it != recent_.rend(); ++it)
        if ((*it)->matches(views)) return *it;
    return nullptr;
}

void PlanCache::add(std::shared_ptr<const Plan> plan) {
    if (recent_.size() == kPlans) recent_.erase(recent_.begin());
    recent_.push_back(std::move(plan));
}

void Workspace::ensure(const std::shared_ptr<cuda::Context>& context, int slots, Stream stream) {
    if (memory_) return;
    refuse_if_capturing(stream, "allocate its scratch memory");  // cuMemAlloc is not allowed during capture
    slots_ = static_cast<std::size_t>(slots);
    const std::size_t bytes = layout().bytes();
    memory_ = std::make_unique<cuda::Memory>(context, bytes);
    LOSSJIT_CU(cuMemsetD32Async(memory_->get(), 0, bytes / 4, stream));
}

void Workspace::ensure_sums(const std::shared_ptr<cuda::Context>& context, std::size_t arrivals,
                            std::size_t partials, Stream stream) {
    if (sum_arrivals_ >= arrivals && sum_partials_ >= partials) return;
    refuse_if_capturing(stream, "allocate the scratch of its summed gradients");
    // Earlier kernels on this stream may still use the smaller buffer: let them finish, free it,
    // then allocate the larger one.
    if (sums_) LOSSJIT_CU(cuStreamSynchronize(stream));
    sums_.reset();
    arrivals = std::max(sum_arrivals_, arrivals);
    partials = std::max(sum_partials_, partials);
    const std::size_t bytes = sum_scratch_bytes(arrivals, partials);
    sum_arrivals_ = sum_partials_ = 0;
    sums_ = std::make_unique<cuda::Memory>(context, bytes);
    sum_arrivals_ = arrivals;
    sum_partials_ = partials;
    LOSSJIT_CU(cuMemsetD32Async(sums_->get(), 0, bytes / 4, stream));
}

void LaunchArgs::bind(std::shared_ptr<const Plan> plan) {
    plan_ = std::move(plan);
    const Plan& p = *plan_;
    const auto& dims = p.layout.dims;
    extents_ = {};
    extents_.count = p.layout.count;
    std::copy(dims.begin(), dims.end(), extents_.dims);
    // Rows of two strides (KernelSpec::row_split): the segments' length and each operand's stride
    // between them one past the last dimension, where lj::split_column reads them.
    const bool split = p.layout.row_inner > 0;
    // Takes of K indices per row (a row of one run): K one past the last dimension too, and there each
    // input of K values per row has its stride from one to the next (kinds/by_rows.cpp).
    const bool k_values = p.layout.k_columns > 0;
    if ((split || k_values) && dims.size() >= static_cast<std::size_t>(lj::kMaxRank))
        throw InternalError("a row layout planned with no dimension left for its segments or its K");
    auto with_split = [&](const OperandAccess& access) {
        std::array<std::int64_t, kMaxRank> strides = access.strides;
        if (split) strides[dims.size()] = access.row_outer_stride;
        if (access.per_k) strides[dims.size()] = access.k_stride;
        return strides;
    };
    if (split) extents_.dims[dims.size()] = p.layout.row_inner;
    if (k_values) extents_.dims[dims.size()] = p.layout.k_columns;
    inputs = std::make_unique<abi::Inputs>(p.slots.size());
    for (std::size_t k = 0; k < p.slots.size(); ++k)
        inputs->set_strides(k, with_split(p.layout.inputs[static_cast<std::size_t>(p.slots[k])]).data());
    output = {};
    const auto output_strides = with_split(p.layout.output);
    std::copy(output_strides.begin(), output_strides.end(), output.strides);
    reduce = {};
    reduce.scale = 1.0 / p.divisor;
    rows = {};
    std::copy(p.scales.begin(), p.scales.end(), rows.scale);
    params.assign(p.params, 0.0);
    const std::size_t g = p.derivatives;
    grads.assign(abi::grads_slots(g), 0);
    std::copy(output_strides.begin(), output_strides.end(), grads.begin() + static_cast<std::ptrdiff_t>(abi::grads_strides_slot(g)));
    sums = {};
    sums.chunk_rows = p.grid.chunk_rows;
    sums.batch_rows = p.grid.batch_rows;
    sums.chunks = p.grid.chunks;
    sums.strip_blocks = p.grid.strip_blocks;
    sums.whole_rows = p.grid.whole_rows ? 1 : 0;

    // One argument per kernel parameter, from the list the kernel's parameter list was printed from.
    args_.clear();
    std::size_t param = 0;
    for (const Parameter parameter : p.parameters) {
        switch (parameter) {
            case Parameter::Extents: args_.push_back(&extents_); break;
            case Parameter::Inputs: args_.push_back(inputs->data()); break;
            case Parameter::Param: args_.push_back(&params.at(param++)); break;
            case Parameter::Output: args_.push_back(&output); break;
            case Parameter::ReduceOut: args_.push_back(&reduce); break;
            case Parameter::RowsOut: args_.push_back(&rows); break;
            case Parameter::Grads: args_.push_back(grads.data()); break;
            case Parameter::SumScratch: args_.push_back(&sums); break;
            case Parameter::Statistics: args_.push_back(&statistics); break;
        }
    }
    if (param != params.size()) throw InternalError("the plan's parameters and the kernel's disagree");
}

}  // namespace lossjit
