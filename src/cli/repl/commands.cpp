// The REPL's commands: one table entry each (name, arguments, help, handler), and the subcommand.
#include "cli/repl/repl.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/repl/session.hpp"
#include "cuda/driver.hpp"
#include "cuda/timer.hpp"
#include "pipeline.hpp"
#include "tools/sweep.hpp"
#include "util/atomic_file.hpp"
#include "util/units.hpp"

namespace lossjit::cli {
namespace repl {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kMaxLoadDepth = 8;

}  // namespace

const std::vector<Command>& Repl::commands() {
    static const std::vector<Command> table = {
        {":help", "[COMMAND]", "this list, or one command's line", &Repl::cmd_help},
        {":input", "NAME=SPEC...", "set inputs: SHAPE[:GENERATOR] or FILE.npy, as `run --input` takes them",
         &Repl::cmd_input},
        {":inputs", "", "list the inputs and their shapes", &Repl::cmd_inputs},
        {":param", "NAME=VALUE...", "set parameters (declares one, or overrides a `param` default)", &Repl::cmd_param},
        {":params", "", "list the parameters set with :param", &Repl::cmd_params},
        {":defs", "", "list the definitions (`NAME = EXPR;` and `param NAME = NUMBER;` lines)", &Repl::cmd_defs},
        {":unset", "NAME...", "forget an input, a parameter or a definition", &Repl::cmd_unset},
        {":seed", "[N]", "show or set the generators' seed (regenerates their inputs)", &Repl::cmd_seed},
        {":ast", "[EXPR]", "the syntax tree of EXPR (default: the last expression)", &Repl::cmd_ast},
        {":checked", "[EXPR]", "the checked program", &Repl::cmd_checked},
        {":cuda", "[EXPR]", "the CUDA C++ generated for the current input shapes", &Repl::cmd_cuda},
        {":ptx", "[EXPR]", "the PTX NVRTC makes of it (for this GPU; sm_90 without one)", &Repl::cmd_ptx},
        {":regs", "[EXPR]", "the kernel's registers, spills and occupancy (runs it once on the GPU; without one, its CUBIN's)",
         &Repl::cmd_regs},
        {":time", "[EXPR]", "time the kernel on the GPU", &Repl::cmd_time},
        {":sweep", "KNOB=V1,V2... ...", "time the last expression's kernel across knob values (as `lossjit bench --sweep`)",
         &Repl::cmd_sweep},
        {":device", "[cpu|gpu]", "show where values come from, or choose", &Repl::cmd_device},
        {":save", "FILE", "write the session's definitions as a script that :load replays", &Repl::cmd_save},
        {":load", "FILE", "run a script of REPL lines, or a .loss program (its bindings become definitions)",
         &Repl::cmd_load},
        {":quit", "", "leave (also :q, :exit, or Ctrl-D)", &Repl::cmd_quit},
    };
    return table;
}

const Command* Repl::find_command(std::string_view name) {
    if (name == ":q" || name == ":exit") name = ":quit";
    if (name == ":h" || name == ":?") name = ":help";
    for (const auto& c : commands())
        if (c.name == name) return &c;
    return nullptr;
}


// ---- commands ----------------------------------------------------------------------------------

void Repl::cmd_help(const std::string& arg) {
    auto line = [](const Command& c) {
        const std::string head = c.args.empty() ? std::string(c.name) : fmt::format("{} {}", c.name, c.args);
        return fmt::format("  {:<22} {}\n", head, c.help);
    };
    if (!arg.empty()) {
        const Command* c = find_command(arg[0] == ':' ? arg : ":" + arg);
        if (!c) throw UsageError(fmt::format("unknown command '{}' (:help lists the commands)", arg));
        std::cout << line(*c);
        if (c->name == ":input")
            std::cout
                << "  SHAPE is like 1024x1024, 4096 or scalar; GENERATOR is uniform[lo,hi] (the default, [0,1]),\n"
                   "  normal[mean,std], sign, softmax, const[v], range or integers[lo,hi], seeded (:seed), and may\n"
                   "  end in a dtype, :bf16, :f16, :f64, :i32, :i64, :u8 or :bool (float32 without one)\n";
        return;
    }
    std::cout << "Type an expression to evaluate it on the current inputs: a reduction prints its value, a map its\n"
                 "shape and first values. A line of definitions (`d = abs(p - t);`, `param beta = 1;`) names\n"
                 "things for later lines; defining a name again replaces it. Commands:\n";
    for (const auto& c : commands()) std::cout << line(c);
}

void Repl::cmd_input(const std::string& arg) {
    const auto words = split_words(arg);
    if (words.empty())
        throw UsageError(":input needs NAME=SHAPE:GENERATOR or NAME=FILE.npy (e.g. :input p=1024x1024:uniform)");
    for (const auto& w : words) set_input(parse_input_arg(w, ":input"), false);
}

void Repl::cmd_inputs(const std::string&) {
    if (inputs_.empty()) std::cout << "no inputs (give one with :input NAME=SHAPE:GENERATOR or NAME=FILE.npy)\n";
    for (const auto& in : inputs_) std::cout << describe(in) << "\n";
}

void Repl::cmd_param(const std::string& arg) {
    const auto words = split_words(arg);
    if (words.empty()) throw UsageError(":param needs NAME=VALUE (e.g. :param beta=0.5)");
    std::vector<Param> given;
    for (const auto& w : words) given.push_back(parse_param_arg(w, ":param"));
    for (const auto& p : given) set_param(p);
}

void Repl::cmd_params(const std::string&) {
    if (params_.empty()) std::cout << "no parameters set with :param\n";
    for (const auto& p : params_) std::cout << fmt::format("{} = {}\n", p.name, p.value);
}

void Repl::cmd_defs(const std::string&) {
    if (defs_.empty()) std::cout << "no definitions\n";
    for (const auto& d : defs_) std::cout << d.text << ";\n";
}

void Repl::cmd_unset(const std::string& arg) {
    const auto words = split_words(arg);
    if (words.empty()) throw UsageError(":unset needs the name of an input, a parameter or a definition");
    for (const auto& name : words) {
        for (const auto& d : defs_) {
            if (d.name != name && std::find(d.reads.begin(), d.reads.end(), name) != d.reads.end())
                throw UsageError(fmt::format("'{}' is used by the definition of '{}'", name, d.name));
        }
        auto in = std::find_if(inputs_.begin(), inputs_.end(), [&](const Input& i) { return i.name == name; });
        auto p = std::find_if(params_.begin(), params_.end(), [&](const Param& q) { return q.name == name; });
        auto d = std::find_if(defs_.begin(), defs_.end(), [&](const Definition& x) { return x.name == name; });
        if (in != inputs_.end())
            inputs_.erase(in);
        else if (p != params_.end())
            params_.erase(p);
        else if (d != defs_.end())
            defs_.erase(d);
        else
            throw UsageError(fmt::format("'{}' is not an input, a parameter or a definition", name));
    }
}

void Repl::cmd_seed(const std::string& arg) {
    if (arg.empty()) {
        std::cout << "seed " << seed_ << "\n";
        return;
    }
    std::uint64_t seed = 0;
    std::size_t used = 0;
    try {
        seed = std::stoull(arg, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != arg.size() || arg[0] == '-')
        throw UsageError(fmt::format(":seed '{}': expected a non-negative integer", arg));
    seed_ = seed;
    for (auto& in : inputs_) {
        InputArg a{in.name, in.spec};
        if (a.is_file()) continue;
        in.host = load_input(a, seed_);
        in.device.reset();
    }
}

void Repl::cmd_ast(const std::string& arg) {
    Compiled c = compile_for(arg, ":ast");
    std::cout << c.entry->loss.ast();
}

void Repl::cmd_checked(const std::string& arg) {
    Compiled c = compile_for(arg, ":checked");
    std::cout << c.entry->loss.checked();
}

void Repl::cmd_cuda(const std::string& arg) {
    Compiled c = compile_for(arg, ":cuda");
    std::cout << c.entry->loss.cuda_source(shape_views(c));
}

void Repl::cmd_ptx(const std::string& arg) {
    Compiled c = compile_for(arg, ":ptx");
    const std::string target = arch();
    std::string ptx = trim_nul(c.entry->loss.ptx(shape_views(c), target));
    if (!ptx.empty() && ptx.back() != '\n') ptx += '\n';
    std::cout << ptx;
}

void Repl::cmd_regs(const std::string& arg) {
    if (force_cpu_ || !gpu_present()) {
        // No kernel runs here: what ptxas gave the kernel, read from its CUBIN (occupancy and the
        // grid need a GPU's numbers).
        Compiled c = compile_for(arg, ":regs");
        const KernelBuild build = c.entry->loss.compile_kernel(shape_views(c), arch());
        if (!build.registers)  // PTX (a GPU this NVRTC does not know), or a CUBIN whose attributes are not read
            throw UsageError(fmt::format(":regs: the kernel's {} image says no registers without a GPU to load it", build.target));
        std::cout << fmt::format("({}: the {} CUBIN, as no GPU in particular chooses the kernel)\n",
                                 force_cpu_ ? "a CPU session" : "no CUDA device", build.target);
        std::cout << fmt::format("{} registers per thread, {} bytes of local memory (spills)\n", *build.registers,
                                 *build.local_bytes);
        return;
    }
    Compiled c = compile_for(arg, ":regs");
    Loss& loss = c.entry->loss;
    const std::vector<TensorView> views = device_views(c);
    // Run it once: the kernel is built for the inputs' layout at the first launch.
    if (loss.kind() == Kind::Reduction) {
        (void)loss(views);
    } else {
        const Shape shape = loss.output_shape(views);
        DeviceBuffer out(std::max<std::size_t>(static_cast<std::size_t>(element_count(shape)), 1) * sizeof(float), device_);
        loss.map(views, OutputView::contiguous(out.data(), shape));
        synchronize(device_);
    }
    c.entry->launched = true;
    const auto info = loss.kernel_info();
    if (!info) throw InternalError("repl: no kernel information after a launch");
    std::cout << fmt::format("{} registers per thread, {} bytes of local memory (spills), {} bytes of shared memory\n",
                             info->registers, info->local_bytes, info->shared_bytes);
    std::cout << fmt::format("{} blocks of {} threads per SM ({:.0f}% occupancy), grid of {} blocks, {}\n",
                             info->blocks_per_sm, info->knobs.block_threads, 100.0 * info->occupancy, info->grid,
                             info->target);
    std::cout << "kernel: " << info->signature << "\n";
    if (!info->tuned.empty()) std::cout << "tuned: " << info->tuned << "\n";
    for (const auto& note : info->notes) std::cout << "note: " << note << "\n";
}

void Repl::cmd_sweep(const std::string& arg) {
    std::vector<SweepAxis> axes;
    std::istringstream words(arg);
    for (std::string word; words >> word;) axes.push_back(parse_sweep_axis(word));
    if (axes.empty())
        throw UsageError(":sweep needs knobs to vary, e.g. :sweep block=128,256,512 items=4,8,16 (see `lossjit bench --help`)");
    if (force_cpu_) throw UsageError(":sweep times the GPU kernel, and this session uses the CPU reference (:device gpu switches)");
    if (!gpu_present()) throw UsageError(fmt::format(":sweep needs a CUDA device ({})", why_no_gpu_));
    Compiled c = compile_for("", ":sweep");
    SweepRequest request;
    request.program = c.entry->text;
    request.base = c.entry->options;
    for (auto& p : request.base.params) {  // the values now, not those of the first compile
        const auto it = std::find_if(params_.begin(), params_.end(), [&](const Param& q) { return q.name == p.name; });
        if (it != params_.end()) p.value = it->value;
    }
    request.axes = std::move(axes);
    request.reps = 10;
    std::vector<HostTensor> inputs;
    for (auto k : c.inputs) inputs.push_back(inputs_[k].host);
    request.input_sets.push_back(std::move(inputs));
    request.progress = [](const SweepProgress& p) {
        if (p.stage == SweepProgress::Stage::Time && p.done + 1 == p.total) std::cerr << "timed " << p.total << " variants\n";
    };
    std::cout << format_sweep_table(run_sweep(request));
}

void Repl::cmd_time(const std::string& arg) {
    if (force_cpu_)
        throw UsageError(":time times the GPU kernel, and this session uses the CPU reference (:device gpu switches)");
    if (!gpu_present()) throw UsageError(fmt::format(":time needs a CUDA device ({})", why_no_gpu_));
    Compiled c = compile_for(arg, ":time");
    Loss& loss = c.entry->loss;
    const std::vector<TensorView> views = device_views(c);
    double bytes = 0;
    for (const auto& v : views) bytes += static_cast<double>(v.numel()) * static_cast<double>(size_of(v.dtype));
    std::optional<DeviceBuffer> result;
    std::optional<OutputView> output;
    if (loss.kind() == Kind::Reduction) {
        result.emplace(sizeof(float) * loss.result_count(), device_);
        output = OutputView::contiguous(result->data(), Dims{static_cast<std::int64_t>(loss.result_count())});
    } else {
        const Shape shape = loss.output_shape(views);
        const auto count = static_cast<std::size_t>(element_count(shape));
        result.emplace(std::max<std::size_t>(count, 1) * sizeof(float), device_);
        output = OutputView::contiguous(result->data(), shape);
        bytes += static_cast<double>(count) * sizeof(float);
    }
    auto launch = [&] {
        if (loss.kind() == Kind::Map)
            loss.map(views, *output);
        else
            loss.evaluate(views, *output);
    };
    auto elapsed_ms = [](Clock::time_point since) {
        return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
    };
    const bool first = !c.entry->launched;
    const auto start = Clock::now();  // the host's clock: the first call may compile the kernel
    launch();
    synchronize(device_);
    const double first_ms = elapsed_ms(start);
    c.entry->launched = true;
    if (first) {
        const Timings& t = loss.timings();
        std::cout << fmt::format("first call {:.1f} ms (kernel: {}{})\n", first_ms, t.cache ? lossjit::to_string(*t.cache) : std::string_view("-"),
                                 t.nvrtc_ms > 0 ? fmt::format(", NVRTC {:.1f} ms", t.nvrtc_ms) : "");
    }
    cuda::EventTimer timer(cuda::Context::for_device(device_));
    const double one_ms = timer.interval_ms(launch);
    // Batches of back-to-back launches of about 20 ms each; the median batch, per launch.
    const int per_batch = std::clamp(static_cast<int>(20.0 / std::max(one_ms, 1e-3)), 1, 1000);
    constexpr int kBatches = 7;
    std::vector<double> per_call;
    for (int b = 0; b < kBatches; ++b) per_call.push_back(timer.interval_ms(launch, per_batch));
    std::sort(per_call.begin(), per_call.end());
    const double median = per_call[kBatches / 2];
    std::cout << fmt::format(
        "{:.4g} ms per call (median of {} batches of {} launches; fastest {:.4g} ms): {} at {:.0f} GB/s\n", median,
        kBatches, per_batch, per_call.front(), util::human_bytes(bytes), bytes / (median * 1e-3) / 1e9);
}

void Repl::cmd_device(const std::string& arg) {
    if (arg == "cpu") {
        force_cpu_ = true;
        std::cout << "values from the CPU reference (float64)\n";
        return;
    }
    if (arg == "gpu") {
        if (!gpu_present()) throw UsageError(fmt::format("no CUDA device: {}", why_no_gpu_));
        force_cpu_ = false;
    } else if (!arg.empty()) {
        throw UsageError(fmt::format(":device '{}': expected cpu or gpu", arg));
    }
    if (force_cpu_) {
        std::cout << "values from the CPU reference (float64), as chosen (:device gpu switches)\n";
    } else if (gpu_present()) {
        const auto info = device_info(device_);
        std::cout << fmt::format("CUDA device {}: {} ({}, {} SMs, {:.1f} GiB)\n", device_, info.name, info.arch(),
                                 info.multiprocessors, static_cast<double>(info.memory_bytes) / (1ull << 30));
    } else {
        std::cout << fmt::format("no CUDA device ({}): values from the CPU reference (float64)\n", why_no_gpu_);
    }
}

void Repl::cmd_save(const std::string& arg) {
    if (arg.empty()) throw UsageError(":save needs a file name");
    std::ostringstream text;
    std::size_t saved = 0;
    text << "# lossjit repl session: replay with `:load FILE` or `lossjit repl < FILE`\n";
    text << ":seed " << seed_ << "\n";
    for (const auto& in : inputs_) text << ":input " << in.name << "=" << in.spec << "\n";
    for (const auto& p : params_) text << fmt::format(":param {}={}\n", p.name, p.value);
    for (const auto& d : defs_) text << d.text << ";\n";
    // Expressions that no longer compile (an input or a definition they read is gone) are left out.
    for (const auto& e : expressions_) {
        try {
            compile_line(e);
        } catch (const Error&) {
            continue;
        }
        text << e << "\n";
        ++saved;
    }
    try {
        util::write_file_atomically(arg, {text.str()});
    } catch (const Error&) {
        throw UsageError(fmt::format(":save: cannot write '{}'", arg));
    }
    auto count = [](std::size_t n, const char* what) { return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"); };
    std::cout << fmt::format("saved {}, {}, {} and {} to {}\n", count(inputs_.size(), "input"),
                             count(params_.size(), "parameter"), count(defs_.size(), "definition"),
                             count(saved, "expression"), arg);
}

void Repl::cmd_load(const std::string& arg) {
    if (arg.empty()) throw UsageError(":load needs a file name");
    if (load_depth_ >= kMaxLoadDepth)
        throw UsageError(fmt::format(":load '{}': files load each other more than {} deep", arg, kMaxLoadDepth));
    if (fs::path(arg).extension() == ".loss")
        load_program(arg);
    else
        load_script(arg);
}

void Repl::load_script(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError(fmt::format(":load: cannot read '{}'", path));
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    const std::string saved_name = source_name_;
    const int saved_line = source_line_;
    ++load_depth_;
    bool ok = true;
    for (std::size_t k = 0; k < lines.size() && ok && !quit_; ++k) {
        const std::string line = trim(lines[k]);
        if (line.empty() || line[0] == '#') continue;
        source_name_ = path;
        source_line_ = static_cast<int>(k + 1);
        if (echo_ || interactive_) std::cout << fmt::format("{}:{}> {}\n", path, k + 1, line);
        ok = handle(line);
        if (!ok) {
            std::cout.flush();
            std::cerr << fmt::format("(:load stopped at {}:{})\n", path, k + 1);
        }
    }
    --load_depth_;
    source_name_ = saved_name;
    source_line_ = saved_line;
}

// A .loss program: its statements become definitions and its body is evaluated, as if typed.
void Repl::load_program(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError(fmt::format(":load: cannot read '{}'", path));
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    // Check the file as a whole first, so that mistakes point at its own lines.
    const ast::Program parsed = parse(text, path);
    {
        Options options;
        options.source_name = path;
        for (const auto& i : inputs_) options.inputs.push_back(i.name);
        // The session's parameters that the file reads: compile() refuses one it never reads.
        const std::vector<std::string> reads = names_read(parsed);
        for (const auto& p : params_)
            if (std::find(reads.begin(), reads.end(), p.name) != reads.end()) options.params.push_back(p);
        const Loss loss = compile(text, options);
        if (!loss.inputs().empty() && inputs_.empty())
            throw UsageError(fmt::format("{} reads {}: give each with :input NAME=SHAPE:GENERATOR first", path,
                                         fmt::join(loss.inputs(), ", ")));
    }
    std::string joined;
    std::istringstream lines(text);
    for (std::string l; std::getline(lines, l);) joined += strip_comment(l) + "\n";
    const std::vector<std::string> pieces = split_statements(joined, collapse_whitespace);
    if (pieces.size() != parsed.statements.size() + 1)
        throw InternalError("repl: the statements of a .loss file did not split at ';'");
    std::string definitions;
    for (std::size_t k = 0; k < parsed.statements.size(); ++k) definitions += (k ? " " : "") + pieces[k] + ";";
    const std::string body = pieces.back();
    const std::string saved_name = source_name_;
    const int saved_line = source_line_;
    source_name_ = path;
    ++load_depth_;
    bool ok = true;
    for (const std::string& line : {definitions, body}) {
        if (line.empty() || !ok) continue;
        if (echo_ || interactive_) std::cout << fmt::format("{}> {}\n", path, line);
        ok = handle(line);
    }
    --load_depth_;
    source_name_ = saved_name;
    source_line_ = saved_line;
}

void Repl::cmd_quit(const std::string&) { quit_ = true; }


}  // namespace repl

std::shared_ptr<ReplCommand> add_repl_command(CLI::App& app) {
    auto command = std::make_shared<ReplCommand>();
    auto* cmd = app.add_subcommand("repl", "an interactive session: evaluate expressions, show stages, time kernels");
    command->app = cmd;
    cmd->add_option("-i,--input", command->inputs, "NAME=SHAPE:GENERATOR or NAME=file.npy to start with; repeatable")
        ->allow_extra_args(false);
    cmd->add_option("-p,--param", command->params, "NAME=VALUE to start with; repeatable")->allow_extra_args(false);
    cmd->add_option("--seed", command->seed, "seed for the generators")->capture_default_str();
    cmd->add_option("--device", command->device, "CUDA device ordinal")->capture_default_str();
    cmd->add_flag("--cpu", command->cpu, "values from the CPU reference even if there is a GPU");
    cmd->add_flag("--echo", command->echo,
                  "reading from a pipe, print each line after the prompt, as a terminal shows it");
    return command;
}

std::optional<int> run_repl_command(const ReplCommand& command) {
    if (!command.app || !command.app->parsed()) return std::nullopt;
    repl::Repl repl(command);
    repl.initial_inputs(command.inputs, command.params);
    return repl.run();
}

}  // namespace lossjit::cli
