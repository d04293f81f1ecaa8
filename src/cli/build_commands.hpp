// `lossjit emit` (the CUDA C++ for a program) and `lossjit compile` (its kernel into the cache):
// code generation and NVRTC without a GPU.
#pragma once

#include "cli/command.hpp"

namespace lossjit::cli {

Command add_emit_command(CLI::App& app);
Command add_compile_command(CLI::App& app);

}  // namespace lossjit::cli
