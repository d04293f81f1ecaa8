// validate: what a caller hands a Loss, checked before anything reaches the GPU: the number of
// views, their dtype, null and misaligned pointers, the shapes of gradients and of a map's upstream
// gradient, and (through the driver) that pointers are memory of the loss's device. A mistake here
// is a UsageError naming the argument; a bad pointer that got through would fault inside a kernel
// and poison the context instead.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "lossjit/tensor.hpp"
#include "pipeline.hpp"

namespace lossjit {

// UsageError unless there is one view per name.
void check_count(std::span<const std::string> names, std::size_t count);

// The shapes of `inputs` under `names`, for planning a layout (check_count first).
std::vector<OperandShape> operand_shapes(std::span<const std::string> names, std::span<const TensorView> inputs);

// A view's dtype and pointer: a dtype lossjit knows (a floating one if lossjit writes it: a map's
// output, a result, a gradient), not null unless it is empty, aligned to its element size. `name`
// is a string, or a callable making one: it is called only for an error message, so a per-call
// check formats nothing.
template <class Name>
void check_data(const Name& name, DType dtype, const void* data, std::int64_t numel, bool written = false) {
    auto text = [&]() -> std::string {
        if constexpr (std::is_invocable_v<const Name&>) return name();
        else return std::string(name);
    };
    // A DType outside the enum (a cast, a stale ABI) is the caller's mistake, not an internal one.
    if (static_cast<std::size_t>(dtype) >= kDTypeCount)
        throw UsageError(fmt::format("'{}' has an unknown dtype ({})", text(), static_cast<int>(dtype)));
    if (written && !is_floating(dtype))
        throw UsageError(fmt::format("'{}' is {}; lossjit writes float32, float64, bfloat16 or float16", text(),
                                     to_string(dtype)));
    if (numel > 0 && data == nullptr) throw UsageError(fmt::format("'{}' has no data (a null pointer)", text()));
    if (reinterpret_cast<std::uintptr_t>(data) % size_of(dtype) != 0)
        throw UsageError(fmt::format("'{}' is not aligned to {} bytes (address {}): {} data must be", text(),
                                     size_of(dtype), data, to_string(dtype)));
}

// UsageError unless an input of this dtype can have a gradient (a floating one; torch refuses
// requires_grad on integer tensors too).
void check_differentiable(const std::string& name, DType dtype);

// The count, then every view's data (check_data), named after `names`.
void check_views(std::span<const std::string> names, std::span<const TensorView> views);
// The inputs a program uses as indices (x[y]) are integers (bool too: 0 or 1).
void check_indices(const ir::Program& program, std::span<const TensorView> views);

// Row-major contiguous: no strides given, or the row-major ones (extent-1 dimensions may have any
// stride, as torch gives them).
bool is_dense(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);

// The gradients' views of value_and_grad() and grad(): one per input in `wrt`, each a contiguous
// tensor of a floating dtype and its input's own shape (`inputs[slots[k]]`), whose input is of a
// floating dtype too (an integer input has no gradient); an input broadcast to `shape` must itself
// be contiguous.
void check_gradients(std::span<const std::string> wrt, std::span<const int> slots, std::span<const OutputView> grads,
                     std::span<const TensorView> inputs, const Shape& shape);

// Which allocations were found to be memory of the device, by argument position, so that a training
// loop asks the driver once per buffer, not once per call: a pointer inside the allocation last
// seen at its position is not asked about again (a caching allocator's fresh views of one block,
// a result written to a new slot of a buffer each call).
class DevicePointers {
public:
    explicit DevicePointers(int device) : device_(device) {}
    // Starts a call that checks up to `positions` arguments, in the same order every time.
    void begin(std::size_t positions) {
        if (seen_.size() < positions) seen_.resize(positions);
        next_ = 0;
    }
    // UsageError unless `data` is memory of the device (asked only for a pointer outside the
    // allocation seen at this position before; `empty` views are not asked about). `name` makes the
    // message's name.
    template <class Name>
    void check(const Name& name, const void* data, bool empty) {
        Range& seen = seen_[next_++];
        const auto address = reinterpret_cast<std::uintptr_t>(data);
        if (empty || (address >= seen.begin && address < seen.end)) return;
        seen = check_pointer(name(), data);
    }

private:
    struct Range {
        std::uintptr_t begin = 0, end = 0;
    };
    Range check_pointer(const std::string& name, const void* data) const;  // the allocation holding `data`
    int device_;
    std::vector<Range> seen_;
    std::size_t next_ = 0;
};

}  // namespace lossjit
