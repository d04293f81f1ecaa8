#include "lossjit/tensor.hpp"

#include <string>

#include "lossjit/errors.hpp"

namespace lossjit {

namespace {

// Far below INT64_MAX so that byte counts (up to 8 bytes per element) and index arithmetic in
// generated kernels cannot overflow either.
constexpr std::int64_t kMaxElements = std::int64_t{1} << 62;

}  // namespace

std::int64_t element_count(std::span<const std::int64_t> shape) {
    bool empty = false;
    for (std::int64_t extent : shape) {
        if (extent < 0) {
            throw UsageError("shape " + format_shape(shape) + " has a negative extent");
        }
        empty = empty || extent == 0;
    }
    // A zero extent makes the product 0 however large the other extents are, and checking it first
    // keeps the overflow test below from rejecting such shapes.
    if (empty) return 0;
    std::int64_t count = 1;
    for (std::int64_t extent : shape) {
        if (extent > kMaxElements / count) {
            throw UsageError("shape " + format_shape(shape) + " has more than 2^62 elements");
        }
        count *= extent;
    }
    return count;
}

std::vector<std::int64_t> contiguous_strides(std::span<const std::int64_t> shape) {
    std::vector<std::int64_t> strides(shape.size());
    std::int64_t stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        strides[i] = stride;
        // Zero extents count as 1, as in torch, so an empty tensor still gets distinct strides.
        std::int64_t extent = shape[i] > 0 ? shape[i] : 1;
        if (i > 0 && extent > kMaxElements / stride) {
            throw UsageError("shape " + format_shape(shape) + " is too large for 64-bit strides");
        }
        stride *= extent;
    }
    return strides;
}

std::string format_shape(std::span<const std::int64_t> shape) {
    // "scalar" rather than "" so error messages stay readable and parse_shape can read it back.
    if (shape.empty()) return "scalar";
    std::string out;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) out += 'x';
        out += std::to_string(shape[i]);
    }
    return out;
}

void Dims::assign(const std::int64_t* values, std::size_t count) {
    if (count > kMaxViewRank)
        throw UsageError("a view has " + std::to_string(count) + " dimensions; lossjit takes at most " +
                         std::to_string(kMaxViewRank));
    std::copy(values, values + count, values_.begin());
    size_ = count;
}

}  // namespace lossjit
