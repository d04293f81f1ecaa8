// driver: the CUDA driver API, resolved with dlopen/dlsym on first use so that nothing links
// against libcuda. Every handle lossjit creates is owned by an RAII object from birth.
#pragma once

#include <memory>
#include <string>

#include <cuda.h>

namespace lossjit::cuda {

struct Api {
#define LOSSJIT_DRIVER_FUNCTIONS(X)                                                                         \
    X(cuInit) X(cuGetErrorName) X(cuGetErrorString) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) \
    X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain)               \
    X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxSynchronize)                   \
    X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncGetAttribute) X(cuFuncSetAttribute)  \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree)             \
    X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoDAsync) X(cuMemsetD8) X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuMemcpyDtoHAsync) X(cuMemcpyHtoDAsync)                  \
    X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamIsCapturing) X(cuPointerGetAttribute) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)    \
    X(cuEventSynchronize) X(cuEventElapsedTime)
#define LOSSJIT_DECLARE(name) decltype(&::name) name = nullptr;
    LOSSJIT_DRIVER_FUNCTIONS(LOSSJIT_DECLARE)
#undef LOSSJIT_DECLARE
};

// Loads and initialises the driver once; throws CudaError when that is impossible.
const Api& api();

// Throws CudaError naming the call and the driver's error name and text.
void check(CUresult result, const char* call);
#define LOSSJIT_CU(call) ::lossjit::cuda::check(::lossjit::cuda::api().call, #call)

// The device's primary context, retained for as long as this object lives.
class Context {
public:
    explicit Context(int ordinal);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
    CUcontext get() const { return context_; }
    CUdevice device() const { return device_; }
    int ordinal() const { return ordinal_; }

    static std::shared_ptr<Context> for_device(int ordinal);  // shared by everything on that device

private:
    int ordinal_;
    CUdevice device_ = 0;
    CUcontext context_ = nullptr;
};

// Makes a context current for a scope and restores the previous one.
class ScopedContext {
public:
    explicit ScopedContext(const Context& context);
    ~ScopedContext();
    ScopedContext(const ScopedContext&) = delete;
    ScopedContext& operator=(const ScopedContext&) = delete;

private:
    CUcontext previous_ = nullptr;
    bool switched_ = false;
};

class Module {
public:
    Module(std::shared_ptr<Context> context, const std::string& image);
    ~Module();
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;
    CUfunction function(const char* name) const;

private:
    std::shared_ptr<Context> context_;
    CUmodule module_ = nullptr;
};

class Memory {
public:
    Memory(std::shared_ptr<Context> context, std::size_t bytes);
    ~Memory();
    Memory(const Memory&) = delete;
    Memory& operator=(const Memory&) = delete;
    CUdeviceptr get() const { return pointer_; }
    std::size_t size() const { return bytes_; }
    const std::shared_ptr<Context>& context() const { return context_; }

private:
    std::shared_ptr<Context> context_;
    CUdeviceptr pointer_ = 0;
    std::size_t bytes_ = 0;
};

int attribute(CUdevice device, CUdevice_attribute which);
// The same, 0 where the driver does not report it (attributes a newer driver may drop).
int attribute_or_zero(CUdevice device, CUdevice_attribute which);

}  // namespace lossjit::cuda
