// The element types lossjit reads and writes, and the exact conversions between them and float.
//
// One table of facts per dtype lives in src/runtime/dtype.cpp (name, size, kind); the kernels'
// loads and stores (templates/dtype.cuh), the CPU reference and the .npy reader all convert through
// the same rules, so the GPU and the reference round alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace lossjit {

// As torch names them (torch.bfloat16 is "bfloat16", torch.bool is "bool").
enum class DType : unsigned char { float32, float64, bfloat16, float16, int32, int64, uint8, boolean };

inline constexpr std::size_t kDTypeCount = 8;

std::string_view to_string(DType dtype);   // "float32", "bfloat16", "bool", ...
std::string_view short_name(DType dtype);  // "f32", "bf16", "b1", ...: generator suffixes
std::size_t size_of(DType dtype);          // bytes per element
bool is_floating(DType dtype);             // float16, bfloat16, float32, float64
int significand_bits(DType dtype);         // 24, 53, 8, 11 for the floating types (implicit bit included); 0 for others
int min_exponent(DType dtype);             // the exponent of the smallest subnormal: -149, -1074, -133, -24; 0 for others
std::span<const DType> all_dtypes();

// Reads either spelling ("bfloat16" or "bf16", "bool" or "b1" ...); empty if neither.
std::optional<DType> parse_dtype(std::string_view name);

// The type a program computes in, given the dtypes of the inputs it reads: float64 if any of them
// is float64, else float32 (16-bit floats, integers and bools are widened to float32 as they are
// loaded). PyTorch promotes per operation; lossjit per program, which differs only in that
// subterms of float32 inputs are also computed in float64 when a float64 input is present.
DType compute_dtype(std::span<const DType> inputs);

// The dtype a map's output, or a gradient, gets when the caller does not choose: the promoted
// floating type of the inputs (torch.result_type): float64 if any input is float64; else float32
// if any is float32, or if two different 16-bit float types meet (torch: bfloat16 with float16
// gives float32); else the one 16-bit type present; else (integers and bools only) float32.
DType result_dtype(std::span<const DType> inputs);

// ---- exact conversions (round to nearest even; NaN stays NaN; ±inf and signed zeros kept) ----
float bfloat16_to_float(std::uint16_t bits);
std::uint16_t float_to_bfloat16(float value);
float float16_to_float(std::uint16_t bits);
std::uint16_t float_to_float16(float value);  // overflow rounds to ±inf, as CUDA's __float2half_rn

// Element `i` of a buffer of `dtype`, widened to double exactly as a kernel widens it: 16-bit floats
// and float32 exactly; integers and bools to the program's compute type (`compute`): an int64 above
// 2^24 in a float32 program is rounded to float32 first, as the GPU does.
double load_as_double(const void* data, DType dtype, std::int64_t i, DType compute = DType::float32);
// Stores `value` into element `i`, rounding as a kernel's store does: to float32 first, then to the
// 16-bit type (float64 outputs take the double as is). Only floating dtypes can be stored.
void store_from_double(void* data, DType dtype, std::int64_t i, double value);

}  // namespace lossjit
