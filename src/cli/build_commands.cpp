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
    const auto shapes = shape_views(prepared.inputs);
    // The statistics' kernels first, in the order they run (docs/language.md, the two-phase rule).
    for (const auto& source : prepared.loss.statistic_sources(shapes)) std::cout << source << "\n";
    // Then a gradient's factors, where the program combines whole-tensor reductions.
    if (const auto factor = prepared.loss.factor_source(shapes, grads)) std::cout << *factor << "\n";
    std::cout << prepared.loss.cuda_source(shapes, grads);
    return 0;
}

// "; 64 registers a thread, no local memory": what ptxas gave the kernel, from its CUBIN.
std::string describe_resources(const KernelBuild& build) {
    if (!build.registers) return "";
    return fmt::format("; {} registers a thread, {}", *build.registers,
                       *build.local_bytes == 0 ? std::string("no local memory")
                                               : fmt::format("{} bytes of local memory a thread (spills or arrays)", *build.local_bytes));
}

std::string describe(const KernelBuild& build) {
    return fmt::format("{}: {} bytes for {}, key {} ({}{}){}", build.target, build.image_bytes,
                       build.target.rfind("sm_", 0) == 0 ? "CUBIN" : "PTX", build.key, lossjit::to_string(build.cache),
                       build.cache == lossjit::CacheOutcome::Compiled ? fmt::format(", NVRTC {:.1f} ms", build.nvrtc_ms) : "",
                       describe_resources(build));
}

nlohmann::json to_json(const KernelBuild& build) {
    nlohmann::json out{{"target", build.target}, {"key", build.key}, {"cache", std::string(lossjit::to_string(build.cache))},
                       {"bytes", build.image_bytes}, {"nvrtc_ms", build.nvrtc_ms}};
    // null for PTX: ptxas has not run
    out["registers"] = build.registers ? nlohmann::json(*build.registers) : nlohmann::json(nullptr);
    out["local_bytes"] = build.local_bytes ? nlohmann::json(*build.local_bytes) : nlohmann::json(nullptr);
    return out;
}

int compile_command(const CommonArgs& args, const std::vector<std::string>& grads, const std::string& arch, bool json) {
    Prepared prepared = prepare(args);
    require_writable_cache("compile");
    const auto shapes = shape_views(prepared.inputs);
    const auto statistics = prepared.loss.compile_statistics(shapes, arch);
    const auto factor = prepared.loss.compile_factor(shapes, grads, arch);
    const auto build = prepared.loss.compile_kernel(shapes, grads, arch);
    if (json) {
        nlohmann::json out = to_json(build);
        if (!statistics.empty()) {  // the kernels that run first (docs/language.md, the two-phase rule)
            out["statistics"] = nlohmann::json::array();
            for (const auto& s : statistics) out["statistics"].push_back(to_json(s));
        }
        if (factor) out["factor"] = to_json(*factor);
        std::cout << lossjit::json_text(out) << "\n";
    } else {
        for (std::size_t i = 0; i < statistics.size(); ++i)
            std::cout << fmt::format("statistic {}: {}\n", i, describe(statistics[i]));
        if (factor) std::cout << fmt::format("gradient factors: {}\n", describe(*factor));
        std::cout << describe(build) << "\n";
    }
    for (const auto& s : statistics)
        if (!s.warning.empty()) std::cerr << "lossjit: warning: " << s.warning << "\n";
    if (factor && !factor->warning.empty()) std::cerr << "lossjit: warning: " << factor->warning << "\n";
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
    add_gpu_option(cmd, args->common.gpu);
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
    auto* cmd = app.add_subcommand("compile", "compile a program's kernel into the cache and say its registers and local memory (no GPU needed)");
    add_common(cmd, args->common);
    add_gpu_option(cmd, args->common.gpu);
    cmd->add_option("--grad", args->grads, "compile the fused value-and-gradient kernel for these inputs")
        ->allow_extra_args(false);
    cmd->add_option("--arch", args->arch, "sm_XX for CUBIN, compute_XX for PTX")->capture_default_str();
    cmd->add_flag("--json", args->json, "print a JSON report");
    return {cmd, [args] { return compile_command(args->common, args->grads, args->arch, args->json); }};
}

}  // namespace lossjit::cli
