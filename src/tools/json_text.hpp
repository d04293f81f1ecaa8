// JSON as lossjit's tools print it. JSON has no inf or nan, and nlohmann writes both as null, so a
// script could not tell an overflow from a nan from a missing value: every non-finite number is
// written as the string "inf", "-inf" or "nan" instead (README, "Command line"). Every JSON
// report of the CLI and the benchmarks goes through here.
#pragma once

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace lossjit {

// `value` with every non-finite number replaced by its string.
inline nlohmann::json with_nonfinite_as_text(nlohmann::json value) {
    if (value.is_number_float()) {
        const double v = value.get<double>();
        if (std::isnan(v)) return "nan";
        if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
        return value;
    }
    if (value.is_structured())
        for (auto& element : value) element = with_nonfinite_as_text(std::move(element));
    return value;
}

inline std::string json_text(const nlohmann::json& value, int indent = 2) {
    return with_nonfinite_as_text(value).dump(indent);
}

}  // namespace lossjit
