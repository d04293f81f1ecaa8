// launch: lossjit::Loss. compile() runs parse and check; the first call for each layout of the
// inputs runs emit -> cache (NVRTC) -> module load, and every call builds the kernel's parameters
// and launches it once.
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "cache.hpp"
#include "driver.hpp"
#include "kernel_abi.hpp"
#include "lossjit/lossjit.hpp"
#include "pipeline.hpp"

namespace lossjit {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Blocks a reduction may use at most: partials are sized for this.
constexpr int kMaxBlocksPerSm = 32;

struct LoadedKernel {
    std::unique_ptr<cuda::Module> module;
    CUfunction function = nullptr;
    int grid_limit = 1;  // resident blocks on the whole GPU
};

struct Workspace {  // per stream: concurrent calls on different streams must not share partials
    std::unique_ptr<cuda::Memory> memory;  // partials (double), then arrivals, then result
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

void check_data(std::string_view name, DType dtype, const void* data, std::int64_t numel) {
    // A DType outside the enum (a cast, a stale ABI) is the caller's mistake, not an internal one.
    if (dtype != DType::float32 && dtype != DType::float64)
        throw UsageError(fmt::format("'{}' has an unknown dtype ({})", name, static_cast<int>(dtype)));
    if (dtype != DType::float32)
        throw UsageError(fmt::format("'{}' is {}; lossjit computes in float32 and needs float32 tensors", name, to_string(dtype)));
    if (numel > 0 && data == nullptr) throw UsageError(fmt::format("'{}' has no data (a null pointer)", name));
    if (reinterpret_cast<std::uintptr_t>(data) % alignof(float) != 0)
        throw UsageError(fmt::format("'{}' is not aligned to 4 bytes (address {}): float32 data must be", name, data));
}

}  // namespace

struct Loss::Impl {
    Options options;
    ast::Program syntax;
    ir::Program program;
    std::vector<double> param_values;
    Timings timings;

    std::mutex mutex;  // guards everything below
    std::shared_ptr<cuda::Context> context;
    int multiprocessors = 0;
    std::string target;
    std::map<std::string, LoadedKernel> kernels;  // by KernelSpec::signature()
    std::map<Stream, Workspace> workspaces;

    int workspace_slots() const { return multiprocessors * kMaxBlocksPerSm; }

    Layout layout_for(std::span<const TensorView> inputs, const OutputView* output) const {
        const auto shapes = shapes_of(program.inputs, inputs);
        if (!output) return plan_layout(shapes, nullptr);
        const OperandShape out{"output", output->shape, output->strides};
        return plan_layout(shapes, &out);
    }

    KernelSpec spec_for(const Layout& layout) const {
        return KernelSpec::for_layout(layout, program.is_map(), options.block_threads);
    }

    void ensure_device() {
        if (context) return;
        context = cuda::Context::for_device(options.device);
        const auto info = device_info(options.device);
        multiprocessors = info.multiprocessors;
        target = target_for(info.major, info.minor);
    }

