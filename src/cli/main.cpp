// The lossjit command line: one subcommand per file (run_command, build_commands, bench_command,
// cache_commands, repl/). This is the only place that catches lossjit's exceptions and prints them.
#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/bench_command.hpp"
#include "cli/build_commands.hpp"
#include "cli/cache_commands.hpp"
#include "cli/repl/repl.hpp"
#include "cli/run_command.hpp"
#include "lossjit/lossjit.hpp"
#include "pipeline.hpp"

namespace {

int info_command() {
    std::string why_not;
    std::cout << "lossjit " << lossjit::kVersion << "\n";
    if (!lossjit::cuda_available(&why_not)) {
        std::cout << "CUDA: " << why_not << " (run uses the CPU reference)\n";
        return 0;
    }
    const auto info = lossjit::device_info(0);
    std::cout << fmt::format("CUDA device 0: {} ({}, {} SMs, {:.1f} GiB)\n", info.name, info.arch(), info.multiprocessors,
                             static_cast<double>(info.memory_bytes) / (1ull << 30));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"lossjit: a loss written as a string becomes one fused GPU kernel"};
    app.require_subcommand(1);

    using namespace lossjit::cli;
    const std::vector<Command> commands{
        add_run_command(app),
        add_emit_command(app),
        add_compile_command(app),
        add_bench_command(app),
        add_tune_command(app),
        {app.add_subcommand("functions", "list the language's operators and functions, with their derivatives"),
         [] {
             std::cout << lossjit::dump_language();
             return 0;
         }},
        {app.add_subcommand("info", "show the lossjit version and the CUDA device"), info_command},
    };
    const auto cache_commands = add_cache_commands(app);
    const auto repl_command = add_repl_command(app);

    CLI11_PARSE(app, argc, argv);
    try {
        for (const auto& command : commands)
            if (command.app->parsed()) return command.run();
        if (const auto status = run_cache_commands(*cache_commands)) return *status;
        if (const auto status = run_repl_command(*repl_command)) return *status;
        throw lossjit::InternalError("no subcommand ran");  // require_subcommand(1) makes this unreachable
    } catch (const lossjit::SourceError& e) {
        std::cerr << e.what() << "\n";
        return 2;
    } catch (const lossjit::Error& e) {
        std::cerr << "lossjit: error: " << e.what() << "\n";
        return 2;
    } catch (const std::bad_alloc&) {
        std::cerr << "lossjit: error: out of host memory\n";
        return 2;
    }
}
