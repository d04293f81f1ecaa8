// What the GPU test files of typed data share: whether there is a device, and a generated host
// tensor with its copy on the device.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>
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

// The largest magnitude of `want`, and the largest difference of `got` from it.
struct Spread {
    double largest = 0;
    double worst = 0;
};
// Equal values (two nans, two infinities of a sign) differ by 0; a nan against a number, by infinity
// (std::max alone would pass a nan by).
inline Spread spread(std::span<const double> got, std::span<const double> want) {
    Spread s;
    for (double w : want) s.largest = std::max(s.largest, std::fabs(w));
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double g = got[i], w = want[i];
        const double d = g == w || (std::isnan(g) && std::isnan(w)) ? 0.0 : std::fabs(g - w);
        s.worst = std::isnan(d) ? INFINITY : std::max(s.worst, d);
    }
    return s;
}
inline Spread spread(const lossjit::HostTensor& got, std::span<const double> want) {
    std::vector<double> values;
    for (std::int64_t i = 0; i < got.numel(); ++i) values.push_back(got.at(i));
    return spread(values, want);
}

}  // namespace lossjit_test
