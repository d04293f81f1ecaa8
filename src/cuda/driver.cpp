#include "cuda/driver.hpp"

#include <cstdlib>
#include <map>
#include <mutex>

#include <dlfcn.h>
#include <fmt/format.h>

#include "lossjit/device.hpp"
#include "lossjit/errors.hpp"

#define LOSSJIT_STRINGIFY_EXPANDED(x) LOSSJIT_STRINGIFY(x)
#define LOSSJIT_STRINGIFY(x) #x

namespace lossjit::cuda {
namespace {

struct Loaded {
    Api api;
    std::string error;  // empty when the driver is usable
};

// cuda.h maps each API name to its current versioned symbol (cuMemAlloc -> cuMemAlloc_v2); the
// expanded name is what the library exports.
Loaded load_driver() {
    Loaded loaded;
    const char* override_path = std::getenv("LOSSJIT_LIBCUDA");
    const char* path = override_path && *override_path ? override_path : "libcuda.so.1";
    void* library = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char* why = ::dlerror();
        loaded.error = fmt::format("no CUDA driver ({})", why ? why : path);
        return loaded;
    }
#define LOSSJIT_RESOLVE(name)                                                                              \
    loaded.api.name = reinterpret_cast<decltype(loaded.api.name)>(                                          \
        ::dlsym(library, LOSSJIT_STRINGIFY_EXPANDED(name)));                                                \
    if (!loaded.api.name) {                                                                                 \
        loaded.error = fmt::format("the CUDA driver {} lacks {}; it is older than CUDA 12", path,           \
                                   LOSSJIT_STRINGIFY_EXPANDED(name));                                       \
        return loaded;                                                                                      \
    }
    LOSSJIT_DRIVER_FUNCTIONS(LOSSJIT_RESOLVE)
#undef LOSSJIT_RESOLVE

    if (const CUresult r = loaded.api.cuInit(0); r != CUDA_SUCCESS) {
        const char* name = nullptr;
        loaded.api.cuGetErrorName(r, &name);
        loaded.error = fmt::format("the CUDA driver did not initialise (cuInit: {})", name ? name : "unknown error");
        return loaded;
    }
    int count = 0;
    if (loaded.api.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
        loaded.error = "no CUDA device (the driver loaded but reports no GPU)";
    }
    return loaded;  // the library stays loaded for the life of the process
}

const Loaded& loaded() {
    static const Loaded instance = load_driver();
    return instance;
}

}  // namespace

const Api& api() {
    const auto& l = loaded();
    if (!l.error.empty()) throw CudaError(l.error);
    return l.api;
}

void check(CUresult result, const char* call) {
    if (result == CUDA_SUCCESS) return;
    const char* name = nullptr;
    const char* text = nullptr;
    api().cuGetErrorName(result, &name);
    api().cuGetErrorString(result, &text);
    throw CudaError(fmt::format("{} failed: {} ({})", call, name ? name : "?", text ? text : "no description"),
                    static_cast<int>(result));
}

int attribute(CUdevice device, CUdevice_attribute which) {
    int value = 0;
    LOSSJIT_CU(cuDeviceGetAttribute(&value, which, device));
    return value;
}

int attribute_or_zero(CUdevice device, CUdevice_attribute which) {
    int value = 0;
    return api().cuDeviceGetAttribute(&value, which, device) == CUDA_SUCCESS ? value : 0;
}

Context::Context(int ordinal) : ordinal_(ordinal) {
    int count = 0;
    LOSSJIT_CU(cuDeviceGetCount(&count));
    if (ordinal < 0 || ordinal >= count)
        throw UsageError(fmt::format("CUDA device {} does not exist (this machine has {})", ordinal, count));
    LOSSJIT_CU(cuDeviceGet(&device_, ordinal));
    LOSSJIT_CU(cuDevicePrimaryCtxRetain(&context_, device_));
}

Context::~Context() {
    if (context_) api().cuDevicePrimaryCtxRelease(device_);
}

std::shared_ptr<Context> Context::for_device(int ordinal) {
    static std::mutex mutex;
    static std::map<int, std::weak_ptr<Context>> contexts;
    std::lock_guard lock(mutex);
    if (auto existing = contexts[ordinal].lock()) return existing;
    auto context = std::make_shared<Context>(ordinal);
    contexts[ordinal] = context;
    return context;
}

