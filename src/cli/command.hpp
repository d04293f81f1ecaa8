// A subcommand of `lossjit`: the CLI11 subcommand its options are parsed by, and what runs it
// (with the parsed values, which the command owns). main() runs the one that was given.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace lossjit::cli {

struct Command {
    CLI::App* app;
    std::function<int()> run;  // the exit status; throws lossjit::Error for main() to report
};

}  // namespace lossjit::cli
