// The lossjit command line: one subcommand per file (run_command, build_commands, bench_command,
// cache_commands, repl/). This is the only place that catches lossjit's exceptions and prints them.
#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/bench_command.hpp"
#include "cli/build_commands.hpp"
#include "cli/cache_commands.hpp"
#include "cli/repl/repl.hpp"
#include "cli/run_command.hpp"
#include "jit/cache.hpp"
#include "jit/compile.hpp"
#include "lossjit/lossjit.hpp"
#include "pipeline.hpp"

namespace {

int info_command() {
    std::cout << "lossjit " << lossjit::kVersion << "\n";
    std::vector<std::string> archs;
    for (const int arch : lossjit::supported_archs()) archs.push_back(fmt::format("sm_{}", arch));
    std::cout << fmt::format("NVRTC {}, builds for {}\n", lossjit::nvrtc_version(), fmt::join(archs, " "));
    const auto cache = lossjit::CacheSettings::from_environment();
    std::string cache_state(lossjit::to_string(cache.disk));
    if (cache.directory.empty()) {
        cache_state = "memory only: no directory (set LOSSJIT_CACHE_DIR, HOME or XDG_CACHE_HOME)";
    } else if (cache.disk == lossjit::CacheSettings::Mode::ReadWrite) {
        if (const auto why = lossjit::probe_cache_directory(cache.directory); !why.empty())
            cache_state = fmt::format("memory only: not writable ({})", why);
    }
    std::cout << fmt::format("kernel cache: {} ({})\n", cache.directory.string(), cache_state);
    std::string why_not;
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
        {app.add_subcommand("info", "show the versions (lossjit, NVRTC and its architectures), the kernel cache and the CUDA device"),
         info_command},
    };
    const auto cache_commands = add_cache_commands(app);
    const auto repl_command = add_repl_command(app);

    app.set_version_flag("--version", std::string("lossjit ") + lossjit::kVersion);
    try {
        app.parse(argc, argv);
    } catch (const CLI::Success& e) {  // --help, --version
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        // CLI11 says "A subcommand is required" for a misspelled one; name it and the commands instead.
        if (dynamic_cast<const CLI::RequiredError*>(&e) && argc > 1 && argv[1][0] != '-' && app.get_subcommands().empty()) {
            std::vector<std::string> names;
            for (const auto* sub : app.get_subcommands({})) names.push_back(sub->get_name());
            std::cerr << fmt::format("lossjit: unknown command '{}' (commands: {})\n", argv[1], fmt::join(names, ", "));
            return 2;
        }
        app.exit(e);  // prints the message
        // CLI11 takes anything that starts with '-' for an option, a program such as -lp[y] too.
        for (int k = 1; k < argc; ++k) {
            const std::string_view arg = argv[k];
            if (arg.size() > 1 && arg[0] == '-' && arg[1] != '-' && arg.find_first_of("[(*+/^ ") != std::string_view::npos) {
                std::cerr << fmt::format("lossjit: a program that starts with '-' goes last, after '--': lossjit run [OPTIONS] -- '{}'\n", arg);
                break;
            }
        }
        return 2;  // every usage error, as the README says
    }
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
