// The lossjit command line. This is the only place that catches lossjit's exceptions and prints.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/args.hpp"
#include "pipeline.hpp"
#include "cli/cache_commands.hpp"
#include "cli/repl/repl.hpp"
#include "tuning/knobs.hpp"
#include "tools/host.hpp"
#include "tools/json_text.hpp"
#include "lossjit/lossjit.hpp"
#include "tools/sweep.hpp"
#include "util/numeric.hpp"

namespace {

using lossjit::HostTensor;
using lossjit::TensorView;
using lossjit::UsageError;
using Clock = std::chrono::steady_clock;
using lossjit::cli::InputArg;
using lossjit::cli::load_input;
using lossjit::cli::parse_input_arg;
using lossjit::cli::parse_param_arg;
using lossjit::cli::trim_nul;
using lossjit::util::relative_error;

struct CommonArgs {
    std::string program;
    std::vector<std::string> inputs;
    std::vector<std::string> params;
    std::uint64_t seed = 0;
    int device = 0;
    std::vector<std::string> knobs;  // KNOB=VALUE (docs/tuning.md)
    bool no_tuning = false;
};

// PROGRAM is a file when it names an existing file ending in .loss, else the program text itself.
std::pair<std::string, std::string> read_program(const std::string& arg) {
    const std::filesystem::path path(arg);
    const bool looks_like_file = path.extension() == ".loss";
    if (looks_like_file) {
        std::ifstream in(path, std::ios::binary);
        if (!in) throw UsageError(fmt::format("cannot read program file '{}'", arg));
        std::stringstream text;
        text << in.rdbuf();
        return {text.str(), arg};
    }
    return {arg, "expr"};
}

struct Prepared {
    lossjit::Loss loss;
    std::vector<InputArg> inputs;  // in the program's input order
    std::string text;              // the program, and the options it was compiled with
    lossjit::Options options;
};

struct ProgramOptions {
    std::string text;
    lossjit::Options options;
    std::vector<InputArg> inputs;
};

ProgramOptions program_options(const CommonArgs& args) {
    auto [text, source_name] = read_program(args.program);
    lossjit::Options options;
    options.source_name = source_name;
    options.device = args.device;
    std::vector<InputArg> given;
    for (const auto& i : args.inputs) {
        given.push_back(parse_input_arg(i));
        options.inputs.push_back(given.back().name);
    }
    // --param declares a parameter (or sets the program's `param` default); one the program never
    // reads is a typo, not a harmless extra.
    for (const auto& p : args.params) options.params.push_back(parse_param_arg(p));
    for (const auto& k : args.knobs) lossjit::set_knob(options.knobs, k);
    options.use_tuning = !args.no_tuning;
    return {std::move(text), std::move(options), std::move(given)};
}

Prepared prepare(const CommonArgs& args) {
    auto [text, options, given] = program_options(args);
    lossjit::Loss loss = lossjit::compile(text, options);
    for (const auto& p : options.params) {
        if (!loss.uses(p.name))
            throw UsageError(fmt::format("--param {}: the program does not use a parameter '{}'", p.name, p.name));
    }
    if (given.empty() && !loss.inputs().empty()) {
        throw UsageError(fmt::format("the program reads {}: give each with --input NAME=SHAPE:GENERATOR "
                                     "(e.g. --input {}=1024x1024:uniform) or --input NAME=file.npy",
                                     fmt::join(loss.inputs(), ", "), loss.inputs().front()));
    }
    return {std::move(loss), std::move(given), std::move(text), std::move(options)};
}

// Shapes only, for emitting code without data. Files are read (their header names the shape).
std::vector<TensorView> shape_views(const std::vector<InputArg>& inputs) {
    std::vector<TensorView> views;
    for (const auto& i : inputs) {
        if (i.is_file()) {
            views.push_back(TensorView::contiguous(nullptr, lossjit::load_npy(i.spec).shape));
        } else {
            const std::string spec = i.spec.find(':') == std::string::npos ? i.spec + ":uniform" : i.spec;
            views.push_back(TensorView::contiguous(nullptr, lossjit::parse_generator(spec).shape));
        }
    }
    return views;
}

// first_call_ms < 0: there was no GPU call.
void print_timings(const lossjit::Timings& t, double first_call_ms) {
    std::cerr << fmt::format(
        "timings: parse {:.3f} ms, check {:.3f} ms, device {:.3f} ms, emit {:.3f} ms, cache {:.3f} ms ({}; NVRTC "
        "{:.1f} ms), module load {:.3f} ms, target {}\n",
        t.parse_ms, t.check_ms, t.device_ms, t.emit_ms, t.cache_ms, t.cache ? lossjit::to_string(*t.cache) : "not used",
        t.nvrtc_ms, t.load_ms, t.target.empty() ? "-" : t.target);
    // What the first call cost beyond lossjit's preparation is the launch and the wait for the result.
    if (first_call_ms >= 0) {
        std::cerr << fmt::format("timings: total {:.3f} ms before the first launch; first call {:.3f} ms "
                                 "(launch and kernel {:.3f} ms)\n",
                                 t.total_ms(), first_call_ms,
                                 std::max(0.0, first_call_ms - (t.total_ms() - t.parse_ms - t.check_ms)));
    } else {
        std::cerr << fmt::format("timings: total {:.3f} ms\n", t.total_ms());
    }
    if (!t.tuned.empty()) std::cerr << "timings: tuned knobs: " << t.tuned << "\n";
}

// `--timings` after a GPU call: the kernel, its resources, and the knobs that could not be honoured.
void print_kernel_info(const lossjit::Loss& loss) {
    const auto info = loss.kernel_info();
    if (!info) return;
    std::cerr << fmt::format("kernel: {}; {} registers/thread, {} B local (spills), occupancy {:.0f}% ({} blocks/SM{}), "
                             "grid {}\n",
                             info->signature, info->registers, info->local_bytes, 100.0 * info->occupancy,
                             info->blocks_per_sm, info->knobs.max_blocks_per_sm ? fmt::format(", cap {}", info->knobs.max_blocks_per_sm) : "",
                             info->grid);
    for (const auto& note : info->notes) std::cerr << "kernel: note: " << note << "\n";
}

struct RunArgs {
    CommonArgs common;
    std::vector<std::string> dumps;
    std::vector<std::string> grads;         // inputs to differentiate with respect to
    std::vector<std::string> output_grads;  // NAME=FILE.npy
    std::string output;
    std::string arch = "sm_90";
    bool check = false;
    bool cpu = false;
    bool timings = false;
    bool json = false;
    double tolerance = 1e-5;
};

void dump_stages(lossjit::Loss& loss, const std::vector<std::string>& stages, const std::vector<TensorView>& shapes,
                 const std::string& arch, const std::vector<std::string>& grads) {
    for (const auto& stage : stages) {
        std::cout << "// ---- " << stage << " ----\n";
        if (stage == "ast") std::cout << loss.ast();
        else if (stage == "checked") std::cout << loss.checked();
        else if (stage == "grad") std::cout << loss.derivatives(grads.empty() ? loss.inputs() : grads);
        else if (stage == "cuda") std::cout << loss.cuda_source(shapes);
        else if (stage == "ptx") std::cout << trim_nul(loss.ptx(shapes, arch));
    }
}

// `run --grad`: the fused gradient kernel on the GPU (a map: the gradient of sum(map), an upstream of
// ones as y.backward(torch.ones_like(y))), or the CPU reference without one or for a broadcast the
// GPU cannot sum yet. With --check, each GPU gradient is compared with the reference: largest
// elementwise difference relative to the largest reference magnitude.
int run_gradients(lossjit::Loss& loss, const RunArgs& args, bool gpu, const std::vector<HostTensor>& host,
                  const std::vector<TensorView>& host_views, const std::vector<TensorView>& device_views,
                  const std::vector<std::string>& grads,
                  const std::vector<std::pair<std::string, std::string>>& grad_files, nlohmann::json& report) {
    const bool map = loss.kind() == lossjit::Kind::Map;
    const lossjit::Shape shape = loss.output_shape(host_views);
    const HostTensor ones{shape, std::vector<float>(map ? static_cast<std::size_t>(lossjit::element_count(shape)) : 0, 1.0f)};
    auto reference = [&] { return map ? loss.reference_grad(host_views, grads, ones.view()) : loss.reference_grad(host_views, grads); };

    (void)loss.derivatives(grads);  // an unknown or repeated name: the library's message, before any work
    std::vector<lossjit::ReferenceGradient> result;
    std::string where = "CPU reference, float64";
    if (gpu) {
        try {
            std::vector<lossjit::DeviceBuffer> buffers;
            std::vector<lossjit::OutputView> views;
            for (const auto& name : grads) {
                const auto it = std::find(loss.inputs().begin(), loss.inputs().end(), name);
                if (it == loss.inputs().end()) break;  // grad() names the mistake
                const auto& input = host[static_cast<std::size_t>(it - loss.inputs().begin())];
                buffers.emplace_back(std::max<std::size_t>(input.values.size(), 1) * sizeof(float), args.common.device);
                buffers.back().fill_bytes(0xFF);  // NaN: an unwritten element cannot pass a check
                views.push_back(lossjit::OutputView::contiguous(buffers.back().data(), input.shape));
                result.push_back({name, input.shape, {}});
            }
            std::optional<lossjit::DeviceBuffer> upstream;
            if (map) {
                upstream.emplace(std::max<std::size_t>(ones.values.size(), 1) * sizeof(float), args.common.device);
                upstream->upload(ones.values.data(), ones.values.size() * sizeof(float));
                loss.grad(device_views, grads, views, TensorView::contiguous(upstream->data(), shape));
            } else {
                loss.grad(device_views, grads, views);
            }
            lossjit::synchronize(args.common.device);
            for (std::size_t k = 0; k < result.size(); ++k) {
                std::vector<float> values(static_cast<std::size_t>(lossjit::element_count(result[k].shape)));
                buffers[k].download(values.data(), values.size() * sizeof(float));
                result[k].values.assign(values.begin(), values.end());
            }
            where = "GPU";
        } catch (const lossjit::UnsupportedError& e) {
            // What the GPU kernel cannot do yet (some broadcast patterns) the reference still can.
            std::cerr << "lossjit: " << e.what() << "; computing the gradients on the CPU reference instead\n";
            result.clear();
        }
    }
    if (result.empty()) result = reference();

    int status = 0;
    std::vector<lossjit::ReferenceGradient> expected;
    if (where == "GPU" && args.check) expected = reference();
    for (std::size_t k = 0; k < result.size(); ++k) {
        const auto& g = result[k];
        nlohmann::json entry{{"shape", g.shape}, {"device", where == "GPU" ? "gpu" : "cpu-reference"}};
        for (const auto& [name, file] : grad_files) {
            if (name != g.input) continue;
            lossjit::save_npy(file, HostTensor{g.shape, std::vector<float>(g.values.begin(), g.values.end())});
            entry["output"] = file;
        }
        const std::size_t shown = std::min<std::size_t>(g.values.size(), 6);
        entry["first"] = std::vector<double>(g.values.begin(), g.values.begin() + static_cast<std::ptrdiff_t>(shown));
        if (!expected.empty()) {
            double scale = 0, worst = 0;
            for (double r : expected[k].values) scale = std::max(scale, std::fabs(r));
            for (std::size_t i = 0; i < g.values.size(); ++i) {
                const double d = std::fabs(g.values[i] - expected[k].values[i]);
                worst = std::max(worst, std::isnan(d) ? INFINITY : d);
            }
            const double error = scale > 0 ? worst / scale : worst;
            entry["rel_error"] = error;
            if (!(error <= args.tolerance)) status = 1;
            if (!args.json)
                std::cerr << fmt::format("check: grad {} vs the CPU reference: largest difference {:.3g} of the largest "
                                         "magnitude ({})\n", g.input, error, error <= args.tolerance ? "ok" : "FAILED");
        }
        if (!args.json) {
            std::cout << fmt::format("grad {} of shape {} ({}){}: {:.9g}{}\n", g.input, lossjit::format_shape(g.shape),
                                     where,
                                     entry.contains("output") ? ", written to " + entry["output"].get<std::string>() : "",
                                     fmt::join(g.values.begin(), g.values.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                                     g.values.size() > shown ? ", ..." : "");
        }
        report["gradients"][g.input] = entry;
    }
    return status;
}

// What `run` computes on and with: the inputs on the host (and on the GPU when there is one), the
// gradients asked for (--output-grad NAME=FILE implies --grad NAME).
struct RunInputs {
    bool gpu = false;
    std::string why_no_gpu;
    std::string arch;
    std::vector<HostTensor> host;
    std::vector<TensorView> host_views;
    std::vector<lossjit::DeviceBuffer> buffers;
    std::vector<TensorView> device_views;
    std::vector<std::string> grads;
    std::vector<std::pair<std::string, std::string>> grad_files;  // NAME, FILE.npy
};

RunInputs run_inputs(const RunArgs& args, const Prepared& prepared) {
    RunInputs in;
    in.gpu = !args.cpu && lossjit::cuda_available(&in.why_no_gpu);
    in.arch = in.gpu ? lossjit::device_info(args.common.device).arch() : args.arch;
    for (const auto& i : prepared.inputs) in.host.push_back(load_input(i, args.common.seed));
    for (const auto& h : in.host) in.host_views.push_back(h.view());
    in.grads = args.grads;
    for (const auto& text : args.output_grads) {
        const auto eq = text.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
            throw UsageError(fmt::format("--output-grad '{}': expected NAME=FILE.npy", text));
        in.grad_files.emplace_back(text.substr(0, eq), text.substr(eq + 1));
        if (std::find(in.grads.begin(), in.grads.end(), in.grad_files.back().first) == in.grads.end())
            in.grads.push_back(in.grad_files.back().first);
    }
    return in;
}

void upload_inputs(RunInputs& in, int device, nlohmann::json& report) {
    const auto info = lossjit::device_info(device);
    report["device"] = fmt::format("{} ({})", info.name, info.arch());
    for (const auto& h : in.host) {
        in.buffers.emplace_back(h.values.size() * sizeof(float), device);
        in.buffers.back().upload(h.values.data(), h.values.size() * sizeof(float));
        in.device_views.push_back(TensorView::contiguous(in.buffers.back().data(), h.shape));
    }
}

// A reduction's value on the GPU or the reference; with --check on the GPU, compared with the reference.
int run_reduction(lossjit::Loss& loss, const RunArgs& args, const RunInputs& in, nlohmann::json& report) {
    const bool gpu = in.gpu;
    const auto& host_views = in.host_views;
    const auto& device_views = in.device_views;
    int status = 0;
    double value = 0;
    if (gpu) {
        const auto start = Clock::now();
        value = loss(device_views);
        report["first_call_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        const auto again = Clock::now();
        loss(device_views);
        report["warm_call_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - again).count();
    } else {
        value = loss.reference(host_views);
    }
    report["value"] = value;
    if (gpu && args.check) {
        const double reference = loss.reference(host_views);
        const double error = relative_error(value, reference);
        report["reference"] = reference;
        report["rel_error"] = error;
        if (!(error <= args.tolerance)) status = 1;
    }
    if (!args.json) {
        std::cout << fmt::format("{:.9g}\n", value);
        if (report.contains("reference")) {
            std::cerr << fmt::format("check: GPU {:.9g}, CPU reference {:.17g}, relative error {:.3g} ({})\n", value,
                                     report["reference"].get<double>(), report["rel_error"].get<double>(),
                                     status == 0 ? "ok" : "FAILED");
        }
    }
    return status;
}

// A map's values on the GPU or the reference, optionally written to --output; --check as above.
int run_map(lossjit::Loss& loss, const RunArgs& args, const RunInputs& in, nlohmann::json& report) {
    const bool gpu = in.gpu;
    const auto& host_views = in.host_views;
    const auto& device_views = in.device_views;
    int status = 0;
    std::optional<lossjit::DeviceBuffer> output_buffer;
    const lossjit::Shape shape = loss.output_shape(host_views);
    HostTensor out{shape, std::vector<float>(static_cast<std::size_t>(lossjit::element_count(shape)))};
    if (gpu) {
        output_buffer.emplace(out.values.size() * sizeof(float), args.common.device);
        output_buffer->fill_bytes(0xFF);  // NaN everywhere: an unwritten element cannot pass a check
        const auto start = Clock::now();
        loss.map(device_views, lossjit::OutputView::contiguous(output_buffer->data(), shape));
        lossjit::synchronize(args.common.device);
        report["first_call_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        output_buffer->download(out.values.data(), out.values.size() * sizeof(float));
    } else {
        loss.reference_map(host_views, lossjit::OutputView::contiguous(out.values.data(), shape));
    }
    if (gpu && args.check) {
        std::vector<float> reference(out.values.size());
        loss.reference_map(host_views, lossjit::OutputView::contiguous(reference.data(), shape));
        double worst = 0;
        for (std::size_t i = 0; i < reference.size(); ++i) {
            worst = std::max(worst, relative_error(out.values[i], reference[i]));
        }
        report["max_rel_error"] = worst;
        if (!(worst <= args.tolerance)) status = 1;
        if (!args.json)
            std::cerr << fmt::format("check: max elementwise relative error vs the CPU reference {:.3g} ({})\n", worst,
                                     status == 0 ? "ok" : "FAILED");
    }
    report["shape"] = shape;
    if (!args.output.empty()) {
        lossjit::save_npy(args.output, out);
        report["output"] = args.output;
    }
    if (!args.json) {
        std::cout << fmt::format("map of shape {}{}", lossjit::format_shape(shape),
                                 args.output.empty() ? "" : ", written to " + args.output);
        const std::size_t shown = std::min<std::size_t>(out.values.size(), 6);
        std::cout << fmt::format("; first values: {:.7g}{}\n", fmt::join(out.values.begin(), out.values.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                                 out.values.size() > shown ? ", ..." : "");
    }
    return status;
}

// The timings and kernel in the report; the JSON, warnings and --timings output.
void finish_report(const lossjit::Loss& loss, const RunArgs& args, nlohmann::json& report) {
    report["timings"] = {{"parse_ms", loss.timings().parse_ms}, {"check_ms", loss.timings().check_ms},
                         {"device_ms", loss.timings().device_ms}, {"emit_ms", loss.timings().emit_ms},
                         {"cache_ms", loss.timings().cache_ms},   {"nvrtc_ms", loss.timings().nvrtc_ms},
                         {"load_ms", loss.timings().load_ms},     {"total_ms", loss.timings().total_ms()},
                         {"cache", loss.timings().cache ? std::string(lossjit::to_string(*loss.timings().cache)) : std::string()}};
    if (!loss.timings().tuned.empty()) report["timings"]["tuned"] = loss.timings().tuned;
    if (const auto info = loss.kernel_info()) {
        report["kernel"] = {{"signature", info->signature},         {"registers", info->registers},
                            {"local_bytes", info->local_bytes},     {"occupancy", info->occupancy},
                            {"blocks_per_sm", info->blocks_per_sm}, {"grid", info->grid},
                            {"tuned", info->tuned},                 {"notes", info->notes}};
    }
    if (args.json) std::cout << lossjit::json_text(report) << "\n";
    if (!loss.timings().cache_warning.empty()) std::cerr << "lossjit: warning: " << loss.timings().cache_warning << "\n";
    if (!loss.timings().tuning_warning.empty()) std::cerr << "lossjit: warning: " << loss.timings().tuning_warning << "\n";
    if (args.timings) {
        print_timings(loss.timings(), report.value("first_call_ms", -1.0));
        print_kernel_info(loss);
    }
}

int run_command(const RunArgs& args) {
    Prepared prepared = prepare(args.common);
    lossjit::Loss& loss = prepared.loss;
    RunInputs in = run_inputs(args, prepared);
    dump_stages(loss, args.dumps, in.host_views, in.arch, in.grads);
    // A gradient the program cannot have (trigamma's) fails here, before any value is printed.
    if (!in.grads.empty()) (void)loss.derivatives(in.grads);
    nlohmann::json report;
    report["program"] = args.common.program;
    report["kind"] = loss.kind() == lossjit::Kind::Map ? "map" : std::string(loss.reduction());
    if (in.gpu) {
        upload_inputs(in, args.common.device, report);
    } else {
        if (!args.cpu) std::cerr << "lossjit: " << in.why_no_gpu << "; evaluating on the CPU reference (float64)\n";
        report["device"] = "cpu-reference";
    }
    int status = loss.kind() == lossjit::Kind::Reduction ? run_reduction(loss, args, in, report) : run_map(loss, args, in, report);
    if (!in.grads.empty())
        status = std::max(status, run_gradients(loss, args, in.gpu, in.host, in.host_views, in.device_views, in.grads,
                                                in.grad_files, report));
    finish_report(loss, args, report);
    return status;
}

int emit_command(const CommonArgs& args, const std::vector<std::string>& grads) {
    Prepared prepared = prepare(args);
    std::cout << prepared.loss.cuda_source(shape_views(prepared.inputs), grads);
    return 0;
}

int compile_command(const CommonArgs& args, const std::string& arch, bool json) {
    Prepared prepared = prepare(args);
    const auto build = prepared.loss.compile_kernel(shape_views(prepared.inputs), arch);
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
    return 0;
}

// ---- bench and tune -------------------------------------------------------------------------------

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

void add_common(CLI::App* cmd, CommonArgs& args) {
    cmd->add_option("program", args.program, "the program text, or a .loss file holding it")->required();
    cmd->add_option("-i,--input", args.inputs,
                    "NAME=SHAPE:GENERATOR (uniform[lo,hi], normal[mean,std], sign, softmax, const[v], range) "
                    "or NAME=file.npy; repeat per input")
        ->allow_extra_args(false);
    cmd->add_option("-p,--param", args.params, "NAME=VALUE: declare a parameter or set its default; repeatable")
        ->allow_extra_args(false);
    cmd->add_option("--seed", args.seed, "seed for the generators")->capture_default_str();
    cmd->add_option("--device", args.device, "CUDA device ordinal")->capture_default_str();
    cmd->add_option("-k,--knob", args.knobs,
                    "KNOB=VALUE: a kernel variant knob (block, items, unroll, vector, blocks_per_sm, acc, fast_math; "
                    "docs/tuning.md); repeatable. Set knobs override the tuning store")
        ->allow_extra_args(false);
    cmd->add_flag("--no-tuning", args.no_tuning, "ignore knobs stored by `lossjit tune`");
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"lossjit: a loss written as a string becomes one fused GPU kernel"};
    app.require_subcommand(1);

    RunArgs run;
    auto* run_cmd = app.add_subcommand("run", "evaluate a program (on the GPU, or the CPU reference without one)");
    add_common(run_cmd, run.common);
    run_cmd->add_option("--dump", run.dumps, "print a stage first: ast, checked, grad (derivatives), cuda, ptx")
        ->check(CLI::IsMember({"ast", "checked", "grad", "cuda", "ptx"}))
        ->allow_extra_args(false);
    run_cmd->add_option("--grad", run.grads,
                        "also compute the gradient with respect to this input (a map: of the "
                        "sum of its output); repeatable")
        ->allow_extra_args(false);
    run_cmd->add_option("--output-grad", run.output_grads, "NAME=FILE.npy: write that gradient (float32); implies --grad NAME")
        ->allow_extra_args(false);
    run_cmd->add_option("-o,--output", run.output, "write a map's result to this .npy file");
    run_cmd->add_flag("--check", run.check, "also evaluate on the CPU reference and compare (exit 1 if off)");
    run_cmd->add_option("--tolerance", run.tolerance, "relative error --check accepts")->capture_default_str();
    run_cmd->add_flag("--cpu", run.cpu, "use the CPU reference even if there is a GPU");
    run_cmd->add_flag("--timings", run.timings, "print where the time went");
    run_cmd->add_flag("--json", run.json, "print a JSON report instead of plain text");
    run_cmd->add_option("--arch", run.arch, "architecture for --dump ptx when there is no GPU")->capture_default_str();

    CommonArgs emit;
    auto* emit_cmd = app.add_subcommand("emit", "print the CUDA C++ generated for a program");
    add_common(emit_cmd, emit);
    std::vector<std::string> emit_grads;
    emit_cmd->add_option("--grad", emit_grads, "print the fused value-and-gradient kernel for these inputs")
        ->allow_extra_args(false);

    CommonArgs compile;
    std::string arch = "sm_90";
    bool compile_json = false;
    auto* compile_cmd = app.add_subcommand("compile", "compile a program's kernel into the cache (no GPU needed)");
    add_common(compile_cmd, compile);
    compile_cmd->add_option("--arch", arch, "sm_XX for CUBIN, compute_XX for PTX")->capture_default_str();
    compile_cmd->add_flag("--json", compile_json, "print a JSON report");

    BenchArgs bench;
    auto* bench_cmd = app.add_subcommand("bench", "time kernel variants on the GPU: a table sorted by time, with GB/s, "
                                                  "% of roofline, registers, occupancy and the error");
    add_common(bench_cmd, bench.common);
    add_bench_options(bench_cmd, bench);

    BenchArgs tune;
    auto* tune_cmd = app.add_subcommand("tune", "search the knobs on this GPU and store the fastest accurate variant "
                                                "for later compiles of this program and these shapes");
    add_common(tune_cmd, tune.common);
    add_bench_options(tune_cmd, tune);
    tune_cmd->add_option("--tolerance", tune.tolerance,
                         "relative error a variant may have against the float64 reference (or the defaults' own "
                         "error, if larger)")
        ->capture_default_str();
    tune_cmd->add_flag("--dry-run", tune.dry_run, "search and report, store nothing");

    auto* functions_cmd =
        app.add_subcommand("functions", "list the language's operators and functions, with their derivatives");
    app.add_subcommand("info", "show the lossjit version and the CUDA device");
    const auto cache_commands = lossjit::cli::add_cache_commands(app);
    const auto repl_command = lossjit::cli::add_repl_command(app);

    CLI11_PARSE(app, argc, argv);
    try {
        if (run_cmd->parsed()) return run_command(run);
        if (emit_cmd->parsed()) return emit_command(emit, emit_grads);
        if (compile_cmd->parsed()) return compile_command(compile, arch, compile_json);
        if (bench_cmd->parsed()) return bench_command(bench, false);
        if (tune_cmd->parsed()) return bench_command(tune, true);
        if (functions_cmd->parsed()) {
            std::cout << lossjit::dump_language();
            return 0;
        }
        if (const auto status = lossjit::cli::run_cache_commands(*cache_commands)) return *status;
        if (const auto status = lossjit::cli::run_repl_command(*repl_command)) return *status;
        return info_command();
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
