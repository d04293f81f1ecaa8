// kernels: opening the device and loading kernel variants (kernels.hpp).
#include "runtime/kernels.hpp"

#include <fmt/format.h>

#include "codegen/kinds/kinds.hpp"
#include "jit/cache.hpp"
#include "jit/compile.hpp"
#include "tuning/store.hpp"
#include "util/timing.hpp"

namespace lossjit {

void require_target_of(const std::string& gpu, const std::string& target) {
    if (gpu.empty()) return;
    const int arch = named_gpu_facts(gpu).arch;
    if (target_arch(target) != arch)
        throw UsageError(fmt::format("the kernels are chosen for {} (sm_{}): build them for sm_{} or compute_{}, not {}",
                                     gpu, arch, arch, arch, target));
}

DeviceFacts open_device(int ordinal) {
    DeviceFacts facts;
    facts.context = cuda::Context::for_device(ordinal);
    const auto info = device_info(ordinal);
    facts.multiprocessors = info.multiprocessors;
    facts.max_threads_per_sm = cuda::attribute(facts.context->device(), CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    facts.gpu.threads_per_sm = facts.max_threads_per_sm;
    facts.target = target_for(info.major, info.minor);
    facts.tuning_text = tuning_device_text(ordinal);
    const CUdevice device = facts.context->device();
    facts.gpu.arch = info.major * 10 + info.minor;
    facts.gpu.multiprocessors = info.multiprocessors;
    facts.gpu.l2_bytes = cuda::attribute_or_zero(device, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    facts.gpu.memory_bytes = static_cast<std::int64_t>(info.memory_bytes);
    facts.gpu.shared_bytes_per_block = cuda::attribute_or_zero(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    // Peak bandwidth: double data rate over the bus (kHz x bits x 2 / 8 bytes). A driver that does not
    // report the clock gives 0, and the GPU's class falls back on its memory size.
    const double clock_khz = cuda::attribute_or_zero(device, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    const double bus_bits = cuda::attribute_or_zero(device, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    facts.gpu.memory_bytes_per_second = clock_khz * 1e3 * 2 * bus_bits / 8;
    return facts;
}

const LoadedKernel& KernelMap::get(const ir::Program& program, const KernelSpec& spec, const std::string& label,
                                   const DeviceFacts& device, Timings& timings) {
    // One source for every row length, but a loaded function per size of its row cache: the
    // occupancy and the function's opt-in to dynamic shared memory depend on it.
    const std::size_t dynamic_shared = spec.dynamic_shared_bytes();
    const std::string signature =
        label + spec.signature() + (dynamic_shared > 0 ? fmt::format(" [{} B dynamic shared]", dynamic_shared) : "");
    if (auto it = kernels_.find(signature); it != kernels_.end()) return it->second;

    util::Stopwatch watch;
    const std::string source = emit_cuda(program, spec);
    timings.emit_ms = watch.lap_ms();

    const CacheLookup lookup = KernelCache::process().get(source, device.target, spec.fast_math);
    timings.cache_ms = watch.lap_ms();
    timings.nvrtc_ms = lookup.compile_ms;
    timings.cache = lookup.outcome;
    timings.cache_warning = lookup.warning;
    timings.target = device.target;

    LoadedKernel kernel;
    kernel.module = std::make_unique<cuda::Module>(device.context, lookup.image->data);
    kernel.function = kernel.module->function(kKernelName);
    if (spec.scatters()) {
        kernel.scatter_chunks = kernel.module->function(kScatterChunksName);
        kernel.scatter_finish = kernel.module->function(kScatterFinishName);
    }
    auto& info = kernel.info;
    // A row cache is opted into per function: with the kernel's static shared memory it may pass the
    // 48 KB every block may have without asking (and the driver refuses what the GPU cannot give).
    if (dynamic_shared > 0)
        LOSSJIT_CU(cuFuncSetAttribute(kernel.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      static_cast<int>(dynamic_shared)));
    LOSSJIT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&info.resident_blocks_per_sm, kernel.function,
                                                           spec.block_threads, dynamic_shared));
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
    info.knobs.max_registers = spec.register_bound();
    // Only a kernel that could keep a row (it walks the row again for an input) reports the row
    // cache, and only one whose rows a block takes the row cluster; for the others they stay unset, and so does a
    // tuning record of theirs, which then leaves a caller's knob automatic (and the call untuned where every other
    // knob is set).
    const bool by_row = spec.loop == KernelSpec::Loop::ByRow;
    if (spec.row_cache_columns > 0 || (by_row && !kinds::row_walks(program, spec).read_again.empty()))
        info.knobs.row_cache = spec.row_cache_columns > 0;
    if (spec.row_cache_columns > 0 && !spec.side_by_side) info.knobs.row_prefetch = spec.row_prefetch;
    if (by_row && !spec.side_by_side && spec.team == spec.block_threads) info.knobs.row_cluster = spec.row_cluster;
    if (by_row && !spec.side_by_side) info.knobs.row_team = spec.team == spec.block_threads ? RowTeam::Block : RowTeam::Warp;
    info.target = device.target;
    timings.load_ms = watch.lap_ms();
    return kernels_.emplace(signature, std::move(kernel)).first->second;
}

}  // namespace lossjit
