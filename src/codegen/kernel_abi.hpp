// The kernel ABI on the host: the kernels' own parameter structs (templates/abi.cuh, compiled here
// as host C++), and the buffers for the two whose size a kernel fixes at compile time
// (lj::Inputs<N>, lj::Grads<G>), laid out as those templates are, which the asserts below check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../../templates/abi.cuh"
#include "lossjit/dtype.hpp"

namespace lossjit::abi {

using Extents = lj::Extents;
using Output = lj::Output;
using ReduceOut = lj::ReduceOut;
using RowsOut = lj::RowsOut;
using SumScratch = lj::SumScratch;

// lj::Inputs<N>: N pointers, then N rows of kMaxRank strides (N >= 1 slots even when N is 0).
class Inputs {
public:
    explicit Inputs(std::size_t n) : slots_(n > 0 ? n : 1), bytes_(slots_ * (1 + lj::kMaxRank), 0) {}
    void set_pointer(std::size_t k, const void* p) { bytes_[k] = reinterpret_cast<std::int64_t>(p); }
    void set_strides(std::size_t k, const std::int64_t* strides) {
        for (int d = 0; d < lj::kMaxRank; ++d) bytes_[slots_ + k * lj::kMaxRank + static_cast<std::size_t>(d)] = strides[d];
    }
    void* data() { return bytes_.data(); }

private:
    std::size_t slots_;
    std::vector<std::int64_t> bytes_;
};

// lj::Grads<G> as 64-bit slots: G pointers, kMaxRank strides, the upstream and factor pointers, the
// kMaxTotals scales (doubles' bits).
constexpr std::size_t grads_slots(std::size_t g) { return g + lj::kMaxRank + 2 + lj::kMaxTotals; }
constexpr std::size_t grads_strides_slot(std::size_t g) { return g; }
constexpr std::size_t grads_upstream_slot(std::size_t g) { return g + lj::kMaxRank; }
constexpr std::size_t grads_factor_slot(std::size_t g) { return g + lj::kMaxRank + 1; }
constexpr std::size_t grads_scale_slot(std::size_t g) { return g + lj::kMaxRank + 2; }

// A dtype as a kernel's run-time argument (lj::kFloat32, ...).
constexpr int kernel_dtype_code(DType dtype) { return static_cast<int>(dtype); }

namespace check {
static_assert(kernel_dtype_code(DType::float32) == lj::kFloat32 && kernel_dtype_code(DType::float64) == lj::kFloat64 &&
                  kernel_dtype_code(DType::bfloat16) == lj::kBFloat16 && kernel_dtype_code(DType::float16) == lj::kFloat16 &&
                  kernel_dtype_code(DType::int32) == lj::kInt32 && kernel_dtype_code(DType::int64) == lj::kInt64 &&
                  kernel_dtype_code(DType::uint8) == lj::kUInt8 && kernel_dtype_code(DType::boolean) == lj::kBool,
              "the kernels' dtype numbers are lossjit::DType's");
template <int N>
constexpr bool inputs_match() {
    return sizeof(lj::Inputs<N>) == 8 * static_cast<std::size_t>(N) * (1 + lj::kMaxRank) &&
           offsetof(lj::Inputs<N>, strides) == 8 * static_cast<std::size_t>(N);
}
template <int G>
constexpr bool grads_match() {
    constexpr auto g = static_cast<std::size_t>(G);
    return sizeof(lj::Grads<G>) == 8 * grads_slots(g) && offsetof(lj::Grads<G>, strides) == 8 * grads_strides_slot(g) &&
           offsetof(lj::Grads<G>, upstream) == 8 * grads_upstream_slot(g) &&
           offsetof(lj::Grads<G>, factor) == 8 * grads_factor_slot(g) &&
           offsetof(lj::Grads<G>, scale) == 8 * grads_scale_slot(g);
}
static_assert(inputs_match<1>() && inputs_match<2>() && inputs_match<7>(), "Inputs: the host buffer's layout");
static_assert(grads_match<1>() && grads_match<2>() && grads_match<5>(), "Grads: the host buffer's layout");
static_assert(sizeof(void*) == 8 && sizeof(long long) == 8 && sizeof(double) == 8, "64-bit slots");
}  // namespace check

}  // namespace lossjit::abi
