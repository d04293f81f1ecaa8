#include "util/numeric.hpp"

#include <algorithm>
#include <cmath>

namespace lossjit::util {

double relative_error(double value, double reference) {
    if (std::isnan(value) && std::isnan(reference)) return 0.0;
    if (value == reference) return 0.0;
    const double e = std::fabs(value - reference) / std::max(std::fabs(reference), 1e-30);
    return std::isnan(e) ? INFINITY : e;
}

}  // namespace lossjit::util
