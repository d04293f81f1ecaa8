// resources: what a compiled kernel asks of each thread (registers, local memory), read from its
// CUBIN, so that tools and tests see it without a GPU.
#pragma once

#include <optional>
#include <string_view>

#include "jit/compile.hpp"

namespace lossjit {

struct KernelResources {
    int registers = 0;    // per thread, as ptxas allocated them (CU_FUNC_ATTRIBUTE_NUM_REGS)
    int local_bytes = 0;  // the stack frame per thread: spills and local arrays (..._LOCAL_SIZE_BYTES)
    friend bool operator==(const KernelResources&, const KernelResources&) = default;
};

// The resources of `function` in a CUBIN. Empty for PTX (ptxas has not run), and for an image
// whose ELF or whose per-function attributes (the `.nv.info` section ptxas writes: registers and
// frame size by symbol) are not laid out as CUDA 11-13 lay them out: then nothing is said rather
// than a wrong number.
std::optional<KernelResources> read_resources(const KernelImage& image, std::string_view function = "lossjit_kernel");

}  // namespace lossjit
