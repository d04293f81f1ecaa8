// Comparing a computed value with the float64 reference, the same way in the CLI's --check, the
// sweep and tune.
#pragma once

#include <span>

namespace lossjit::util {

// |value - reference| / max(|reference|, 1e-30), with the non-finite cases decided rather than
// left to IEEE arithmetic:
//   - equal values (the same infinity included) and NaN against NaN: 0;
//   - NaN against a number, a number against NaN, or an infinity against anything else: +inf,
//     so that no bound accepts it (a NaN result would pass `!(error > bound)` tests silently).
double relative_error(double value, double reference);

// The largest elementwise relative_error: how a map's output is compared.
double largest_relative_error(std::span<const float> values, std::span<const double> reference);
double largest_relative_error(std::span<const float> values, std::span<const float> reference);

// The largest |value - reference| over the largest |reference|: how gradients are compared, since
// their elements are tiny (1/N) and some are exactly 0. Equal elements (NaN against NaN, the same
// infinity) count 0; NaN or an infinity against anything else, or a length mismatch, +inf.
double largest_error_relative_to_max(std::span<const float> values, std::span<const double> reference);
double largest_error_relative_to_max(std::span<const double> values, std::span<const double> reference);

}  // namespace lossjit::util
