// scratch: the device scratch a caller lends (lossjit/scratch.hpp) and how a call lays it out, and
// the check that keeps a call from compiling, loading or allocating while its stream is captured.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "lossjit/lossjit.hpp"
#include "../templates/abi.cuh"

namespace lossjit {

// The buffer of this thread's innermost ScratchScope, if any.
struct LentScratch {
    void* data = nullptr;
    std::size_t bytes = 0;
};
std::optional<LentScratch> lent_scratch();

// A reduction's scratch, the one layout the stream's Workspace and lent scratch share: `slots`
// float64 partials (one per block), then the arrival counter, the float32 results where the caller
// gives no place for them (one per result, lj::kMaxResults), a Composite program's float64
// gradient factors (one per reduction differentiated: its own kernel's results, which the gradient
// kernel reads), and the float64
// values of a program's statistics (ir::Program::statistics: each its own kernel's result, which
// the later kernels read).
struct ReduceScratch {
    explicit ReduceScratch(int slots) : slots(static_cast<std::size_t>(slots)) {}
    std::size_t slots;
    std::size_t arrivals_offset() const { return sizeof(double) * slots; }
    std::size_t result_offset() const { return arrivals_offset() + 16; }
    std::size_t factor_offset() const { return result_offset() + (sizeof(float) * lj::kMaxResults + 7) / 8 * 8; }
    std::size_t statistics_offset() const { return factor_offset() + sizeof(double) * lj::kMaxTotals; }
    std::size_t bytes() const { return statistics_offset() + sizeof(double) * lj::kMaxStatistics; }
    double* partials(void* base) const { return static_cast<double*>(base); }
    unsigned int* arrivals(void* base) const { return reinterpret_cast<unsigned int*>(at(base, arrivals_offset())); }
    float* result(void* base) const { return reinterpret_cast<float*>(at(base, result_offset())); }
    double* factor(void* base) const { return reinterpret_cast<double*>(at(base, factor_offset())); }
    double* statistics(void* base) const { return reinterpret_cast<double*>(at(base, statistics_offset())); }

private:
    static unsigned char* at(void* base, std::size_t offset) { return static_cast<unsigned char*>(base) + offset; }
};

// Lent scratch is laid out as a reduction's area (ReduceScratch), then, for summed gradients
// (lj::SumScratch), their arrival counters and partial sums. Byte sizes of the two areas (the
// first rounded up to 256 bytes, so that the second is aligned for any access):
std::size_t reduce_scratch_bytes(int slots);
std::size_t sum_scratch_bytes(std::size_t arrivals, std::size_t partials);
// Where the partial sums start in the second area, in doubles after its start: the counters are
// rounded up to whole doubles so that the partials are aligned.
std::size_t sum_arrival_doubles(std::size_t arrivals);

// CaptureError if `stream` is being captured into a CUDA graph; `what` says what the call would
// have done ("compile and load the kernel for a new layout").
void refuse_if_capturing(Stream stream, std::string_view what);

}  // namespace lossjit
