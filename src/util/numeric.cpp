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

namespace {
template <class Reference>
double largest_relative(std::span<const float> values, std::span<const Reference> reference) {
    double worst = 0;
    for (std::size_t i = 0; i < values.size() && i < reference.size(); ++i)
        worst = std::max(worst, relative_error(values[i], static_cast<double>(reference[i])));
    return values.size() == reference.size() ? worst : INFINITY;
}
}  // namespace

double largest_relative_error(std::span<const float> values, std::span<const double> reference) {
    return largest_relative(values, reference);
}
double largest_relative_error(std::span<const float> values, std::span<const float> reference) {
    return largest_relative(values, reference);
}

namespace {
template <class Value>
double largest_relative_to_max(std::span<const Value> values, std::span<const double> reference) {
    if (values.size() != reference.size()) return INFINITY;
    double scale = 0, worst = 0;
    for (double r : reference)
        if (std::isfinite(r)) scale = std::max(scale, std::fabs(r));
    for (std::size_t i = 0; i < values.size(); ++i) {
        const double v = values[i], r = reference[i];
        if (v == r || (std::isnan(v) && std::isnan(r))) continue;
        const double d = std::fabs(v - r);
        if (!std::isfinite(d)) return INFINITY;
        worst = std::max(worst, d);
    }
    return scale > 0 ? worst / scale : worst;
}
}  // namespace

double largest_error_relative_to_max(std::span<const float> values, std::span<const double> reference) {
    return largest_relative_to_max(values, reference);
}
double largest_error_relative_to_max(std::span<const double> values, std::span<const double> reference) {
    return largest_relative_to_max(values, reference);
}

}  // namespace lossjit::util
