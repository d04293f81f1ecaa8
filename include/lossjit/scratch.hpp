// Scratch memory a caller lends lossjit, so that a call allocates no device memory of its own.
//
// A reduction needs a little device scratch (one float64 partial sum per resident block, arrival
// counters) and a gradient whose input is broadcast needs partial sums of its own. By default a Loss
// allocates them itself, once per stream, with cuMemAlloc. A framework with its own allocator (the
// PyTorch op: torch's caching allocator; CUDA graph capture, where cuMemAlloc is not allowed)
// lends a buffer instead:
//
//   lossjit::ScratchScope scratch(buffer, bytes);   // zero-filled before its first use
//   loss.evaluate(inputs, result, stream);          // uses `buffer`, allocates nothing
//
// While a ScratchScope lives, every GPU call this thread makes uses its buffer. The buffer must be
// device memory of the loss's device, zero-filled before the first call that uses it, and used by
// one stream at a time (kernels leave the arrival counters at zero for the next call, so it is
// never cleared again). A call that needs more throws ScratchTooSmall with the size it needs;
// Loss::scratch_bytes() is what a reduction or a gradient of no broadcast input needs.
#pragma once

#include <cstddef>

namespace lossjit {

class ScratchScope {
public:
    ScratchScope(void* device_data, std::size_t bytes);
    ~ScratchScope();  // restores the scope it replaced (scopes nest)
    ScratchScope(const ScratchScope&) = delete;
    ScratchScope& operator=(const ScratchScope&) = delete;

private:
    void* data_;
    std::size_t bytes_;
    const ScratchScope* previous_;
    friend struct LentScratchAccess;
};

}  // namespace lossjit
