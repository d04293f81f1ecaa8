// Comparing a computed value with the float64 reference, the same way in the CLI's --check, the
// sweep and tune.
#pragma once

namespace lossjit::util {

// |value - reference| / max(|reference|, 1e-30), with the non-finite cases decided rather than
// left to IEEE arithmetic:
//   - equal values (the same infinity included) and NaN against NaN: 0;
//   - NaN against a number, a number against NaN, or an infinity against anything else: +inf,
//     so that no bound accepts it (a NaN result would pass `!(error > bound)` tests silently).
double relative_error(double value, double reference);

}  // namespace lossjit::util