    const LoadedKernel& kernel_for(const KernelSpec& spec) {
        const std::string signature = spec.signature();
        if (auto it = kernels.find(signature); it != kernels.end()) return it->second;

        auto start = Clock::now();
        const std::string source = emit_cuda(program, spec);
        timings.emit_ms = ms_since(start);

        start = Clock::now();
        const CacheLookup lookup = KernelCache::process().get(source, target);
        timings.cache_ms = ms_since(start);
        timings.nvrtc_ms = lookup.compile_ms;
        timings.cache = std::string(to_string(lookup.outcome));
        timings.cache_warning = lookup.warning;
        timings.target = target;

        start = Clock::now();
        LoadedKernel kernel;
        kernel.module = std::make_unique<cuda::Module>(context, lookup.image->data);
        kernel.function = kernel.module->function(kKernelName);
        int per_sm = 0;
        LOSSJIT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel.function, spec.block_threads, 0));
        kernel.grid_limit = std::max(1, multiprocessors * std::min(std::max(per_sm, 1), kMaxBlocksPerSm));
        timings.load_ms = ms_since(start);
        return kernels.emplace(signature, std::move(kernel)).first->second;
    }

    Workspace& workspace_for(Stream stream) {
        auto& ws = workspaces[stream];
        if (!ws.memory) {
            const std::size_t bytes = sizeof(double) * static_cast<std::size_t>(workspace_slots()) + 32;
            ws.memory = std::make_unique<cuda::Memory>(context, bytes);
            LOSSJIT_CU(cuMemsetD8(ws.memory->get(), 0, bytes));  // arrivals start at 0
        }
        return ws;
    }

    // Builds the parameter list in the order the emitter declares it and launches once.
    void launch(const Layout& layout, std::span<const TensorView> inputs, const void* output_ptr,
                float* reduce_result, Stream stream) {
        const KernelSpec spec = spec_for(layout);
        const LoadedKernel& kernel = kernel_for(spec);

        abi::Extents extents{};
        extents.count = layout.count;
        std::copy(layout.dims.begin(), layout.dims.end(), extents.dims);

        std::vector<abi::Strided> strided(inputs.size() + 1);
        std::vector<const void*> pointers(inputs.size() + 1);
        std::vector<float> params(param_values.begin(), param_values.end());
        std::vector<void*> args;
        args.push_back(&extents);
        for (std::size_t k = 0; k < inputs.size(); ++k) {
            if (spec.contiguous_inputs[k]) {
                pointers[k] = inputs[k].data;
                args.push_back(&pointers[k]);
            } else {
                strided[k].ptr = inputs[k].data;
                std::copy(layout.inputs[k].strides.begin(), layout.inputs[k].strides.end(), strided[k].strides);
                args.push_back(&strided[k]);
            }
        }
        for (auto& p : params) args.push_back(&p);

        const long long blocks_needed = std::max<long long>(1, (layout.count + spec.block_threads - 1) / spec.block_threads);
        const unsigned grid = static_cast<unsigned>(std::min<long long>(blocks_needed, kernel.grid_limit));

        abi::ReduceOut reduce_out{};
        if (program.is_map()) {
            if (spec.contiguous_output) {
                pointers.back() = output_ptr;
                args.push_back(&pointers.back());
            } else {
                strided.back().ptr = output_ptr;
                std::copy(layout.output.strides.begin(), layout.output.strides.end(), strided.back().strides);
                args.push_back(&strided.back());
            }
        } else {
            Workspace& ws = workspace_for(stream);
            reduce_out.partials = ws.partials();
            reduce_out.arrivals = ws.arrivals(workspace_slots());
            reduce_out.result = reduce_result ? reduce_result : ws.result(workspace_slots());
            reduce_out.divisor = reduction_divisor(program, layout);
            args.push_back(&reduce_out);
        }
        LOSSJIT_CU(cuLaunchKernel(kernel.function, grid, 1, 1, static_cast<unsigned>(spec.block_threads), 1, 1, 0,
                                  static_cast<CUstream>(stream), args.data(), nullptr));
    }

    // Validates, plans and launches; the caller holds `mutex`.
    void run(std::span<const TensorView> inputs, const OutputView* output, float* result, Stream stream) {
        check_inputs(inputs);
        if (output) check_data("output", output->dtype, output->data, output->numel());
        const Layout layout = layout_for(inputs, output);
        if (output && layout.count == 0) return;  // an empty map has nothing to write
        ensure_device();
        cuda::ScopedContext scope(*context);
        launch(layout, inputs, output ? output->data : nullptr, result, stream);
    }

    void check_inputs(std::span<const TensorView> inputs) const {
        for (std::size_t k = 0; k < inputs.size() && k < program.inputs.size(); ++k)
            check_data(program.inputs[k], inputs[k].dtype, inputs[k].data, inputs[k].numel());
    }
};

Loss compile(std::string_view source, Options options) {
    Loss loss;
    loss.impl_ = std::make_shared<Loss::Impl>();
    auto& impl = *loss.impl_;

    auto start = Clock::now();
    impl.syntax = parse(source, options.source_name);
    impl.timings.parse_ms = ms_since(start);

    start = Clock::now();
    CheckOptions check_options;
    check_options.inputs = options.inputs;
    for (const auto& p : options.params) check_options.params.push_back({p.name, p.value});
    impl.program = check(impl.syntax, check_options);
    impl.timings.check_ms = ms_since(start);

    for (const auto& p : impl.program.params) impl.param_values.push_back(p.default_value);
    impl.options = std::move(options);
    return loss;
}

Kind Loss::kind() const { return impl_->program.is_map() ? Kind::Map : Kind::Reduction; }

std::string_view Loss::reduction() const {
    return impl_->program.is_map() ? std::string_view() : ir::to_string(impl_->program.reduction);
}

const std::vector<std::string>& Loss::inputs() const { return impl_->program.inputs; }

std::vector<Param> Loss::params() const {
    std::vector<Param> out;
    for (std::size_t i = 0; i < impl_->program.params.size(); ++i)
        out.push_back({impl_->program.params[i].name, impl_->param_values[i]});
    return out;
}

