// scratch: lent scratch (lossjit/scratch.hpp) and the capture check (runtime/scratch.hpp).
#include "runtime/scratch.hpp"

#include <fmt/format.h>

#include "cuda/driver.hpp"
#include "lossjit/scratch.hpp"

namespace lossjit {

namespace {
thread_local const ScratchScope* current_scope = nullptr;
}  // namespace

struct LentScratchAccess {
    static LentScratch of(const ScratchScope& scope) { return {scope.data_, scope.bytes_}; }
};

ScratchScope::ScratchScope(void* device_data, std::size_t bytes)
    : data_(device_data), bytes_(device_data ? bytes : 0), previous_(current_scope) {
    current_scope = this;
}

ScratchScope::~ScratchScope() { current_scope = previous_; }

std::optional<LentScratch> lent_scratch() {
    if (!current_scope) return std::nullopt;
    return LentScratchAccess::of(*current_scope);
}

std::size_t reduce_scratch_bytes(int slots) {
    const std::size_t bytes = ReduceScratch(slots).bytes();
    return (bytes + 255) / 256 * 256;
}

std::size_t sum_arrival_doubles(std::size_t arrivals) { return (arrivals + 1) / 2; }

std::size_t sum_scratch_bytes(std::size_t arrivals, std::size_t partials) {
    return sizeof(double) * (sum_arrival_doubles(arrivals) + partials);
}

void refuse_if_capturing(Stream stream, std::string_view what) {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    LOSSJIT_CU(cuStreamIsCapturing(stream, &status));
    if (status != CU_STREAM_CAPTURE_STATUS_NONE)
        throw CaptureError(fmt::format(
            "this call would {} while its stream is being captured into a CUDA graph, which would invalidate the "
            "capture; make the same call once before capturing (a warm-up), so that its kernel is loaded, and lend "
            "scratch memory (lossjit::ScratchScope)",
            what));
}

}  // namespace lossjit
