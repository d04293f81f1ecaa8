// HostTensor: bytes of one dtype, read and written element by element through the conversions of
// include/lossjit/dtype.hpp, so the tooling rounds exactly as the library's loads and stores do.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "tools/host.hpp"

namespace lossjit {
namespace {

// Bytes for `count` elements of `dtype`, or UsageError: element_count allows 2^62 elements, which
// as bytes of an 8-byte type would not fit in 64 bits.
std::size_t byte_count(const Shape& shape, DType dtype) {
    const auto count = static_cast<std::uint64_t>(element_count(shape));
    const std::size_t size = size_of(dtype);
    if (count > std::numeric_limits<std::size_t>::max() / size)
        throw UsageError(fmt::format("a {} {} tensor does not fit in memory", format_shape(shape), to_string(dtype)));
    return static_cast<std::size_t>(count) * size;
}

// The integers an integer dtype holds: [min, max] for messages, and as doubles [lowest, limit)
// for the check. The upper end is exclusive so that int64's can be 2^63, exact as a double (2^63 - 1
// is not).
struct IntegerRange {
    std::int64_t min, max;
    double lowest, limit;
};

IntegerRange integer_range(DType dtype) {
    constexpr auto i32 = std::numeric_limits<std::int32_t>{};
    constexpr auto i64 = std::numeric_limits<std::int64_t>{};
    switch (dtype) {
        case DType::int32: return {i32.min(), i32.max(), -0x1p31, 0x1p31};
        case DType::int64: return {i64.min(), i64.max(), -0x1p63, 0x1p63};
        case DType::uint8: return {0, 255, 0, 256};
        default: throw InternalError("integer_range: " + std::string(to_string(dtype)) + " is not an integer dtype");
    }
}

template <class T>
void put(unsigned char* data, std::int64_t i, T value) {
    std::memcpy(data + static_cast<std::size_t>(i) * sizeof(T), &value, sizeof(T));
}

}  // namespace

HostTensor::HostTensor(Shape shape_, DType dtype_) : shape(std::move(shape_)), dtype(dtype_) {
    const std::size_t n = byte_count(shape, dtype);
    try {
        bytes.resize(n);
    } catch (const std::bad_alloc&) {
        throw UsageError(fmt::format("cannot allocate memory for a {} {} tensor", format_shape(shape), to_string(dtype)));
    } catch (const std::length_error&) {
        throw UsageError(fmt::format("cannot allocate memory for a {} {} tensor", format_shape(shape), to_string(dtype)));
    }
}

HostTensor HostTensor::from_floats(Shape shape, std::vector<float> values) {
    HostTensor t;
    if (static_cast<std::uint64_t>(element_count(shape)) != values.size())
        throw UsageError(fmt::format("shape {} has {} elements but {} values were given", format_shape(shape),
                                     element_count(shape), values.size()));
    t.shape = std::move(shape);
    t.bytes.resize(values.size() * sizeof(float));
    if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    return t;
}

double HostTensor::at(std::int64_t i) const {
    if (i < 0 || static_cast<std::uint64_t>(i) >= bytes.size() / size_of(dtype))
        throw InternalError(fmt::format("HostTensor::at({}) outside a tensor of {} bytes", i, bytes.size()));
    // Integers widen as a float64 program widens them: exactly, but for int64 beyond 2^53.
    return load_as_double(bytes.data(), dtype, i, DType::float64);
}

void HostTensor::set(std::int64_t i, double v) {
    if (i < 0 || static_cast<std::uint64_t>(i) >= bytes.size() / size_of(dtype))
        throw InternalError(fmt::format("HostTensor::set({}) outside a tensor of {} bytes", i, bytes.size()));
    unsigned char* data = bytes.data();
    if (is_floating(dtype)) return store_from_double(data, dtype, i, v);
    // NaN is not 0, so it is true, as torch.tensor(float('nan')).bool() is.
    if (dtype == DType::boolean) return put<std::uint8_t>(data, i, v != 0 ? 1 : 0);

    // Integers: what is kept is trunc(v), which must exist and fit. Converting a double that does
    // not fit is undefined behaviour in C++ (and wraps or saturates in torch, depending on the
    // platform); a generated value or a conversion that does not fit is a mistake worth a message.
    const IntegerRange range = integer_range(dtype);
    const double whole = std::trunc(v);
    if (!std::isfinite(v) || whole < range.lowest || whole >= range.limit)
        throw UsageError(fmt::format("{} does not fit in {} (its range is [{}, {}])", v, to_string(dtype), range.min,
                                     range.max));
    switch (dtype) {
        case DType::int32: return put(data, i, static_cast<std::int32_t>(whole));
        case DType::int64: return put(data, i, static_cast<std::int64_t>(whole));
        case DType::uint8: return put(data, i, static_cast<std::uint8_t>(whole));
        default: throw InternalError("HostTensor::set: unhandled dtype");
    }
}

std::span<float> HostTensor::floats() {
    if (dtype != DType::float32)
        throw InternalError("HostTensor::floats() on a " + std::string(to_string(dtype)) + " tensor");
    return {reinterpret_cast<float*>(bytes.data()), bytes.size() / sizeof(float)};
}

std::span<const float> HostTensor::floats() const {
    if (dtype != DType::float32)
        throw InternalError("HostTensor::floats() on a " + std::string(to_string(dtype)) + " tensor");
    return {reinterpret_cast<const float*>(bytes.data()), bytes.size() / sizeof(float)};
}

HostTensor HostTensor::converted(DType to) const {
    if (to == dtype) return *this;
    HostTensor out(shape, to);
    const std::int64_t n = static_cast<std::int64_t>(bytes.size() / size_of(dtype));
    for (std::int64_t i = 0; i < n; ++i) {
        try {
            out.set(i, at(i));
        } catch (const UsageError& e) {
            throw UsageError(fmt::format("cannot convert a {} {} tensor to {}: element {}: {}", format_shape(shape),
                                         to_string(dtype), to_string(to), i, e.what()));
        }
    }
    return out;
}

}  // namespace lossjit
