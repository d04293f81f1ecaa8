// Host mirrors of the kernel parameter structs in templates/prelude.cuh. The two must agree field
// for field; sizes are asserted here and every struct is exercised by the GPU tests.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline.hpp"

namespace lossjit::abi {

struct Extents {
    long long count;
    long long dims[kMaxRank];
};
struct Output {
    void* ptr;
    long long strides[kMaxRank];
};
struct ReduceOut {
    double* partials;
    unsigned int* arrivals;
    void* result;  // one element of the kernel's result dtype
    double scale;  // 1 / divisor
};

struct RowsOut {
    double* partials;  // [total][block]
    unsigned int* arrivals;
    void* result;
    double scale[kMaxTotals];  // 1 / divisor, per total
};

struct SumScratch {
    double* partials;
    unsigned int* arrivals;
    long long chunk_rows;
    long long batch_rows;
    int chunks;
    int strip_blocks;
    int whole_rows;
};

// lj::Inputs<N>: N pointers, then N rows of kMaxRank strides (N >= 1 slots even when N is 0).
class Inputs {
public:
    explicit Inputs(std::size_t n) : slots_(n > 0 ? n : 1), bytes_(slots_ * (1 + kMaxRank), 0) {}
    void set_pointer(std::size_t k, const void* p) { bytes_[k] = reinterpret_cast<std::int64_t>(p); }
    void set_strides(std::size_t k, const std::int64_t* strides) {
        for (int d = 0; d < kMaxRank; ++d) bytes_[slots_ + k * kMaxRank + static_cast<std::size_t>(d)] = strides[d];
    }
    void* data() { return bytes_.data(); }

private:
    std::size_t slots_;
    std::vector<std::int64_t> bytes_;
};

static_assert(sizeof(Extents) == 72 && sizeof(Output) == 72 && sizeof(ReduceOut) == 32 && sizeof(SumScratch) == 48 &&
              sizeof(RowsOut) == 88);
static_assert(sizeof(long long) == 8 && sizeof(void*) == 8);

}  // namespace lossjit::abi
