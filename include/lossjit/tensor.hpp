// Tensor descriptions shared by the library, the CLI and the tests.
//
// A TensorView describes memory the caller owns (host or device); an OutputView is where a map
// writes. (Host tensors that own their memory are tooling: src/tools/host.hpp.)
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lossjit/dtype.hpp"

namespace lossjit {


// A shape that owns its extents (outermost first): results, host tensors, gradients.
using Shape = std::vector<std::int64_t>;

// Number of elements of a shape (1 for a rank-0 shape, 0 if any extent is 0).
std::int64_t element_count(std::span<const std::int64_t> shape);
inline std::int64_t element_count(std::initializer_list<std::int64_t> shape) {
    return element_count(std::span(shape.begin(), shape.size()));
}

// Row-major (C order) strides, in elements.
std::vector<std::int64_t> contiguous_strides(std::span<const std::int64_t> shape);

// "32768x32768", "4096", "scalar" for rank 0 (parse_shape reads all three back).
std::string format_shape(std::span<const std::int64_t> shape);

// The most dimensions a view has. Kernels take at most 8 once lossjit has merged the dimensions
// that every operand walks alike; a view may have more before that.
inline constexpr std::size_t kMaxViewRank = 16;

// The extents or strides of a view: up to kMaxViewRank numbers held in place, so that making,
// copying and passing views never allocates. Made from a Shape or a braced list ({4096, 4096});
// more than kMaxViewRank numbers are a UsageError.
class Dims {
public:
    Dims() = default;
    Dims(std::initializer_list<std::int64_t> values) { assign(values.begin(), values.size()); }
    Dims(const Shape& values) { assign(values.data(), values.size()); }  // NOLINT: a Shape is a view's shape
    explicit Dims(std::span<const std::int64_t> values) { assign(values.data(), values.size()); }

    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    const std::int64_t* data() const { return values_.data(); }
    std::int64_t* data() { return values_.data(); }
    const std::int64_t* begin() const { return values_.data(); }
    const std::int64_t* end() const { return values_.data() + size_; }
    std::int64_t* begin() { return values_.data(); }
    std::int64_t* end() { return values_.data() + size_; }
    std::int64_t operator[](std::size_t i) const { return values_[i]; }
    std::int64_t& operator[](std::size_t i) { return values_[i]; }
    Shape to_vector() const { return Shape(begin(), end()); }

    friend bool operator==(const Dims& a, const Dims& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
    friend bool operator==(const Dims& a, const Shape& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

private:
    void assign(const std::int64_t* values, std::size_t count);  // UsageError past kMaxViewRank
    std::array<std::int64_t, kMaxViewRank> values_{};
    std::size_t size_ = 0;
};

// A view of memory the caller owns. Strides are in ELEMENTS (like torch.Tensor.stride()); empty
// strides mean row-major contiguous.
struct TensorView {
    const void* data = nullptr;
    DType dtype = DType::float32;
    Dims shape;
    Dims strides;

    static TensorView contiguous(const void* data, Dims shape, DType dtype = DType::float32) {
        return TensorView{data, dtype, shape, {}};
    }
    std::int64_t numel() const { return element_count(shape); }
    Dims effective_strides() const { return strides.empty() ? Dims(contiguous_strides(shape)) : strides; }
};

// Where a map writes its result: like TensorView, but writable.
struct OutputView {
    void* data = nullptr;
    DType dtype = DType::float32;
    Dims shape;
    Dims strides;  // in elements; empty = contiguous

    static OutputView contiguous(void* data, Dims shape, DType dtype = DType::float32) {
        return OutputView{data, dtype, shape, {}};
    }
    std::int64_t numel() const { return element_count(shape); }
};

}  // namespace lossjit
