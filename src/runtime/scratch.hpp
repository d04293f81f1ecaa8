// scratch: the device scratch a caller lends (lossjit/scratch.hpp) and how a call lays it out, and
// the check that keeps a call from compiling, loading or allocating while its stream is captured.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "lossjit/lossjit.hpp"

namespace lossjit {

// The buffer of this thread's innermost ScratchScope, if any.
struct LentScratch {
    void* data = nullptr;
    std::size_t bytes = 0;
};
std::optional<LentScratch> lent_scratch();

// Lent scratch is laid out as a reduction's area (`slots` float64 partials, arrival counter,
// result; the layout Workspace uses), then, for summed gradients (lj::SumScratch), their arrival
// counters and partial sums. Byte sizes of the two areas:
std::size_t reduce_scratch_bytes(int slots);
std::size_t sum_scratch_bytes(std::size_t arrivals, std::size_t partials);
// Where the partial sums start in the second area, in doubles after its start: the counters are
// rounded up to whole doubles so that the partials are aligned.
std::size_t sum_arrival_doubles(std::size_t arrivals);

// CaptureError if `stream` is being captured into a CUDA graph; `what` says what the call would
// have done ("compile and load the kernel for a new layout").
void refuse_if_capturing(Stream stream, std::string_view what);

}  // namespace lossjit