ScopedContext::ScopedContext(const Context& context) {
    LOSSJIT_CU(cuCtxGetCurrent(&previous_));
    if (previous_ != context.get()) {
        LOSSJIT_CU(cuCtxSetCurrent(context.get()));
        switched_ = true;
    }
}

ScopedContext::~ScopedContext() {
    if (switched_) api().cuCtxSetCurrent(previous_);
}

Module::Module(std::shared_ptr<Context> context, const std::string& image) : context_(std::move(context)) {
    ScopedContext scope(*context_);
    LOSSJIT_CU(cuModuleLoadData(&module_, image.data()));
}

Module::~Module() {
    if (!module_) return;
    try {
        ScopedContext scope(*context_);
        api().cuModuleUnload(module_);
    } catch (...) {  // destructors must not throw; the context is going away anyway
    }
}

CUfunction Module::function(const char* name) const {
    CUfunction f = nullptr;
    LOSSJIT_CU(cuModuleGetFunction(&f, module_, name));
    return f;
}

Memory::Memory(std::shared_ptr<Context> context, std::size_t bytes) : context_(std::move(context)), bytes_(bytes) {
    if (bytes == 0) return;
    ScopedContext scope(*context_);
    const CUresult r = api().cuMemAlloc(&pointer_, bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        throw CudaError(fmt::format("out of GPU memory allocating {} bytes", bytes), static_cast<int>(r));
    check(r, "cuMemAlloc");
}

Memory::~Memory() {
    if (!pointer_) return;
    try {
        ScopedContext scope(*context_);
        api().cuMemFree(pointer_);
    } catch (...) {
    }
}

}  // namespace lossjit::cuda

// ---- public device facilities (include/lossjit/device.hpp) ------------------------------------------
namespace lossjit {

bool cuda_available(std::string* reason) {
    const auto& l = cuda::loaded();
    if (reason) *reason = l.error;
    return l.error.empty();
}

DeviceInfo device_info(int ordinal) {
    auto context = cuda::Context::for_device(ordinal);
    DeviceInfo info;
    info.ordinal = ordinal;
    char name[256] = {};
    LOSSJIT_CU(cuDeviceGetName(name, sizeof name, context->device()));
    info.name = name;
    info.major = cuda::attribute(context->device(), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    info.minor = cuda::attribute(context->device(), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    info.multiprocessors = cuda::attribute(context->device(), CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    LOSSJIT_CU(cuDeviceTotalMem(&info.memory_bytes, context->device()));
    return info;
}

struct DeviceBuffer::Impl {
    Impl(std::size_t bytes, int ordinal) : memory(cuda::Context::for_device(ordinal), bytes), device(ordinal) {}
    cuda::Memory memory;
    int device;
};

DeviceBuffer::DeviceBuffer(std::size_t bytes, int device) : impl_(std::make_shared<Impl>(bytes, device)) {}

void* DeviceBuffer::data() const { return impl_ ? reinterpret_cast<void*>(impl_->memory.get()) : nullptr; }
std::size_t DeviceBuffer::size() const { return impl_ ? impl_->memory.size() : 0; }
int DeviceBuffer::device() const { return impl_ ? impl_->device : -1; }

void DeviceBuffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
    if (bytes == 0) return;
    if (!impl_ || offset + bytes > size()) throw UsageError("DeviceBuffer::upload out of bounds");
    cuda::ScopedContext scope(*impl_->memory.context());
    LOSSJIT_CU(cuMemcpyHtoD(impl_->memory.get() + offset, host, bytes));
}

void DeviceBuffer::download(void* host, std::size_t bytes, std::size_t offset) const {
    if (bytes == 0) return;
    if (!impl_ || offset + bytes > size()) throw UsageError("DeviceBuffer::download out of bounds");
    cuda::ScopedContext scope(*impl_->memory.context());
    LOSSJIT_CU(cuMemcpyDtoH(host, impl_->memory.get() + offset, bytes));
}

void DeviceBuffer::fill_bytes(unsigned char value) {
    if (size() == 0) return;
    cuda::ScopedContext scope(*impl_->memory.context());
    LOSSJIT_CU(cuMemsetD8(impl_->memory.get(), value, size()));
    LOSSJIT_CU(cuCtxSynchronize());
}

void synchronize(int device) {
    auto context = cuda::Context::for_device(device);
    cuda::ScopedContext scope(*context);
    LOSSJIT_CU(cuCtxSynchronize());
}

}  // namespace lossjit
