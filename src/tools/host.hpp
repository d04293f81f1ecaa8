// Host-side tensor utilities: .npy files, shape strings and deterministic input generators. The CLI
// uses them to feed kernels; the tests use them to build reference data.
//
// Everything here throws lossjit::UsageError on bad input and never prints.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lossjit/tensor.hpp"

namespace lossjit {

// A host-resident tensor of any dtype, row-major contiguous: what the generators and the .npy
// reader produce. Tooling, not part of the library's API (include/lossjit/ takes and returns views).
struct HostTensor {
    Shape shape;
    DType dtype = DType::float32;
    std::vector<unsigned char> bytes;  // numel() * size_of(dtype)

    HostTensor() = default;
    // Zero-filled; UsageError (naming shape and dtype) where the memory cannot be had.
    HostTensor(Shape shape, DType dtype);
    // float32; UsageError if values does not hold element_count(shape) elements.
    static HostTensor from_floats(Shape shape, std::vector<float> values);

    std::int64_t numel() const { return element_count(shape); }
    TensorView view() const { return TensorView{bytes.data(), dtype, shape, {}}; }
    OutputView output() { return OutputView{bytes.data(), dtype, shape, {}}; }

    // Element i as a double, exactly (int64 beyond 2^53 rounds). An i outside the tensor is an
    // InternalError, here and in set().
    double at(std::int64_t i) const;
    // Stores v at element i as the dtype holds it: floats round to nearest even (through float32
    // for the 16-bit types, as kernels store), integers truncate toward zero as torch's .to() does
    // (UsageError if v is not finite or out of the type's range), bools are v != 0 (NaN is true).
    void set(std::int64_t i, double v);
    // The elements of a float32 tensor (InternalError for another dtype).
    std::span<float> floats();
    std::span<const float> floats() const;
    // A copy in another dtype, element by element through at() and set().
    HostTensor converted(DType to) const;
};

// Reads a NumPy .npy file (format 1.0, 2.0 or 3.0) holding a C-ordered, little-endian array (rank 0
// allowed) of one of these dtypes, as numpy writes them:
//   '<f4' float32   '<f8' float64   '<f2' float16   '<i4' int32   '<i8' int64   '|u1' uint8
//   '|b1' bool (read as 0 or 1, whatever nonzero byte held True)
//   '<V2' bfloat16: numpy has no bfloat16, and np.save writes an ml_dtypes.bfloat16 array with this
//         descr (a 2-byte void); '|V2' and 'bfloat16' are read as bfloat16 too.
// Anything else (another dtype, a big-endian '>f4', Fortran order, a structured dtype) is refused
// with a message naming the file and the problem, because silently converting would hide a
// precision or layout mistake. Bytes after the array data are ignored, as np.load does.
HostTensor load_npy(const std::string& path);

// Writes format 1.0 (2.0 only if the header cannot fit 1.0's 16-bit length), C order, with the
// data starting at a multiple of 64 bytes, in the tensor's dtype with the descr above (bfloat16 as
// '<V2': np.load(f).view(ml_dtypes.bfloat16) gives the bfloat16 array back). Goes through a
// temporary file in the same directory and a rename, so readers never see a half-written file.
void save_npy(const std::string& path, const HostTensor& t);

// "32768x32768", "4096", "2x3x4", or "scalar" for rank 0. Extents are non-negative (0 allowed),
// each at most 2^40, at most 8 of them, and their product at most 2^62.
Shape parse_shape(std::string_view text);

// What "SHAPE:KIND", "SHAPE:KIND[a,b]" or either followed by ":DTYPE" asks for. DTYPE is any
// spelling parse_dtype reads (bf16 or bfloat16, i64 or int64, bool, ...); without it, float32.
// parse_generator fills in default arguments, so args always has the kind's full arity:
//   uniform[lo,hi]    values in [lo, hi), in the dtype's values   default [0,1]    floating dtypes
//   normal[mean,std]  Gaussian (draws reach mean +- 6.76 std)     default [0,1]    floating dtypes
//   softmax           each row of the last dimension is the softmax of            floating dtypes
//                     standard-normal logits (rank >= 1)
//   integers[lo,hi]   uniform integers in [lo, hi): class indices, and masks as integers[0,2]:bool
//   sign              -1 or +1 with equal probability                              not uint8, bool
//   const[v]          every element is v                          (v required)
//   range             element i (row-major) is i, rounded to a floating dtype (exact up to 2^24 in
//                     float32, 2048 in float16, 256 in bfloat16)
// Every dtype draws the same numbers as float32 (in double) and rounds them into the tensor as
// HostTensor::set does; uniform then clamps into [lo, hi) among the dtype's values, where rounding
// would reach hi. What would not come out as asked is refused rather than rounded: an argument
// that is infinite in the dtype; normal draws or range indices that would overflow it; integers
// (from integers, sign, or const and range in an integer dtype) that the dtype does not hold
// exactly (float16 holds every integer in [-2048, 2048], float32 [-2^24, 2^24], uint8 [0, 255],
// bool 0 and 1), and a const of an integer dtype that is not an integer. Integer arguments are at
// most 2^53 in magnitude.
struct GeneratorSpec {
    Shape shape;
    std::string kind;
    std::vector<double> args;
    DType dtype = DType::float32;
};

GeneratorSpec parse_generator(std::string_view text);

// Deterministic: element i depends only on (seed, i) through a counter-based hash, so the result
// does not depend on the number of threads used. Large tensors are filled in parallel. A spec built
// by hand may leave args empty to get the defaults; it is validated like a parsed one.
HostTensor generate(const GeneratorSpec& spec, std::uint64_t seed);

// Per-input seed derived from the run's seed and the input's name, so that adding or renaming one
// input does not change the data of the others. Not a cryptographic hash and not a cache key.
std::uint64_t seed_for(std::uint64_t base_seed, std::string_view input_name);

}  // namespace lossjit