void Loss::set_param(std::string_view name, double value) {
    std::lock_guard lock(impl_->mutex);
    for (std::size_t i = 0; i < impl_->program.params.size(); ++i) {
        if (impl_->program.params[i].name == name) {
            impl_->param_values[i] = value;
            return;
        }
    }
    std::vector<std::string> names;
    for (const auto& p : impl_->program.params) names.push_back(p.name);
    throw UsageError(fmt::format("the program has no parameter '{}' (its parameters: {})", printable(name),
                                 names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
}

bool Loss::uses(std::string_view name) const {
    const auto& program = impl_->program;
    for (const auto& n : program.nodes) {
        if (n.kind == ir::NodeKind::Input && program.inputs[static_cast<std::size_t>(n.slot)] == name) return true;
        if (n.kind == ir::NodeKind::Param && program.params[static_cast<std::size_t>(n.slot)].name == name) return true;
    }
    return false;
}

Shape Loss::output_shape(std::span<const TensorView> inputs) const {
    return broadcast_shapes(shapes_of(impl_->program.inputs, inputs));
}

float Loss::operator()(std::span<const TensorView> inputs, Stream stream) {
    if (kind() != Kind::Reduction) throw UsageError("this program is an elementwise map: call map() with an output");
    // The lock also covers the copy: another call on this stream must not overwrite the result first.
    std::lock_guard lock(impl_->mutex);
    impl_->run(inputs, nullptr, nullptr, stream);
    cuda::ScopedContext scope(*impl_->context);
    const Workspace& ws = impl_->workspaces.at(stream);
    float value = 0.0f;
    LOSSJIT_CU(cuMemcpyDtoHAsync(&value, reinterpret_cast<CUdeviceptr>(ws.result(impl_->workspace_slots())),
                                 sizeof value, static_cast<CUstream>(stream)));
    LOSSJIT_CU(cuStreamSynchronize(static_cast<CUstream>(stream)));
    return value;
}

void Loss::evaluate(std::span<const TensorView> inputs, float* device_result, Stream stream) {
    if (kind() != Kind::Reduction) throw UsageError("this program is an elementwise map: call map() with an output");
    if (!device_result) throw UsageError("evaluate() needs a device pointer for the result");
    std::lock_guard lock(impl_->mutex);
    impl_->run(inputs, nullptr, device_result, stream);
}

void Loss::map(std::span<const TensorView> inputs, const OutputView& output, Stream stream) {
    if (kind() != Kind::Map)
        throw UsageError(fmt::format("this program is a {} reduction: call it for a value, not map()", reduction()));
    std::lock_guard lock(impl_->mutex);
    impl_->run(inputs, &output, nullptr, stream);
}

double Loss::reference(std::span<const TensorView> host_inputs) const {
    if (kind() != Kind::Reduction) throw UsageError("this program is an elementwise map: use reference_map()");
    impl_->check_inputs(host_inputs);
    const Layout layout = impl_->layout_for(host_inputs, nullptr);
    std::vector<const float*> data;
    for (const auto& v : host_inputs) data.push_back(static_cast<const float*>(v.data));
    return reference_reduce(impl_->program, layout, data, impl_->param_values);
}

void Loss::reference_map(std::span<const TensorView> host_inputs, const OutputView& host_output) const {
    if (kind() != Kind::Map) throw UsageError("this program is a reduction: use reference()");
    impl_->check_inputs(host_inputs);
    check_data("output", host_output.dtype, host_output.data, host_output.numel());
    const Layout layout = impl_->layout_for(host_inputs, &host_output);
    std::vector<const float*> data;
    for (const auto& v : host_inputs) data.push_back(static_cast<const float*>(v.data));
    lossjit::reference_map(impl_->program, layout, data, impl_->param_values, static_cast<float*>(host_output.data));
}

std::string Loss::ast() const { return dump_ast(impl_->syntax); }
std::string Loss::checked() const { return dump_checked(impl_->program); }

std::string Loss::cuda_source(std::span<const TensorView> inputs) const {
    const Layout layout = impl_->layout_for(inputs, nullptr);
    return emit_cuda(impl_->program, impl_->spec_for(layout));
}

std::string Loss::cuda_source() const {
    KernelSpec spec;
    spec.contiguous_inputs.assign(impl_->program.inputs.size(), true);
    spec.block_threads = impl_->options.block_threads;
    return emit_cuda(impl_->program, spec);
}

KernelBuild Loss::compile_kernel(std::span<const TensorView> inputs, const std::string& target) const {
    KernelBuild build;
    build.source = inputs.empty() && !impl_->program.inputs.empty() ? cuda_source() : cuda_source(inputs);
    build.target = normalize_target(target);
    const CacheLookup lookup = KernelCache::process().get(build.source, build.target);
    build.key = lookup.key;
    build.cache = std::string(to_string(lookup.outcome));
    build.image_bytes = lookup.image->data.size();
    build.nvrtc_ms = lookup.compile_ms;
    build.warning = lookup.warning;
    return build;
}

std::string Loss::ptx(std::span<const TensorView> inputs, const std::string& arch) const {
    std::string target = normalize_target(arch);
    if (target.rfind("sm_", 0) == 0) target = "compute_" + target.substr(3);
    const std::string source = inputs.empty() && !impl_->program.inputs.empty() ? cuda_source() : cuda_source(inputs);
    return KernelCache::process().get(source, target).image->data;
}

const Timings& Loss::timings() const { return impl_->timings; }

}  // namespace lossjit
