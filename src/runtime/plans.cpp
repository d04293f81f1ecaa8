// plans: making and finding a layout's plan, and the per-stream workspace and arguments (plans.hpp).
#include "runtime/plans.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "tuning/knobs.hpp"
#include "tuning/store.hpp"

namespace lossjit {
namespace {

unsigned alignment_of(std::span<const TensorView> inputs, const OutputView* output) {
    unsigned bits = 0;
    for (std::size_t k = 0; k < inputs.size() && k < 31; ++k)
        if (reinterpret_cast<std::uintptr_t>(inputs[k].data) % 16 == 0) bits |= 1u << k;
    if (output && reinterpret_cast<std::uintptr_t>(output->data) % 16 == 0) bits |= 1u << 31;
    return bits;
}

}  // namespace

Variant choose_variant(const Options& options, const ir::Program& program, bool tunable, const Layout& layout,
                       std::span<const TensorView> inputs, const OutputView* output, std::string device) {
    Variant v;
    Knobs knobs = options.knobs;
    const bool automatic = knobs.block_threads == 0 || (knobs.unroll == 0 && knobs.items_per_thread == 0) ||
                           knobs.vector_width == 0 || knobs.max_blocks_per_sm == 0 ||
                           knobs.accumulator == Accumulator::Auto || !knobs.fast_math;
    TuningStore* store = options.use_tuning && automatic && tunable ? TuningStore::process() : nullptr;
    if (store) {
        TuningKey key{tuning_program_text(program), tuning_shape_text(program.inputs, inputs, output), "float32", ""};
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
    v.spec = KernelSpec::choose(program, layout, data, output ? output->data : nullptr, knobs, !v.tuned.empty());
    v.max_blocks_per_sm = knobs.max_blocks_per_sm;
    return v;
}

bool Plan::matches(std::span<const TensorView> inputs, const OutputView* output) const {
    if (inputs.size() != shapes.size() || (output != nullptr) != has_output) return false;
    for (std::size_t k = 0; k < inputs.size(); ++k)
        if (inputs[k].shape != shapes[k] || inputs[k].strides != strides[k]) return false;
    if (output && (output->shape != output_shape || output->strides != output_strides)) return false;
    return alignment_of(inputs, output) == alignment;
}

std::shared_ptr<const Plan> make_plan(const Launchable& launchable, const Options& options,
                                      std::span<const TensorView> inputs, const OutputView* output,
                                      const DeviceFacts& device, KernelMap& kernels, Timings& timings) {
    const ir::Program& program = *launchable.program;
    auto plan = std::make_shared<Plan>();
    const auto shapes = operand_shapes(*launchable.operands, inputs);
    if (output) {
        const OperandShape out{"output", output->shape.to_vector(), output->strides.to_vector()};
        plan->layout = plan_layout(shapes, &out);
    } else {
        plan->layout = plan_layout(shapes, nullptr);
    }
    Variant chosen = choose_variant(options, program, launchable.label.empty(), plan->layout, inputs, output,
                                    device.tuning_text);
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
    plan->divisor = program.is_map() ? 1.0 : reduction_divisor(program, plan->layout.shape);
    plan->params = program.params.size();
    plan->derivatives = program.derivatives.size();
    plan->map_forward = program.is_map() && program.derivatives.empty();

    for (const auto& v : inputs) {
        plan->shapes.push_back(v.shape);
        plan->strides.push_back(v.strides);
    }
    if (output) {
        plan->output_shape = output->shape;
        plan->output_strides = output->strides;
    }
    plan->alignment = alignment_of(inputs, output);
    plan->has_output = output != nullptr;
    return plan;
}

std::shared_ptr<const Plan> PlanCache::find(std::span<const TensorView> inputs, const OutputView* output) const {
    for (auto it = recent_.rbegin(); it != recent_.rend(); ++it)
        if ((*it)->matches(inputs, output)) return *it;
    return nullptr;
}

void PlanCache::add(std::shared_ptr<const Plan> plan) {
    if (recent_.size() == kPlans) recent_.erase(recent_.begin());
    recent_.push_back(std::move(plan));
}

void Workspace::ensure(const std::shared_ptr<cuda::Context>& context, int slots, Stream stream) {
    if (memory_) return;
    slots_ = static_cast<std::size_t>(slots);
    const std::size_t bytes = sizeof(double) * slots_ + 32;
    memory_ = std::make_unique<cuda::Memory>(context, bytes);
    LOSSJIT_CU(cuMemsetD32Async(memory_->get(), 0, bytes / 4, stream));
}

void Workspace::ensure_columns(const std::shared_ptr<cuda::Context>& context, std::size_t strips,
                               std::size_t partials, Stream stream) {
    if (column_strips_ >= strips && column_partials_ >= partials) return;
    // Earlier kernels on this stream may still use the smaller buffer: let them finish, free it,
    // then allocate the larger one.
    if (columns_) LOSSJIT_CU(cuStreamSynchronize(stream));
    columns_.reset();
    strips = std::max(column_strips_, strips);
    partials = std::max(column_partials_, partials);
    const std::size_t bytes = sizeof(double) * ((strips + 1) / 2 + partials);
    column_strips_ = column_partials_ = 0;
    columns_ = std::make_unique<cuda::Memory>(context, bytes);
    column_strips_ = strips;
    column_partials_ = partials;
    LOSSJIT_CU(cuMemsetD32Async(columns_->get(), 0, bytes / 4, stream));
}

void LaunchArgs::bind(std::shared_ptr<const Plan> plan) {
    plan_ = std::move(plan);
    const Plan& p = *plan_;
    const auto& dims = p.layout.dims;
    extents_ = {};
    extents_.count = p.layout.count;
    std::copy(dims.begin(), dims.end(), extents_.dims);
    inputs = std::make_unique<abi::Inputs>(p.slots.size());
    for (std::size_t k = 0; k < p.slots.size(); ++k)
        inputs->set_strides(k, p.layout.inputs[static_cast<std::size_t>(p.slots[k])].strides.data());
    output = {};
    std::copy(p.layout.output.strides.begin(), p.layout.output.strides.end(), output.strides);
    reduce = {};
    reduce.scale = 1.0 / p.divisor;
    params.assign(p.params, 0.0f);
    const std::size_t g = p.derivatives;
    grads.assign(g + kMaxRank + 2, 0);
    std::copy(p.layout.output.strides.begin(), p.layout.output.strides.end(),
              grads.begin() + static_cast<std::ptrdiff_t>(g));
    columns = {};
    columns.chunk_rows = p.grid.chunk_rows;
    columns.chunks = p.grid.chunks;
    columns.strip_blocks = p.grid.strip_blocks;

    args_.clear();
    args_.push_back(&extents_);
    args_.push_back(inputs->data());
    for (auto& value : params) args_.push_back(&value);
    args_.push_back(p.map_forward ? static_cast<void*>(&output) : static_cast<void*>(&reduce));
    if (g > 0) args_.push_back(grads.data());
    if (p.spec.loop == KernelSpec::Loop::Columns) args_.push_back(&columns);
}

}  // namespace lossjit
