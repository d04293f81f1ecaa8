#include "cli/program.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "codegen/kinds/defaults.hpp"
#include "tools/host.hpp"
#include "tuning/knobs.hpp"

namespace lossjit::cli {
namespace {

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
    // --param declares a parameter (or sets the program's `param` default); compile() refuses one
    // the program never reads.
    for (const auto& p : args.params) options.params.push_back(parse_param_arg(p));
    for (const auto& k : args.knobs) lossjit::set_knob(options.knobs, k);
    options.use_tuning = !args.no_tuning;
    options.gpu = args.gpu;
    return {std::move(text), std::move(options), std::move(given)};
}

}  // namespace

Prepared prepare(const CommonArgs& args) {
    auto [text, options, given] = program_options(args);
    lossjit::Loss loss = lossjit::compile(text, options);
    // An --input the program never reads is a typo too (or the wrong program): the library accepts
    // unread inputs so that callers can keep one signature, but here nobody relies on that.
    for (const auto& i : given) {
        if (loss.uses(i.name)) continue;
        std::vector<std::string> read;
        for (const auto& name : loss.inputs())
            if (loss.uses(name)) read.push_back(name);
        throw UsageError(fmt::format("--input {}: the program does not read an input '{}' (it reads {})", i.name, i.name,
                                     read.empty() ? "none" : fmt::format("{}", fmt::join(read, ", "))));
    }
    if (given.empty() && !loss.inputs().empty()) {
        throw UsageError(fmt::format("the program reads {}: give each with --input NAME=SHAPE:GENERATOR "
                                     "(e.g. --input {}=1024x1024:uniform) or --input NAME=file.npy",
                                     fmt::join(loss.inputs(), ", "), loss.inputs().front()));
    }
    return {std::move(loss), std::move(given), std::move(text), std::move(options)};
}

std::vector<TensorView> shape_views(const std::vector<InputArg>& inputs) {
    std::vector<TensorView> views;
    for (const auto& i : inputs) {
        if (i.is_file()) {
            const HostTensor t = lossjit::load_npy(i.spec);
            views.push_back(TensorView::contiguous(nullptr, t.shape, t.dtype));
        } else {
            const std::string spec = i.spec.find(':') == std::string::npos ? i.spec + ":uniform" : i.spec;
            const GeneratorSpec g = lossjit::parse_generator(spec);
            views.push_back(TensorView::contiguous(nullptr, g.shape, g.dtype));
        }
    }
    return views;
}

void add_common(CLI::App* cmd, CommonArgs& args) {
    cmd->add_option("program", args.program, "the program text, or a .loss file holding it")->required();
    cmd->add_option("-i,--input", args.inputs,
                    "NAME=SHAPE:GENERATOR[:DTYPE] (uniform[lo,hi], normal[mean,std], sign, softmax, const[v], range, "
                    "integers[lo,hi]; DTYPE f32 (default), f64, bf16, f16, i32, i64, u8 or bool) or NAME=file.npy; "
                    "repeat per input")
        ->allow_extra_args(false);
    cmd->add_option("-p,--param", args.params, "NAME=VALUE: declare a parameter or set its default; repeatable")
        ->allow_extra_args(false);
    cmd->add_option("--seed", args.seed, "seed for the generators")->capture_default_str();
    cmd->add_option("--device", args.device, "CUDA device ordinal")->capture_default_str();
    std::vector<std::string> knob_names;
    for (const auto& k : knob_help()) knob_names.emplace_back(k.name);
    cmd->add_option("-k,--knob", args.knobs,
                    fmt::format("KNOB=VALUE: a kernel variant knob ({}; docs/tuning.md); repeatable. Set knobs override "
                                "the tuning store",
                                fmt::join(knob_names, ", ")))
        ->allow_extra_args(false);
    cmd->add_flag("--no-tuning", args.no_tuning, "ignore knobs stored by `lossjit tune`");
}

void add_gpu_option(CLI::App* cmd, std::string& gpu) {
    std::vector<std::string> names;
    for (const auto& g : named_gpus()) names.push_back(fmt::format("{} ({})", g.name, g.description));
    cmd->add_option("--gpu", gpu,
                    fmt::format("choose the kernels as this GPU would (its defaults and shared memory): {}; default: "
                                "as for no GPU in particular (docs/cache.md)",
                                fmt::join(names, ", ")));
}


}  // namespace lossjit::cli
