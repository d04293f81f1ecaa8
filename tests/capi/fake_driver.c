/* A CUDA driver with no GPU behind it, loaded through LOSSJIT_LIBCUDA: one device that says it is an
 * H200, "device memory" that is host memory, modules and kernels that are names only, launches that
 * do nothing. It runs lossjit's launch path on a CPU: `test_capi launch` checks its bookkeeping
 * (plans, the remembered layout, pointers, scratch, the order of its errors) and bench/host_path.c
 * counts its instructions. Nothing computes, so no value read back means anything. */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

static int fake_context, fake_module, fake_function;

CUresult cuInit(unsigned flags) { (void)flags; return CUDA_SUCCESS; }
CUresult cuGetErrorName(CUresult r, const char** name) { (void)r; *name = "CUDA_ERROR_FAKE"; return CUDA_SUCCESS; }
CUresult cuGetErrorString(CUresult r, const char** text) { (void)r; *text = "the fake driver"; return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int* version) { *version = 13000; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int* count) { *count = 1; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice* device, int ordinal) { *device = ordinal; return ordinal == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE; }
CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
    (void)device;
    strncpy(name, "NVIDIA H200", (size_t)length);
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute which, CUdevice device) {
    (void)device;
    switch (which) {
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
        case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
        case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = 2048; break;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 232448; break;
        case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *value = 52428800; break;
        case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *value = 3201000; break;
        case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *value = 6144; break;
        default: *value = 1; break;
    }
    return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem(size_t* bytes, CUdevice device) { (void)device; *bytes = (size_t)141 << 30; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
    (void)device;
    *context = (CUcontext)&fake_context;
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice device) { (void)device; return CUDA_SUCCESS; }
static CUcontext current;
CUresult cuCtxGetCurrent(CUcontext* context) { *context = current; return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext context) { current = context; return CUDA_SUCCESS; }
CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
CUresult cuModuleLoadData(CUmodule* module, const void* image) { (void)image; *module = (CUmodule)&fake_module; return CUDA_SUCCESS; }
CUresult cuModuleUnload(CUmodule module) { (void)module; return CUDA_SUCCESS; }
CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
    (void)module, (void)name;
    *function = (CUfunction)&fake_function;
    return CUDA_SUCCESS;
}
CUresult cuFuncGetAttribute(int* value, CUfunction_attribute which, CUfunction function) {
    (void)function;
    *value = which == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : which == CU_FUNC_ATTRIBUTE_NUM_REGS ? 32 : 0;
    return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute which, int value) {
    (void)function, (void)which, (void)value;
    return CUDA_SUCCESS;
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction function, int threads, size_t shared) {
    (void)function, (void)shared;
    *blocks = threads > 0 ? 2048 / threads : 1;
    return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream stream, void** params, void** extra) {
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)params, (void)extra;
    return CUDA_SUCCESS;
}
CUresult cuMemAlloc(CUdeviceptr* pointer, size_t bytes) {
    void* p = calloc(1, bytes ? bytes : 1);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    *pointer = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}
CUresult cuMemFree(CUdeviceptr pointer) { free((void*)pointer); return CUDA_SUCCESS; }
CUresult cuMemcpyHtoD(CUdeviceptr to, const void* from, size_t n) { memcpy((void*)to, from, n); return CUDA_SUCCESS; }
CUresult cuMemcpyDtoH(void* to, CUdeviceptr from, size_t n) { memcpy(to, (const void*)from, n); return CUDA_SUCCESS; }
CUresult cuMemcpyDtoDAsync(CUdeviceptr to, CUdeviceptr from, size_t n, CUstream s) { (void)s; memmove((void*)to, (const void*)from, n); return CUDA_SUCCESS; }
CUresult cuMemcpyDtoHAsync(void* to, CUdeviceptr from, size_t n, CUstream s) { (void)s; memcpy(to, (const void*)from, n); return CUDA_SUCCESS; }
CUresult cuMemcpyHtoDAsync(CUdeviceptr to, const void* from, size_t n, CUstream s) { (void)s; memcpy((void*)to, from, n); return CUDA_SUCCESS; }
CUresult cuMemsetD8(CUdeviceptr to, unsigned char v, size_t n) { memset((void*)to, v, n); return CUDA_SUCCESS; }
CUresult cuMemsetD8Async(CUdeviceptr to, unsigned char v, size_t n, CUstream s) { (void)s; memset((void*)to, v, n); return CUDA_SUCCESS; }
CUresult cuMemsetD16Async(CUdeviceptr to, unsigned short v, size_t n, CUstream s) {
    (void)s;
    for (size_t i = 0; i < n; ++i) ((unsigned short*)to)[i] = v;
    return CUDA_SUCCESS;
}
CUresult cuMemsetD32Async(CUdeviceptr to, unsigned v, size_t n, CUstream s) {
    (void)s;
    for (size_t i = 0; i < n; ++i) ((unsigned*)to)[i] = v;
    return CUDA_SUCCESS;
}
CUresult cuStreamCreate(CUstream* stream, unsigned flags) { (void)flags; *stream = (CUstream)malloc(1); return CUDA_SUCCESS; }
CUresult cuStreamDestroy(CUstream stream) { free(stream); return CUDA_SUCCESS; }
CUresult cuStreamSynchronize(CUstream stream) { (void)stream; return CUDA_SUCCESS; }
CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
    (void)stream;
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}
/* Every pointer is memory of device 0, in an allocation of its own 1 GiB. */
CUresult cuPointerGetAttribute(void* value, CUpointer_attribute which, CUdeviceptr pointer) {
    switch (which) {
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int*)value = 0; return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr*)value = pointer; return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t*)value = (size_t)1 << 30; return CUDA_SUCCESS;
        default: return CUDA_ERROR_INVALID_VALUE;
    }
}
CUresult cuEventCreate(CUevent* event, unsigned flags) { (void)flags; *event = (CUevent)malloc(1); return CUDA_SUCCESS; }
CUresult cuEventDestroy(CUevent event) { free(event); return CUDA_SUCCESS; }
CUresult cuEventRecord(CUevent event, CUstream stream) { (void)event, (void)stream; return CUDA_SUCCESS; }
CUresult cuEventSynchronize(CUevent event) { (void)event; return CUDA_SUCCESS; }
CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) { (void)a, (void)b; *ms = 0; return CUDA_SUCCESS; }
