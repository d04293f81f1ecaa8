#include "cli/bench_command.hpp"

#include <functional>
#include <iostream>
#include <memory>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/program.hpp"
#include "tools/host.hpp"
#include "tools/sweep.hpp"
#include "tuning/knobs.hpp"

namespace lossjit::cli {
namespace {

struct BenchArgs {
    CommonArgs common;
    std::vector<std::string> sweeps;  // KNOB=V1,V2,...
    int reps = 20;
    int sets = 2;
    bool json = false;
    bool quiet = false;
    double tolerance = 1e-7;  // tune only
    bool dry_run = false;     // tune only
};

// Set s of the inputs: generators seeded with --seed + s (set 0 is what `run --seed N` reads);
// .npy files are the same data in every set.
std::vector<std::vector<HostTensor>> input_sets(const std::vector<InputArg>& inputs, std::uint64_t seed, int sets) {
    std::vector<std::vector<HostTensor>> out(static_cast<std::size_t>(sets));
    for (int s = 0; s < sets; ++s)
        for (const auto& i : inputs) out[static_cast<std::size_t>(s)].push_back(load_input(i, seed + static_cast<std::uint64_t>(s)));
    return out;
}

// Progress on stderr: updated in place on a terminal, one line per step otherwise.
std::function<void(const lossjit::SweepProgress&)> progress_printer(bool quiet) {
    if (quiet) return nullptr;
    const bool tty = ::isatty(STDERR_FILENO) != 0;
    return [tty](const lossjit::SweepProgress& p) {
        using Stage = lossjit::SweepProgress::Stage;
        std::string line;
        switch (p.stage) {
            case Stage::Upload: line = fmt::format("uploading input set {} of {}", p.done + 1, p.total); break;
            case Stage::Reference: line = fmt::format("CPU float64 reference for input set {} of {}", p.done + 1, p.total); break;
            case Stage::Roofline: line = "measuring the roofline"; break;
            case Stage::Compile:
                if (!tty && p.done != 0 && p.done != p.total) return;
                line = fmt::format("compiled {} of {} variants (NVRTC, all cores)", p.done, p.total);
                break;
            case Stage::Time: line = fmt::format("timing {} of {}: {}", p.done + 1, p.total, p.what); break;
        }
        if (tty) std::cerr << "\r\033[K" << line << std::flush;
        else std::cerr << line << "\n";
    };
}

int bench_command(const BenchArgs& args, bool tuning) {
    Prepared prepared = prepare(args.common);
    std::vector<lossjit::SweepAxis> axes;
    for (const auto& s : args.sweeps) axes.push_back(lossjit::parse_sweep_axis(s));
    (void)lossjit::expand_sweep(prepared.options.knobs, axes);  // two axes on one knob, too many variants
    if (args.sets < 1 || args.sets > 8) throw UsageError(fmt::format("--sets {}: between 1 and 8 input sets", args.sets));
    (void)prepared.loss.output_shape(shape_views(prepared.inputs));  // shapes that do not broadcast
    // Everything the user typed is checked; only now ask for the GPU, before generating inputs.
    std::string why_not;
    if (!lossjit::cuda_available(&why_not))
        throw lossjit::CudaError(fmt::format("no CUDA device: {}; {} times kernels on a GPU", why_not,
                                             tuning ? "tune" : "bench"));

    lossjit::SweepRequest request;
    request.program = prepared.text;
    request.base = prepared.options;
    request.axes = axes;
    request.reps = args.reps;
    request.input_sets = input_sets(prepared.inputs, args.common.seed, args.sets);
    const auto progress = progress_printer(args.quiet);
    const bool tty = !args.quiet && ::isatty(STDERR_FILENO) != 0;
    request.progress = progress;
    if (!tuning) {
        const auto result = lossjit::run_sweep(request);
        if (tty) std::cerr << "\r\033[K" << std::flush;
        std::cout << (args.json ? lossjit::sweep_json(result) + "\n" : lossjit::format_sweep_table(result));
        return 0;
    }
    const auto result = lossjit::tune(request, {args.tolerance, !args.dry_run});
    if (tty) std::cerr << "\r\033[K" << std::flush;
    if (args.json) {
        std::cout << lossjit::sweep_json(result.sweep, &result) << "\n";
    } else {
        std::cout << lossjit::format_sweep_table(result.sweep) << "\n" << lossjit::format_tune_summary(result);
    }
    return result.winner >= 0 ? 0 : 1;
}

void add_bench_options(CLI::App* cmd, BenchArgs& args) {
    std::string knobs;
    for (const auto& k : lossjit::knob_help()) knobs += fmt::format("\n  {}: {}", k.name, k.values);
    cmd->add_option("--sweep", args.sweeps, "KNOB=V1,V2,...: an axis of variants; repeat for their product. Knobs:" + knobs)
        ->allow_extra_args(false);
    cmd->add_option("--reps", args.reps, "timed intervals per variant (the median is reported), at least 10")
        ->capture_default_str();
    cmd->add_option("--sets", args.sets, "input sets (fresh data: generators reseeded per set); variants take turns")
        ->capture_default_str();
    cmd->add_flag("--json", args.json, "print JSON instead of the table");
    cmd->add_flag("-q,--quiet", args.quiet, "no progress on stderr");
}

}  // namespace

Command add_bench_command(CLI::App& app) {
    auto args = std::make_shared<BenchArgs>();
    auto* cmd = app.add_subcommand("bench", "time kernel variants on the GPU: a table sorted by time, with GB/s, "
                                            "% of roofline, registers, occupancy and the error");
    add_common(cmd, args->common);
    add_bench_options(cmd, *args);
    return {cmd, [args] { return bench_command(*args, false); }};
}

Command add_tune_command(CLI::App& app) {
    auto args = std::make_shared<BenchArgs>();
    auto* cmd = app.add_subcommand("tune", "search the knobs on this GPU and store the fastest accurate variant "
                                           "for later compiles of this program and these shapes");
    add_common(cmd, args->common);
    add_bench_options(cmd, *args);
    cmd->add_option("--tolerance", args->tolerance,
                    "relative error a variant may have against the float64 reference (or the defaults' own "
                    "error, if larger)")
        ->capture_default_str();
    cmd->add_flag("--dry-run", args->dry_run, "search and report, store nothing");
    return {cmd, [args] { return bench_command(*args, true); }};
}

}  // namespace lossjit::cli
