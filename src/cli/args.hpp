// Command-line arguments shared by `lossjit run` (and its siblings) and `lossjit repl`: inputs given
// as NAME=SPEC, parameters as NAME=VALUE. `what` names the option or command in error messages
// ("--input", ":input").
#pragma once

#include <cstdint>
#include <string>

#include "lossjit/lossjit.hpp"
#include "lossjit/tensor.hpp"
#include "tools/host.hpp"

namespace lossjit::cli {

struct InputArg {
    std::string name;
    std::string spec;  // "SHAPE[:KIND[args]]" or a path ending in .npy
    bool is_file() const { return spec.size() > 4 && spec.compare(spec.size() - 4, 4, ".npy") == 0; }
};

// NAME=SHAPE:GENERATOR or NAME=file.npy; UsageError otherwise.
InputArg parse_input_arg(const std::string& text, const char* what = "--input");

// NAME=VALUE with a number for VALUE; UsageError otherwise.
Param parse_param_arg(const std::string& text, const char* what = "--param");

// Reads the .npy file or runs the generator (SHAPE alone means SHAPE:uniform), seeded with
// seed_for(seed, name) so that the data does not depend on the other inputs.
HostTensor load_input(const InputArg& input, std::uint64_t seed);

// PTX and NVRTC logs may end in NULs.
std::string trim_nul(std::string s);

}  // namespace lossjit::cli
