// `lossjit run`: evaluate a program on the GPU (or the CPU reference), with its gradients, checks
// against the reference, dumps of every stage, timings and a JSON report.
#pragma once

#include "cli/command.hpp"

namespace lossjit::cli {

Command add_run_command(CLI::App& app);

}  // namespace lossjit::cli
