// dlpack: the C ABI on DLPack tensors (include/lossjit/lossjit_dlpack.h), by converting each
// DLTensor to a lossjit_view and calling the view functions.
#include <string>
#include <vector>

#include "capi/capi.hpp"
#include "lossjit/lossjit_dlpack.h"

namespace lossjit {
namespace {

// kDLBool (code 6) arrived in DLPack 0.8; torch exports bool tensors with it. Debian's header is 0.6.
constexpr int kDLPackBool = 6;

DType dtype_of(const DLDataType& t) {
    if (t.lanes != 1)
        throw UsageError("a DLPack tensor of " + std::to_string(t.lanes) + " lanes; lossjit reads one lane per element");
    switch (t.code) {
    case kDLFloat:
        if (t.bits == 32) return DType::float32;
        if (t.bits == 64) return DType::float64;
        if (t.bits == 16) return DType::float16;
        break;
    case kDLBfloat:
        if (t.bits == 16) return DType::bfloat16;
        break;
    case kDLInt:
        if (t.bits == 32) return DType::int32;
        if (t.bits == 64) return DType::int64;
        break;
    case kDLUInt:
        if (t.bits == 8) return DType::uint8;
        break;
    case kDLPackBool:
        if (t.bits == 8) return DType::boolean;
        break;
    default:
        break;
    }
    throw UsageError("a DLPack tensor of type code " + std::to_string(t.code) + " with " + std::to_string(t.bits) +
                     " bits; lossjit reads float16/32/64, bfloat16, int32/64, uint8 and bool");
}

// The view and device of `tensor` (-1: host memory).
lossjit_view view_of(const DLTensor* tensor, int* device) {
    if (!tensor) throw UsageError("a DLTensor pointer is NULL");
    lossjit_view view{};
    view.dtype = static_cast<int32_t>(dtype_of(tensor->dtype));
    view.ndim = tensor->ndim;
    view.shape = tensor->shape;
    view.strides = tensor->strides;
    view.data = static_cast<char*>(tensor->data) + tensor->byte_offset;
    switch (tensor->device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
        *device = -1;
        break;
    case kDLCUDA:
        *device = tensor->device.device_id;
        break;
    default:
        throw UsageError("a DLPack tensor on device type " + std::to_string(tensor->device.device_type) +
                         "; lossjit reads CUDA (kDLCUDA) and host memory");
    }
    return view;
}

// The views of `inputs` and `extra` (NULL: none), and the one device they share.
struct Converted {
    std::vector<lossjit_view> views;
    lossjit_view extra{};
    int device = -1;
};
Converted convert(const DLTensor* const* inputs, std::size_t count, const DLTensor* extra, const char* extra_name) {
    if (count > 0 && !inputs) throw UsageError("the inputs are NULL but their count is " + std::to_string(count));
    Converted out;
    bool first = true;
    auto take = [&](const DLTensor* t, const std::string& name) {
        int device = -1;
        lossjit_view v = view_of(t, &device);
        if (first) out.device = device, first = false;
        else if (device != out.device)
            throw UsageError(name + " is on " + (device < 0 ? std::string("the host") : "CUDA device " + std::to_string(device)) +
                             ", the other tensors on " +
                             (out.device < 0 ? std::string("the host") : "CUDA device " + std::to_string(out.device)));
        return v;
    };
    for (std::size_t i = 0; i < count; ++i) out.views.push_back(take(inputs[i], "input " + std::to_string(i)));
    if (extra) out.extra = take(extra, extra_name);
    return out;
}

void require_cuda(const Converted& c, const char* call) {
    if (c.device < 0)
        throw UsageError(std::string(call) + " runs on the GPU, but the tensors are in host memory "
                         "(lossjit_reference_dlpack evaluates them on the CPU)");
}

}  // namespace
}  // namespace lossjit

using namespace lossjit;

extern "C" {

lossjit_status lossjit_view_from_dlpack(const DLTensor* tensor, lossjit_view* view, int32_t* device) {
    return capi::guard([&] {
        if (!view) throw UsageError("lossjit_view_from_dlpack needs somewhere to put the view (view is NULL)");
        int d = -1;
        *view = view_of(tensor, &d);
        if (device) *device = d;
    });
}

lossjit_status lossjit_evaluate_dlpack(lossjit_loss* loss, const DLTensor* const* inputs, size_t count,
                                       const DLTensor* result, void* stream) {
    Converted c;
    const lossjit_status status = capi::guard([&] {
        if (!result) throw UsageError("lossjit_evaluate_dlpack needs a result tensor (result is NULL)");
        c = convert(inputs, count, result, "the result");
        require_cuda(c, "lossjit_evaluate_dlpack");
    });
    if (status != LOSSJIT_OK) return status;
    const lossjit_exec exec{stream, c.device, nullptr, 0};
    return lossjit_evaluate(loss, c.views.data(), c.views.size(), &c.extra, &exec);
}

lossjit_status lossjit_map_dlpack(lossjit_loss* loss, const DLTensor* const* inputs, size_t count,
                                  const DLTensor* output, void* stream) {
    Converted c;
    const lossjit_status status = capi::guard([&] {
        if (!output) throw UsageError("lossjit_map_dlpack needs an output tensor (output is NULL)");
        c = convert(inputs, count, output, "the output");
        require_cuda(c, "lossjit_map_dlpack");
    });
    if (status != LOSSJIT_OK) return status;
    const lossjit_exec exec{stream, c.device, nullptr, 0};
    return lossjit_map(loss, c.views.data(), c.views.size(), &c.extra, &exec);
}

lossjit_status lossjit_reference_dlpack(const lossjit_loss* loss, const DLTensor* const* inputs, size_t count,
                                        double* value) {
    Converted c;
    const lossjit_status status = capi::guard([&] {
        c = convert(inputs, count, nullptr, "");
        if (count > 0 && c.device >= 0)
            throw UsageError("lossjit_reference_dlpack evaluates on the CPU, but the tensors are on CUDA device " +
                             std::to_string(c.device));
    });
    if (status != LOSSJIT_OK) return status;
    return lossjit_reference(loss, c.views.data(), c.views.size(), value);
}

}  // extern "C"
