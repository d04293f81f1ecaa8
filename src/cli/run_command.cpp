#include "cli/run_command.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/program.hpp"
#include "tools/host.hpp"
#include "tools/json_text.hpp"
#include "util/numeric.hpp"

namespace lossjit::cli {
namespace {

using Clock = std::chrono::steady_clock;
using util::relative_error;

// What `run` writes (a map's output, gradients, and the --output and --output-grad files) is of the
// dtype the library gives by default: a map's output the promoted floating type of its inputs
// (Loss::output_dtype), a gradient its input's dtype, as torch does. Everything below holds these
// in HostTensors of that dtype (device buffers sized by their bytes, elements read through at()).
DType gradient_dtype(const HostTensor& input) {
    return is_floating(input.dtype) ? input.dtype : DType::float32;  // an integer input: the library refuses it
}

// The largest elementwise relative_error between two tensors of one shape, read as doubles.
double largest_relative_error(const HostTensor& values, const HostTensor& reference) {
    if (values.shape != reference.shape) return INFINITY;
    double worst = 0;
    for (std::int64_t i = 0, n = values.numel(); i < n; ++i)
        worst = std::max(worst, relative_error(values.at(i), reference.at(i)));
    return worst;
}

// The first `count` elements, for printing.
std::vector<double> first_elements(const HostTensor& t, std::size_t count) {
    std::vector<double> out;
    for (std::int64_t i = 0, n = std::min<std::int64_t>(t.numel(), static_cast<std::int64_t>(count)); i < n; ++i)
        out.push_back(t.at(i));
    return out;
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

// `--dump grad` without --grad shows every input's derivative: those of floating inputs (an
// index or mask has none).
std::string derivatives_to_dump(lossjit::Loss& loss, const std::vector<std::string>& grads,
                                const std::vector<TensorView>& shapes) {
    if (!grads.empty()) return loss.derivatives(grads, shapes);
    std::vector<std::string> floating;
    for (std::size_t k = 0; k < loss.inputs().size() && k < shapes.size(); ++k)
        if (lossjit::is_floating(shapes[k].dtype)) floating.push_back(loss.inputs()[k]);
    return loss.derivatives(floating, shapes);
}

void dump_stages(lossjit::Loss& loss, const std::vector<std::string>& stages, const std::vector<TensorView>& shapes,
                 const std::string& arch, const std::vector<std::string>& grads) {
    for (const auto& stage : stages) {
        std::cout << "// ---- " << stage << " ----\n";
        if (stage == "ast") std::cout << loss.ast();
        else if (stage == "checked") std::cout << loss.checked();
        else if (stage == "grad") std::cout << derivatives_to_dump(loss, grads, shapes);
        else if (stage == "cuda") {
            for (const auto& source : loss.statistic_sources(shapes)) std::cout << source << "\n";  // run first
            std::cout << loss.cuda_source(shapes);
        }
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
    // A map's upstream gradient: ones, in float32 as the library takes it. A reduction has none; an
    // empty tensor stands in.
    const HostTensor ones =
        HostTensor::from_floats(map ? shape : lossjit::Shape{0},
                                std::vector<float>(map ? static_cast<std::size_t>(lossjit::element_count(shape)) : 0, 1.0f));
    auto reference = [&] { return map ? loss.reference_grad(host_views, grads, ones.view()) : loss.reference_grad(host_views, grads); };

    (void)loss.derivatives(grads, host_views);  // an unknown or repeated name: the library's message, before any work
    std::vector<lossjit::ReferenceGradient> result;
    std::string where = "CPU reference, float64";
    if (gpu) {
        try {
            std::vector<HostTensor> downloaded;
            std::vector<lossjit::DeviceBuffer> buffers;
            std::vector<lossjit::OutputView> views;
            for (const auto& name : grads) {
                const auto it = std::find(loss.inputs().begin(), loss.inputs().end(), name);
                if (it == loss.inputs().end()) break;  // grad() names the mistake
                const auto& input = host[static_cast<std::size_t>(it - loss.inputs().begin())];
                downloaded.emplace_back(input.shape, gradient_dtype(input));
                buffers.emplace_back(std::max<std::size_t>(downloaded.back().bytes.size(), 1), args.common.device);
                buffers.back().fill_bytes(0xFF);  // NaN: an unwritten element cannot pass a check
                views.push_back(lossjit::OutputView::contiguous(buffers.back().data(), input.shape, downloaded.back().dtype));
                result.push_back({name, input.shape, {}});
            }
            std::optional<lossjit::DeviceBuffer> upstream;
            if (map) {
                upstream.emplace(std::max<std::size_t>(ones.bytes.size(), 1), args.common.device);
                upstream->upload(ones.bytes.data(), ones.bytes.size());
                loss.grad(device_views, grads, views, TensorView::contiguous(upstream->data(), shape, ones.dtype));
            } else {
                loss.grad(device_views, grads, views);
            }
            lossjit::synchronize(args.common.device);
            for (std::size_t k = 0; k < result.size(); ++k) {
                buffers[k].download(downloaded[k].bytes.data(), downloaded[k].bytes.size());
                for (std::int64_t i = 0, n = downloaded[k].numel(); i < n; ++i)
                    result[k].values.push_back(downloaded[k].at(i));
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
        // Every name in `result` is an input (grad() and reference_grad() checked them).
        const auto slot = std::find(loss.inputs().begin(), loss.inputs().end(), g.input) - loss.inputs().begin();
        const DType dtype = gradient_dtype(host[static_cast<std::size_t>(slot)]);
        nlohmann::json entry{{"shape", g.shape}, {"device", where == "GPU" ? "gpu" : "cpu-reference"}};
        for (const auto& [name, file] : grad_files) {
            if (name != g.input) continue;
            HostTensor written(g.shape, dtype);
            for (std::size_t i = 0; i < g.values.size(); ++i) written.set(static_cast<std::int64_t>(i), g.values[i]);
            lossjit::save_npy(file, written);
            entry["output"] = file;
        }
        const std::size_t shown = std::min<std::size_t>(g.values.size(), 6);
        entry["first"] = std::vector<double>(g.values.begin(), g.values.begin() + static_cast<std::ptrdiff_t>(shown));
        if (!expected.empty()) {
            // The reference rounded as the GPU's gradient was, and a tolerance of at least one unit in
            // the last place of its dtype (a bfloat16 gradient holds 8 significant bits).
            HostTensor rounded(g.shape, dtype);
            for (std::size_t i = 0; i < expected[k].values.size(); ++i)
                rounded.set(static_cast<std::int64_t>(i), expected[k].values[i]);
            std::vector<double> reference(expected[k].values.size());
            for (std::size_t i = 0; i < reference.size(); ++i) reference[i] = rounded.at(static_cast<std::int64_t>(i));
            // One unit in the last place of the largest element, relative to it: 2^(1 - significand bits)
            // for the 16-bit types; float32 and float64 keep the caller's tolerance.
            const double unit = size_of(dtype) == 2 ? std::ldexp(1.0, 1 - significand_bits(dtype)) : 0.0;
            const double tolerance = std::max(args.tolerance, unit);
            const double error = util::largest_error_relative_to_max(g.values, reference);
            entry["rel_error"] = error;
            if (!(error <= tolerance)) status = 1;
            if (!args.json)
                std::cerr << fmt::format("check: grad {} vs the CPU reference (rounded to {}): largest difference {:.3g} "
                                         "of the largest magnitude ({}, tolerance {:.3g})\n", g.input, to_string(dtype),
                                         error, error <= tolerance ? "ok" : "FAILED", tolerance);
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
        in.buffers.emplace_back(h.bytes.size(), device);
        in.buffers.back().upload(h.bytes.data(), h.bytes.size());
        in.device_views.push_back(TensorView::contiguous(in.buffers.back().data(), h.shape, h.dtype));
    }
}

// What the kernels cannot do yet (takes of K indices per row) the reference still can: said on
// stderr, and the report names the reference as the device. Returns false: not on the GPU.
bool fall_back_to_reference(const lossjit::UnsupportedError& e, nlohmann::json& report) {
    std::cerr << "lossjit: " << e.what() << "; computing on the CPU reference instead\n";
    report["device"] = "cpu-reference";
    return false;
}

// A reduction's value (each of its results) on the GPU or the reference; with --check on the GPU,
// compared with the reference.
int run_reduction(lossjit::Loss& loss, const RunArgs& args, const RunInputs& in, nlohmann::json& report) {
    bool gpu = in.gpu;
    const auto& host_views = in.host_views;
    const auto& device_views = in.device_views;
    const std::size_t count = loss.result_count();
    int status = 0;
    std::vector<double> values;
    if (gpu) {
        // The values in the inputs' promoted dtype: a float64 program's value is not cut to float32.
        const bool float64 = loss.output_dtype(device_views) == DType::float64;
        std::optional<DeviceBuffer> result;
        if (float64) result.emplace(sizeof(double) * count, args.common.device);
        auto evaluate = [&] {
            if (!float64) {
                const std::vector<float> got = loss.values(device_views);
                return std::vector<double>(got.begin(), got.end());
            }
            const OutputView view = count == 1 ? OutputView{result->data(), DType::float64, {}, {}}
                                               : OutputView::contiguous(result->data(), Dims{static_cast<std::int64_t>(count)},
                                                                        DType::float64);
            loss.evaluate(device_views, view);
            std::vector<double> v(count);
            result->download(v.data(), sizeof(double) * count);  // on the legacy stream, after the kernel
            return v;
        };
        try {
            const auto start = Clock::now();
            values = evaluate();
            report["first_call_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
            const auto again = Clock::now();
            evaluate();
            report["warm_call_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - again).count();
        } catch (const lossjit::UnsupportedError& e) {
            gpu = fall_back_to_reference(e, report);
        }
    }
    if (!gpu) values = loss.reference_values(host_views);
    const std::vector<std::string> names = loss.results();
    report["value"] = values.front();
    if (!names.empty())
        for (std::size_t k = 0; k < count; ++k) report["outputs"][names[k]] = values[k];
    std::vector<double> reference;
    if (gpu && args.check) {
        reference = loss.reference_values(host_views);
        double error = 0;
        for (std::size_t k = 0; k < count; ++k) error = std::max(error, relative_error(values[k], reference[k]));
        report["reference"] = reference.front();
        if (!names.empty())
            for (std::size_t k = 0; k < count; ++k) report["reference_outputs"][names[k]] = reference[k];
        report["rel_error"] = error;
        if (!(error <= args.tolerance)) status = 1;
    }
    if (!args.json) {
        for (std::size_t k = 0; k < count; ++k) {
            const std::string name = names.empty() ? std::string() : names[k] + " = ";
            std::cout << fmt::format("{}{:.9g}\n", name, values[k]);
            if (!reference.empty()) {
                const double error = relative_error(values[k], reference[k]);
                std::cerr << fmt::format("check: {}GPU {:.9g}, CPU reference {:.17g}, relative error {:.3g} ({})\n",
                                         names.empty() ? "" : names[k] + ": ", values[k], reference[k], error,
                                         error <= args.tolerance ? "ok" : "FAILED");
            }
        }
    }
    return status;
}

// A map's values on the GPU or the reference, optionally written to --output; --check as above.
int run_map(lossjit::Loss& loss, const RunArgs& args, const RunInputs& in, nlohmann::json& report) {
    bool gpu = in.gpu;
    const auto& host_views = in.host_views;
    const auto& device_views = in.device_views;
    int status = 0;
    std::optional<lossjit::DeviceBuffer> output_buffer;
    const lossjit::Shape shape = loss.output_shape(host_views);
    HostTensor out(shape, loss.output_dtype(host_views));
    if (gpu) {
        output_buffer.emplace(out.bytes.size(), args.common.device);
        output_buffer->fill_bytes(0xFF);  // NaN everywhere: an unwritten element cannot pass a check
        try {
            const auto start = Clock::now();
            loss.map(device_views, lossjit::OutputView::contiguous(output_buffer->data(), shape, out.dtype));
            lossjit::synchronize(args.common.device);
            report["first_call_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
            output_buffer->download(out.bytes.data(), out.bytes.size());
        } catch (const lossjit::UnsupportedError& e) {
            gpu = fall_back_to_reference(e, report);
        }
    }
    if (!gpu) loss.reference_map(host_views, out.output());
    if (gpu && args.check) {
        HostTensor reference(shape, out.dtype);
        loss.reference_map(host_views, reference.output());
        const double worst = largest_relative_error(out, reference);
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
        const std::vector<double> first = first_elements(out, 6);
        std::cout << fmt::format("; first values: {:.7g}{}\n", fmt::join(first, ", "),
                                 out.numel() > static_cast<std::int64_t>(first.size()) ? ", ..." : "");
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

// Options that would do nothing here are refused, not ignored: the user asked for something.
void refuse_idle_options(const RunArgs& args, const lossjit::Loss& loss, const RunInputs& in) {
    if (!args.output.empty() && loss.kind() == lossjit::Kind::Reduction)
        throw UsageError(fmt::format("-o/--output writes a map's output, and this program is a {} reduction (its value "
                                     "is printed; --output-grad NAME=FILE.npy writes a gradient)",
                                     loss.reduction()));
    if (args.check && args.cpu)
        throw UsageError("--check compares the GPU's result with the CPU reference, and --cpu asks for no GPU");
    if (args.check && !in.gpu)
        throw UsageError(fmt::format("--check compares the GPU's result with the CPU reference, and there is no GPU "
                                     "here ({})",
                                     in.why_no_gpu));
}

int run_command(const RunArgs& args) {
    Prepared prepared = prepare(args.common);
    lossjit::Loss& loss = prepared.loss;
    RunInputs in = run_inputs(args, prepared);
    refuse_idle_options(args, loss, in);
    dump_stages(loss, args.dumps, in.host_views, in.arch, in.grads);
    // A gradient the program cannot have (trigamma's, an integer input's) fails here, before any
    // value is printed.
    if (!in.grads.empty()) (void)loss.derivatives(in.grads, in.host_views);
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

void add_run_options(CLI::App* cmd, RunArgs& args) {
    cmd->add_option("--dump", args.dumps, "print a stage first: ast, checked, grad (derivatives), cuda, ptx")
        ->check(CLI::IsMember({"ast", "checked", "grad", "cuda", "ptx"}))
        ->allow_extra_args(false);
    cmd->add_option("--grad", args.grads,
                        "also compute the gradient with respect to this input (a map: of the "
                        "sum of its output); repeatable")
        ->allow_extra_args(false);
    cmd->add_option("--output-grad", args.output_grads, "NAME=FILE.npy: write that gradient (of its input's dtype, as torch); implies --grad NAME")
        ->allow_extra_args(false);
    cmd->add_option("-o,--output", args.output, "write a map's result to this .npy file");
    cmd->add_flag("--check", args.check, "also evaluate on the CPU reference and compare (exit 1 if off)");
    cmd->add_option("--tolerance", args.tolerance, "relative error --check accepts")->capture_default_str();
    cmd->add_flag("--cpu", args.cpu, "use the CPU reference even if there is a GPU");
    cmd->add_flag("--timings", args.timings, "print where the time went");
    cmd->add_flag("--json", args.json, "print a JSON report instead of plain text");
    cmd->add_option("--arch", args.arch, "architecture for --dump ptx when there is no GPU")->capture_default_str();
}

}  // namespace

Command add_run_command(CLI::App& app) {
    auto args = std::make_shared<RunArgs>();
    auto* cmd = app.add_subcommand("run", "evaluate a program (on the GPU, or the CPU reference without one)");
    add_common(cmd, args->common);
    add_run_options(cmd, *args);
    return {cmd, [args] { return run_command(*args); }};
}

}  // namespace lossjit::cli
