// Comparing a computed value with the float64 reference, the same way in the CLI's --check, the
// sweep and tune.
#pragma once

#include <cmath>
#include <span>

namespace lossjit::util {

// Neumaier's compensated sum: the reference must be more accurate than what it checks.
struct CompensatedSum {
    double sum = 0.0, compensation = 0.0;
    // Once the sum is infinite (or nan) the correction terms are inf - inf = nan, which would turn a
    // sum of +inf into nan; the kernel's plain float64 sum gives +inf, and so must the reference.
    void add(double x) {
        const double t = sum + x;
        if (std::isfinite(t)) {
            if (std::fabs(sum) >= std::fabs(x)) compensation += (sum - t) + x;
            else compensation += (x - t) + sum;
        }
        sum = t;
    }
    double value() const { return std::isfinite(sum) ? sum + compensation : sum; }
};

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
