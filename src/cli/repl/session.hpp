// The REPL's session: its inputs, parameters and definitions, the programs it builds from them (a
// line plus the definitions it depends on, found over the AST), and the command table's type.
// Internal to src/cli/repl/.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/args.hpp"
#include "lang/ast.hpp"
#include "lossjit/lossjit.hpp"
#include "tools/host.hpp"

namespace CLI {
class App;
}

namespace lossjit::cli {

struct ReplCommand {
    CLI::App* app = nullptr;
    std::vector<std::string> inputs;
    std::vector<std::string> params;
    std::uint64_t seed = 0;
    int device = 0;
    bool cpu = false;
    bool echo = false;
};

namespace repl {

// Text helpers shared by the session and the commands.
std::string trim(std::string_view s);
std::vector<std::string> split_words(std::string_view s);
std::string strip_comment(std::string_view line);  // the language has no strings: '#' starts a comment
std::string collapse_whitespace(std::string_view s);  // runs of whitespace, newlines too, become one space
// The non-empty pieces between ';', each passed through `tidy` (trim, collapse_whitespace).
std::vector<std::string> split_statements(std::string_view text, std::string (*tidy)(std::string_view));
// The names a parsed program's bindings and body read, in source order (functions are not names).
std::vector<std::string> names_read(const ast::Program& program);


struct Input {
    std::string name;
    std::string spec;  // as given: SHAPE[:GENERATOR] or FILE.npy
    HostTensor host;
    std::optional<DeviceBuffer> device;  // uploaded on first use on the GPU
};

struct Definition {
    std::string name;
    std::string text;                // "d = abs(p - t)" or "param beta = 1", without the ';'
    std::vector<std::string> reads;  // names the bound expression reads
};

struct CachedLoss {
    Loss loss;
    bool launched = false;  // has it run on the GPU (so its kernel is built)?
    std::string text;       // the program compiled (definitions + line), for :sweep
    Options options;
};

// A line made into a program: the session's definitions it needs, then the line.
struct Compiled {
    CachedLoss* entry = nullptr;
    std::vector<std::size_t> inputs;  // session input per input of the loss
};

class Repl;

struct Command {
    std::string_view name;
    std::string_view args;
    std::string_view help;
    void (Repl::*handler)(const std::string& arg);
};

class Repl {
public:
    explicit Repl(const ReplCommand& options)
        : seed_(options.seed), device_(options.device), force_cpu_(options.cpu), echo_(options.echo) {}

    int run();
    void initial_inputs(const std::vector<std::string>& inputs, const std::vector<std::string>& params) {
        for (const auto& i : inputs) set_input(parse_input_arg(i, "--input"), /*quiet=*/true);
        for (const auto& p : params) set_param(parse_param_arg(p, "--param"));
    }

private:
    // ---- commands ----
    void cmd_help(const std::string& arg);
    void cmd_input(const std::string& arg);
    void cmd_inputs(const std::string& arg);
    void cmd_param(const std::string& arg);
    void cmd_params(const std::string& arg);
    void cmd_defs(const std::string& arg);
    void cmd_unset(const std::string& arg);
    void cmd_seed(const std::string& arg);
    void cmd_ast(const std::string& arg);
    void cmd_checked(const std::string& arg);
    void cmd_cuda(const std::string& arg);
    void cmd_ptx(const std::string& arg);
    void cmd_regs(const std::string& arg);
    void cmd_time(const std::string& arg);
    void cmd_sweep(const std::string& arg);
    void cmd_device(const std::string& arg);
    void cmd_save(const std::string& arg);
    void cmd_load(const std::string& arg);
    void cmd_quit(const std::string& arg);

    static const std::vector<Command>& commands();
    static const Command* find_command(std::string_view name);

    // ---- lines ----
    bool handle(const std::string& line);  // false: the line failed (reported)
    void execute(const std::string& line);
    void define(const std::string& line, const ast::Program& parsed);
    void evaluate(const std::string& line);
    Compiled compile_for(const std::string& arg, std::string_view command);
    Compiled compile_line(const std::string& line);
    void load_script(const std::string& path);
    void load_program(const std::string& path);

    // ---- inputs, parameters, device ----
    void set_input(const InputArg& arg, bool quiet);
    void set_param(const Param& p);
    std::string describe(const Input& in) const;
    std::vector<TensorView> host_views(const Compiled& c) const;
    std::vector<TensorView> shape_views(const Compiled& c) const;
    std::vector<TensorView> device_views(const Compiled& c);
    bool gpu_present();
    bool use_gpu();
    std::string arch();

    // ---- errors ----
    [[noreturn]] void fail_at(const std::string& shown, int column, const std::string& message) const;
    [[noreturn]] void rethrow_in(const SourceError& e, const std::vector<std::string>& shown,
                                 const ast::Program* line = nullptr) const;
    void report(const std::exception& e, bool source_error) const;

    std::vector<Input> inputs_;
    std::vector<Param> params_;
    std::vector<Definition> defs_;
    std::vector<std::string> expressions_;  // evaluated without error, each once, in order
    std::string last_;
    std::map<std::string, CachedLoss> losses_;
    std::uint64_t seed_;
    int device_;
    bool force_cpu_;
    bool echo_;
    bool interactive_ = false;
    bool probed_ = false, has_gpu_ = false, noted_cpu_ = false;
    std::string why_no_gpu_;
    bool quit_ = false;
    int load_depth_ = 0;
    std::string source_name_ = "expr";  // where the current line came from (a file during :load)
    int source_line_ = 1;
};

}  // namespace repl
}  // namespace lossjit::cli
