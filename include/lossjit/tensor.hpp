// Tensor descriptions shared by the library, the CLI and the tests.
//
// A TensorView describes memory the caller owns (host or device); an OutputView is where a map
// writes. (Host tensors that own their memory are tooling: src/tools/host.hpp.)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lossjit {

enum class DType { float32, float64 };

std::string_view to_string(DType dtype);
std::size_t size_of(DType dtype);

using Shape = std::vector<std::int64_t>;

// Number of elements of a shape (1 for a rank-0 shape, 0 if any extent is 0).
std::int64_t element_count(const Shape& shape);

// Row-major (C order) strides, in elements.
std::vector<std::int64_t> contiguous_strides(const Shape& shape);

// "32768x32768", "4096", "scalar" for rank 0 (parse_shape reads all three back).
std::string format_shape(const Shape& shape);

// A view of memory the caller owns. Strides are in ELEMENTS (like torch.Tensor.stride()); empty
// strides mean row-major contiguous.
struct TensorView {
    const void* data = nullptr;
    DType dtype = DType::float32;
    Shape shape;
    std::vector<std::int64_t> strides;

    static TensorView contiguous(const void* data, Shape shape, DType dtype = DType::float32) {
        return TensorView{data, dtype, std::move(shape), {}};
    }
    std::int64_t numel() const { return element_count(shape); }
    std::vector<std::int64_t> effective_strides() const {
        return strides.empty() ? contiguous_strides(shape) : strides;
    }
};

// Where a map writes its result: like TensorView, but writable.
struct OutputView {
    void* data = nullptr;
    DType dtype = DType::float32;
    Shape shape;
    std::vector<std::int64_t> strides;  // in elements; empty = contiguous

    static OutputView contiguous(void* data, Shape shape, DType dtype = DType::float32) {
        return OutputView{data, dtype, std::move(shape), {}};
    }
    std::int64_t numel() const { return element_count(shape); }
};

}  // namespace lossjit
