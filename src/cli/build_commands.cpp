#include "cli/build_commands.hpp"

#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cache_commands.hpp"
#include "cli/program.hpp"
#include "tools/json_text.hpp"

namespace lossjit::cli {
namespace {

int emit_command(const CommonArgs& args, const std::vector<std::string>& grads) {
    Prepared prepared = prepare(args);
    std::cout << prepared.loss.cuda_source(shape_views(prepared.inputs), grads);
    return 0;
}

int compile_command(const CommonArgs& args, const std::vector<std::string>& grads, const std::string& arch, bool json) {
    Prepared prepared = prepare(args);
    require_writable_cache("compile");
    const auto build = prepared.loss.compile_kernel(shape_views(prepared.inputs), grads, arch);
    if (json) {
        std::cout << lossjit::json_text(nlohmann::json{{"target", build.target}, {"key", build.key}, {"cache", std::string(lossjit::to_string(build.cache))},
                                    {"bytes", build.image_bytes}, {"nvrtc_ms", build.nvrtc_ms}})
                  << "\n";
    } else {
        std::cout << fmt::format("{}: {} bytes for {}, key {} ({}{})\n", build.target, build.image_bytes,
                                 build.target.rfind("sm_", 0) == 0 ? "CUBIN" : "PTX", build.key, lossjit::to_string(build.cache),
                                 build.cache == lossjit::CacheOutcome::Compiled ? fmt::format(", NVRTC {:.1f} ms", build.nvrtc_ms) : "");
    }
    if (!build.warning.empty()) std::cerr << "lossjit: warning: " << build.warning << "\n";
    require_no_write_failures("compile");
    return 0;
}

}  // namespace

Command add_emit_command(CLI::App& app) {
    struct Args {
        CommonArgs common;
        std::vector<std::string> grads;
    };
    auto args = std::make_shared<Args>();
    auto* cmd = app.add_subcommand("emit", "print the CUDA C++ generated for a program");
    add_common(cmd, args->common);
    cmd->add_option("--grad", args->grads, "print the fused value-and-gradient kernel for these inputs")
        ->allow_extra_args(false);
    return {cmd, [args] { return emit_command(args->common, args->grads); }};
}

Command add_compile_command(CLI::App& app) {
    struct Args {
        CommonArgs common;
        std::vector<std::string> grads;
        std::string arch = "sm_90";
        bool json = false;
    };
    auto args = std::make_shared<Args>();
    auto* cmd = app.add_subcommand("compile", "compile a program's kernel into the cache (no GPU needed)");
    add_common(cmd, args->common);
    cmd->add_option("--grad", args->grads, "compile the fused value-and-gradient kernel for these inputs")
        ->allow_extra_args(false);
    cmd->add_option("--arch", args->arch, "sm_XX for CUBIN, compute_XX for PTX")->capture_default_str();
    cmd->add_flag("--json", args->json, "print a JSON report");
    return {cmd, [args] { return compile_command(args->common, args->grads, args->arch, args->json); }};
}

}  // namespace lossjit::cli
