// What every program-taking command (`run`, `emit`, `compile`, `bench`, `tune`) shares: the
// program argument, its inputs, parameters, knobs, and compiling it into a Loss.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "lossjit/lossjit.hpp"

namespace CLI {
class App;
}

namespace lossjit::cli {

struct CommonArgs {
    std::string program;
    std::vector<std::string> inputs;
    std::vector<std::string> params;
    std::uint64_t seed = 0;
    int device = 0;
    std::vector<std::string> knobs;  // KNOB=VALUE (docs/tuning.md)
    bool no_tuning = false;
    std::string gpu;  // Options::gpu: only the commands that need no GPU offer it (add_gpu_option)
};

// Adds the program argument and the options above to a subcommand.
void add_common(CLI::App* cmd, CommonArgs& args);
// Adds --gpu NAME (Options::gpu) to a command that builds kernels without a GPU.
void add_gpu_option(CLI::App* cmd, std::string& gpu);

struct Prepared {
    lossjit::Loss loss;
    std::vector<InputArg> inputs;  // in the program's input order
    std::string text;              // the program, and the options it was compiled with
    lossjit::Options options;
};

// Reads the program (text, or a .loss file), compiles it with the inputs, parameters and knobs
// given; UsageError for a --param the program never reads or missing --input options.
Prepared prepare(const CommonArgs& args);

// Shapes only, for emitting code without data. Files are read (their header names the shape).
std::vector<TensorView> shape_views(const std::vector<InputArg>& inputs);

}  // namespace lossjit::cli
