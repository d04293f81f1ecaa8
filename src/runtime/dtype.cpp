// The dtype table and the host's exact conversions (include/lossjit/dtype.hpp). The kernels'
// conversions (templates/dtype.cuh) implement the same rounding in CUDA.
#include "lossjit/dtype.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "lossjit/errors.hpp"

namespace lossjit {
namespace {

struct DTypeInfo {
    DType dtype;
    std::string_view name;
    std::string_view short_name;
    std::size_t size;
    bool floating;
    int significand_bits;  // floating types: with the implicit bit
    int min_exponent;      // floating types: the smallest subnormal is 2^min_exponent
};

constexpr std::array<DTypeInfo, kDTypeCount> kDTypes{{
    {DType::float32, "float32", "f32", 4, true, 24, -149},
    {DType::float64, "float64", "f64", 8, true, 53, -1074},
    {DType::bfloat16, "bfloat16", "bf16", 2, true, 8, -133},
    {DType::float16, "float16", "f16", 2, true, 11, -24},
    {DType::int32, "int32", "i32", 4, false, 0, 0},
    {DType::int64, "int64", "i64", 8, false, 0, 0},
    {DType::uint8, "uint8", "u8", 1, false, 0, 0},
    {DType::boolean, "bool", "b1", 1, false, 0, 0},
}};

constexpr std::array<DType, kDTypeCount> kAll{DType::float32, DType::float64, DType::bfloat16, DType::float16,
                                              DType::int32,   DType::int64,   DType::uint8,    DType::boolean};

const DTypeInfo& info(DType dtype) {
    const auto index = static_cast<std::size_t>(dtype);
    if (index >= kDTypes.size() || kDTypes[index].dtype != dtype)
        throw InternalError("invalid DType " + std::to_string(index));
    return kDTypes[index];
}

template <class T>
T read(const void* data, std::int64_t i) {
    T value;
    std::memcpy(&value, static_cast<const unsigned char*>(data) + static_cast<std::size_t>(i) * sizeof(T), sizeof(T));
    return value;
}

template <class T>
void write(void* data, std::int64_t i, T value) {
    std::memcpy(static_cast<unsigned char*>(data) + static_cast<std::size_t>(i) * sizeof(T), &value, sizeof(T));
}

}  // namespace

std::string_view to_string(DType dtype) { return info(dtype).name; }
std::string_view short_name(DType dtype) { return info(dtype).short_name; }
std::size_t size_of(DType dtype) { return info(dtype).size; }
bool is_floating(DType dtype) { return info(dtype).floating; }
int significand_bits(DType dtype) { return info(dtype).significand_bits; }
int min_exponent(DType dtype) { return info(dtype).min_exponent; }
std::span<const DType> all_dtypes() { return kAll; }

std::optional<DType> parse_dtype(std::string_view name) {
    for (const auto& row : kDTypes)
        if (name == row.name || name == row.short_name) return row.dtype;
    return std::nullopt;
}

DType compute_dtype(std::span<const DType> inputs) {
    for (DType d : inputs)
        if (d == DType::float64) return DType::float64;
    return DType::float32;
}

DType result_dtype(std::span<const DType> inputs) {
    bool f64 = false, f32 = false, bf16 = false, f16 = false;
    for (DType d : inputs) {
        f64 = f64 || d == DType::float64;
        f32 = f32 || d == DType::float32;
        bf16 = bf16 || d == DType::bfloat16;
        f16 = f16 || d == DType::float16;
    }
    if (f64) return DType::float64;
    if (f32 || (bf16 && f16)) return DType::float32;
    if (bf16) return DType::bfloat16;
    if (f16) return DType::float16;
    return DType::float32;
}

float bfloat16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

std::uint16_t float_to_bfloat16(float value) {
    const auto bits = std::bit_cast<std::uint32_t>(value);
    // A NaN keeps its sign and becomes quiet (truncating could leave an all-zero mantissa: inf).
    if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
    const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);  // ties to even
    return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

float float16_to_float(std::uint16_t bits) {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1fu;
    const std::uint32_t mantissa = bits & 0x3ffu;
    if (exponent == 0x1f)  // inf or NaN (the payload moves to the top of float's mantissa)
        return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
        const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
        return sign ? -magnitude : magnitude;
    }
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::uint16_t float_to_float16(float value) {
    const auto bits = std::bit_cast<std::uint32_t>(value);
    const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
    if (std::isnan(value)) return static_cast<std::uint16_t>(sign | 0x7e00u | ((bits >> 13) & 0x3ffu));
    const float magnitude = std::fabs(value);
    // 65520 is halfway between the largest half (65504) and the next power: it and above round to inf.
    if (magnitude >= 65520.0f) return static_cast<std::uint16_t>(sign | 0x7c00u);
    if (magnitude < 0x1p-14f) {
        // Subnormal (or zero): the result is magnitude / 2^-24 rounded to an integer, ties to even.
        // The product is exact in float and nearbyint rounds half to even in the default mode.
        return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(std::nearbyint(magnitude * 0x1p24f)));
    }
    // Normal: drop 13 mantissa bits with round to nearest even; a carry into the exponent is right
    // (it also turns the largest values below 65520 into 65504 or inf correctly).
    const std::uint32_t m = std::bit_cast<std::uint32_t>(magnitude);
    const std::uint32_t rounded = m + 0x0fffu + ((m >> 13) & 1u);
    const std::uint32_t exponent = (rounded >> 23) - 112;
    return static_cast<std::uint16_t>(sign | (exponent << 10) | ((rounded >> 13) & 0x3ffu));
}

double load_as_double(const void* data, DType dtype, std::int64_t i, DType compute) {
    // Integers widen to the compute type, as a kernel converts them on load.
    auto integer = [&](auto v) {
        return compute == DType::float64 ? static_cast<double>(v) : static_cast<double>(static_cast<float>(v));
    };
    switch (dtype) {
        case DType::float32: return read<float>(data, i);
        case DType::float64: return read<double>(data, i);
        case DType::bfloat16: return bfloat16_to_float(read<std::uint16_t>(data, i));
        case DType::float16: return float16_to_float(read<std::uint16_t>(data, i));
        case DType::int32: return integer(read<std::int32_t>(data, i));
        case DType::int64: return integer(read<std::int64_t>(data, i));
        case DType::uint8: return read<std::uint8_t>(data, i);
        case DType::boolean: return read<std::uint8_t>(data, i) != 0 ? 1.0 : 0.0;
    }
    throw InternalError("load_as_double: invalid DType");
}

void store_from_double(void* data, DType dtype, std::int64_t i, double value) {
    switch (dtype) {
        case DType::float32: return write(data, i, static_cast<float>(value));
        case DType::float64: return write(data, i, value);
        case DType::bfloat16: return write(data, i, float_to_bfloat16(static_cast<float>(value)));
        case DType::float16: return write(data, i, float_to_float16(static_cast<float>(value)));
        default: throw InternalError("store_from_double: " + std::string(to_string(dtype)) + " is not a floating dtype");
    }
}

}  // namespace lossjit
