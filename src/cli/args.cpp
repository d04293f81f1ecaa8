#include "cli/args.hpp"

#include <fmt/format.h>

#include "tools/host.hpp"

namespace lossjit::cli {

InputArg parse_input_arg(const std::string& text, const char* what) {
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
        throw UsageError(fmt::format("{} '{}': expected NAME=SHAPE:GENERATOR or NAME=file.npy", what, text));
    return {text.substr(0, eq), text.substr(eq + 1)};
}

Param parse_param_arg(const std::string& text, const char* what) {
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError(fmt::format("{} '{}': expected NAME=VALUE", what, text));
    const std::string value = text.substr(eq + 1);
    std::size_t used = 0;
    double v = 0;
    try {
        v = std::stod(value, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != value.size() || value.empty())
        throw UsageError(fmt::format("{} '{}': '{}' is not a number", what, text, value));
    return {text.substr(0, eq), v};
}

HostTensor load_input(const InputArg& input, std::uint64_t seed) {
    if (input.is_file()) return load_npy(input.spec);
    std::string spec = input.spec;
    if (spec.find(':') == std::string::npos) spec += ":uniform";
    return generate(parse_generator(spec), seed_for(seed, input.name));
}

std::string trim_nul(std::string s) {
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
}

}  // namespace lossjit::cli
