// kernels: the GPU a Loss runs on, and its kernels. A kernel variant is emitted, compiled through
// jit/ (memory and disk cache, NVRTC on a miss), loaded into the device's context and asked once for
// what the driver knows about it (registers, spills, shared memory, blocks per SM). Loading is the
// expensive step of a first call, so each variant is loaded once per Loss and kept while it lives.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "codegen/kernel_spec.hpp"
#include "cuda/driver.hpp"
#include "lossjit/lossjit.hpp"
#include "pipeline.hpp"

namespace lossjit {

// UsageError where `target` (a target normalize_target accepts) is not the architecture of the GPU
// lossjit knows by the name `gpu` (Options::gpu: kernels chosen for one GPU are not built for
// another); nothing for an empty name.
void require_target_of(const std::string& gpu, const std::string& target);

// The device's facts a launch needs, read once.
struct DeviceFacts {
    std::shared_ptr<cuda::Context> context;
    int multiprocessors = 0;
    int max_threads_per_sm = 0;
    std::string target;       // "sm_90"
    std::string tuning_text;  // the tuning key's GPU: "NVIDIA H100 80GB HBM3 (sm_90)"
    GpuFacts gpu;             // what the launch policy's defaults are chosen by (kinds/defaults.hpp)
};
// Throws CudaError where there is no such device (or no driver).
DeviceFacts open_device(int ordinal);

struct LoadedKernel {
    std::unique_ptr<cuda::Module> module;
    CUfunction function = nullptr;
    // A kernel with scattered gradients (KernelSpec::scatters): the two kernels that add its rows
    // into the classes, after it.
    CUfunction scatter_chunks = nullptr;
    CUfunction scatter_finish = nullptr;
    // What the driver says about it (registers, local and shared bytes, resident blocks per SM) and
    // what its spec resolved the knobs to; the launch adds the rest (KernelInfo).
    KernelInfo info;
};

// The loaded kernels of one Loss, by `label` + KernelSpec::signature() (the label tells apart
// programs that share a signature: the loss, or it with gradients). Not thread-safe: the owner's
// lock guards it. Kernels are never unloaded while it lives, so a reference to one stays valid.
class KernelMap {
public:
    // The kernel for `spec` of `program`, compiling and loading it on first use; a first use fills
    // the emit, cache, NVRTC and load entries of `timings`.
    const LoadedKernel& get(const ir::Program& program, const KernelSpec& spec, const std::string& label,
                            const DeviceFacts& device, Timings& timings);

private:
    std::map<std::string, LoadedKernel> kernels_;
};

}  // namespace lossjit
