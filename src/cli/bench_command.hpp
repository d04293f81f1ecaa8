// `lossjit bench` (time kernel variants on the GPU: a table by time, GB/s, % of roofline, the
// error) and `lossjit tune` (the same search, storing the fastest accurate variant).
#pragma once

#include "cli/command.hpp"

namespace lossjit::cli {

Command add_bench_command(CLI::App& app);
Command add_tune_command(CLI::App& app);

}  // namespace lossjit::cli
