// Host mirrors of the kernel parameter structs in templates/prelude.cuh. The two must agree field
// for field; the sizes are asserted here and the GPU tests exercise every struct.
#pragma once

#include <cstdint>

#include "pipeline.hpp"

namespace lossjit::abi {

struct Extents {
    long long count;
    long long dims[kMaxRank];
};
struct Strided {
    const void* ptr;
    long long strides[kMaxRank];
};
struct ReduceOut {
    double* partials;
    unsigned int* arrivals;
    float* result;
    double divisor;
};

static_assert(sizeof(Extents) == 72 && sizeof(Strided) == 72 && sizeof(ReduceOut) == 32);
static_assert(sizeof(long long) == 8 && sizeof(void*) == 8);

}  // namespace lossjit::abi
