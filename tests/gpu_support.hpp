// What the GPU test files of typed data share: whether there is a device, and a generated host
// tensor with its copy on the device.
#pragma once

#include <cstdint>
#include <string>

#include "lossjit/lossjit.hpp"
#include "tools/host.hpp"

namespace lossjit_test {

inline bool have_typed_gpu() {
    static const bool available = lossjit::cuda_available();
    return available;
}

// The device's compute capability x 10 (90 for sm_90); 0 without a device.
inline int device_arch() {
    static const int arch = [] {
        if (!have_typed_gpu()) return 0;
        const auto info = lossjit::device_info();
        return info.major * 10 + info.minor;
    }();
    return arch;
}
inline int device_multiprocessors() {
    static const int sms = have_typed_gpu() ? lossjit::device_info().multiprocessors : 0;
    return sms;
}

// A host tensor of `dtype` from a generator spec, and its copy on the device (a few spare bytes so
// that an offset view stays inside the allocation).
struct Typed {
    lossjit::HostTensor host;
    lossjit::DeviceBuffer device;
    Typed(const std::string& spec, lossjit::DType dtype, std::uint64_t seed)
        : host(lossjit::generate(lossjit::parse_generator(spec), seed).converted(dtype)), device(host.bytes.size() + 64) {
        device.upload(host.bytes.data(), host.bytes.size());
    }
    lossjit::TensorView view() const { return lossjit::TensorView{device.data(), host.dtype, host.shape, {}}; }
};

}  // namespace lossjit_test
