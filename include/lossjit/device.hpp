// The few device facilities a caller needs without writing CUDA: is there a GPU, what is it, and
// device memory to hold inputs and outputs. Everything goes through the CUDA driver, loaded at run
// time, so programs using lossjit start (and can use the CPU reference) where there is no driver.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace lossjit {

// True when libcuda.so.1 loads, cuInit succeeds and there is at least one device. Otherwise false,
// and `reason` (if given) says why, e.g. "no CUDA driver (libcuda.so.1: cannot open shared object file)".
bool cuda_available(std::string* reason = nullptr);

struct DeviceInfo {
    int ordinal = 0;
    std::string name;
    int major = 0, minor = 0;     // compute capability
    int multiprocessors = 0;
    std::size_t memory_bytes = 0;
    std::string arch() const { return "sm_" + std::to_string(major * 10 + minor); }
};
DeviceInfo device_info(int ordinal = 0);

// Device memory in the device's primary context (the one the CUDA runtime and PyTorch use).
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(std::size_t bytes, int device = 0);
    void* data() const;
    std::size_t size() const;
    int device() const;
    void upload(const void* host, std::size_t bytes, std::size_t offset = 0);
    void download(void* host, std::size_t bytes, std::size_t offset = 0) const;
    void fill_bytes(unsigned char value);  // e.g. 0xFF to poison: every float becomes NaN

private:
    struct Impl;
    std::shared_ptr<Impl> impl_;
};

// Waits for all work on the device (all streams).
void synchronize(int device = 0);

}  // namespace lossjit
