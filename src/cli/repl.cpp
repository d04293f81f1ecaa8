#include "cli/repl.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <readline/history.h>
#include <readline/readline.h>
#include <sys/select.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "lang/builtins.hpp"
#include "cli/args.hpp"
#include "tools/host.hpp"
#include "lossjit/lossjit.hpp"
#include "pipeline.hpp"
#include "tools/sweep.hpp"
#include "util/units.hpp"
#include "util/atomic_file.hpp"
#include "cuda/driver.hpp"
#include "cuda/timer.hpp"

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

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kPrompt = "lossjit> ";
constexpr int kMaxLoadDepth = 8;

std::string trim(std::string_view s) {
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return {};
    const auto last = s.find_last_not_of(" \t\r\n");
    return std::string(s.substr(first, last - first + 1));
}

std::vector<std::string> split_words(std::string_view s) {
    std::vector<std::string> words;
    std::istringstream in{std::string(s)};
    for (std::string w; in >> w;) words.push_back(w);
    return words;
}

// The language has no strings, so '#' always starts a comment.
std::string strip_comment(std::string_view line) { return std::string(line.substr(0, line.find('#'))); }

// Runs of whitespace (newlines too) become one space: a statement of a .loss file on one line.
std::string collapse_whitespace(std::string_view s) {
    std::string out;
    bool space = false;
    for (char c : s) {
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            space = !out.empty();
        } else {
            if (space) out += ' ';
            out += c;
            space = false;
        }
    }
    return out;
}

// The names an expression reads, in source order (functions are not names).
void collect_names(const ast::Expr& e, std::vector<std::string>& names) {
    if (e.kind == ast::ExprKind::Name) names.push_back(e.text);
    for (const auto& a : e.args) collect_names(*a, names);
}

const ast::Expr* find_name(const ast::Expr& e, std::string_view name) {
    if (e.kind == ast::ExprKind::Name && e.text == name) return &e;
    for (const auto& a : e.args)
        if (const auto* found = find_name(*a, name)) return found;
    return nullptr;
}

const ast::Expr* name_at(const ast::Expr& e, int column) {
    if (e.kind == ast::ExprKind::Name && e.pos.column == column) return &e;
    for (const auto& a : e.args)
        if (const auto* found = name_at(*a, column)) return found;
    return nullptr;
}

// The name at `column` of a one-line program when a later statement of that line binds it.
std::optional<std::string> bound_later(const ast::Program& line, int column) {
    for (std::size_t k = 0; k < line.statements.size(); ++k) {
        const auto* value = line.statements[k].value.get();
        const ast::Expr* name = value ? name_at(*value, column) : nullptr;
        if (!name) continue;
        for (std::size_t later = k + 1; later < line.statements.size(); ++later)
            if (line.statements[later].name == name->text) return name->text;
    }
    return std::nullopt;
}

std::string generator_text(const GeneratorSpec& g) {
    if (g.args.empty()) return g.kind;
    return fmt::format("{}[{}]", g.kind, fmt::join(g.args, ","));
}

// ---- readline ----------------------------------------------------------------------------------

volatile std::sig_atomic_t g_interrupted = 0;

void on_sigint(int) { g_interrupted = 1; }

std::optional<std::string> g_line;  // what readline's callback received
bool g_end = false;                 // Ctrl-D on an empty line

void on_line(char* line) {
    if (line)
        g_line = line;
    else
        g_end = true;
    std::free(line);
    rl_callback_handler_remove();  // gives the terminal back while the line runs
}

// One line from the terminal through readline's callback interface, so that the loop waiting for
// input is ours: Ctrl-C (SIGINT) drops the line being typed and gives a fresh prompt, where
// readline's own loop would carry on reading. nullopt at Ctrl-D.
std::optional<std::string> read_terminal_line() {
    struct sigaction action {
    }, previous{};
    action.sa_handler = on_sigint;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous);  // no SA_RESTART: pselect() returns EINTR
    // SIGINT stays blocked but inside pselect(), so that none slips between the check and the wait.
    sigset_t block, unblocked;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &unblocked);
    sigdelset(&unblocked, SIGINT);
    g_interrupted = 0;
    g_line.reset();
    g_end = false;
    rl_catch_signals = 0;  // SIGINT is ours; readline still follows the window size
    rl_callback_handler_install(kPrompt, on_line);
    while (!g_line && !g_end) {
        if (g_interrupted) {
            g_interrupted = 0;
            rl_free_line_state();
            rl_callback_sigcleanup();
            rl_replace_line("", 0);
            std::fputs("^C\n", rl_outstream ? rl_outstream : stdout);
            rl_on_new_line();
            rl_redisplay();
            continue;
        }
        fd_set ready;
        FD_ZERO(&ready);
        FD_SET(STDIN_FILENO, &ready);
        if (::pselect(STDIN_FILENO + 1, &ready, nullptr, nullptr, nullptr, &unblocked) < 0) {
            if (errno == EINTR) continue;
            rl_callback_handler_remove();
            g_end = true;
            break;
        }
        rl_callback_read_char();
    }
    sigprocmask(SIG_UNBLOCK, &block, nullptr);  // a Ctrl-C still pending lands in on_sigint, harmlessly
    sigaction(SIGINT, &previous, nullptr);
    if (g_end) return std::nullopt;
    return g_line;
}

std::vector<std::string> g_completions;    // candidates for the word being completed
std::vector<std::string> g_session_names;  // inputs, parameters and definitions, for completion

char* completion_generator(const char* text, int state) {
    static std::size_t next = 0;
    if (state == 0) next = 0;
    const std::string_view prefix(text);
    while (next < g_completions.size()) {
        const std::string& c = g_completions[next++];
        if (c.compare(0, prefix.size(), prefix) == 0) return strdup(c.c_str());
    }
    return nullptr;
}

// Where the history lives: LOSSJIT_HISTORY (a path, or "off"), else the XDG state directory.
std::string history_path() {
    if (const char* h = std::getenv("LOSSJIT_HISTORY")) {
        const std::string value = h;
        return value == "off" ? std::string() : value;
    }
    fs::path base;
    if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state)
        base = state;
    else if (const char* home = std::getenv("HOME"); home && *home)
        base = fs::path(home) / ".local" / "state";
    else
        return {};
    return (base / "lossjit" / "history").string();
}

// ---- the session -------------------------------------------------------------------------------

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
        {":regs", "[EXPR]", "the kernel's registers, spills and occupancy (runs it once on the GPU)", &Repl::cmd_regs},
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

// ---- errors ------------------------------------------------------------------------------------

// A diagnostic about `shown`, the line the user typed (or a definition), at `column`; during
// :load the location names the file and its line.
void Repl::fail_at(const std::string& shown, int column, const std::string& message) const {
    const std::string source = std::string(static_cast<std::size_t>(source_line_ - 1), '\n') + shown;
    throw SourceError(SourceLocation{source_name_, source_line_, column}, message, source);
}

// The checker saw the needed definitions, one per line, then the line; `shown` holds them so. Its
// location names a line of that program; the user sees the one line it came from.
void Repl::rethrow_in(const SourceError& e, const std::vector<std::string>& shown, const ast::Program* line) const {
    const int at = e.where().line;
    if (at < 1 || static_cast<std::size_t>(at) > shown.size()) throw e;
    // Within the typed line a name bound by a later statement of it: the checker's message would
    // count the lines of the combined program, which the user never saw, so say it without them.
    if (line && static_cast<std::size_t>(at) == shown.size()) {
        if (const auto name = bound_later(*line, e.where().column))
            fail_at(shown.back(), e.where().column, fmt::format("'{}' is used before its definition", *name));
    }
    fail_at(shown[static_cast<std::size_t>(at - 1)], e.where().column, e.message());
}

void Repl::report(const std::exception& e, bool source_error) const {
    std::cout.flush();
    if (source_error) {
        std::cerr << e.what() << "\n";
    } else if (source_name_ != "expr") {
        std::cerr << fmt::format("{}:{}: error: {}\n", source_name_, source_line_, e.what());
    } else {
        std::cerr << "error: " << e.what() << "\n";
    }
    std::cerr.flush();
}

// ---- the main loop -----------------------------------------------------------------------------

int Repl::run() {
    interactive_ = ::isatty(STDIN_FILENO) != 0;
    std::string history;
    if (interactive_) {
        rl_readline_name = "lossjit";
        rl_attempted_completion_function = [](const char* text, int start, int) -> char** {
            g_completions.clear();
            const std::string_view line(rl_line_buffer);
            if (start == 0 && text[0] == ':') {
                for (const auto& c : commands()) g_completions.emplace_back(c.name);
            } else if (!line.empty() && line[0] == ':') {
                return nullptr;  // a command's argument: file names (readline's default)
            } else {
                std::size_t count = 0;
                const std::string_view* names = function_names(&count);
                for (std::size_t i = 0; i < count; ++i) g_completions.emplace_back(names[i]);
                for (const char* w : {"sum", "mean", "batchmean", "param", "pi", "inf", "nan"})
                    g_completions.emplace_back(w);
                g_completions.insert(g_completions.end(), g_session_names.begin(), g_session_names.end());
                rl_completion_append_character = '\0';
            }
            rl_attempted_completion_over = 1;
            return rl_completion_matches(text, completion_generator);
        };
        history = history_path();
        if (!history.empty()) {
            std::error_code ec;
            fs::create_directories(fs::path(history).parent_path(), ec);
            if (!fs::exists(history, ec)) std::ofstream(history, std::ios::app);
            if (!fs::exists(history, ec))
                history.clear();  // unwritable: no history file, no complaint
            else
                read_history(history.c_str());
        }
        std::cout << fmt::format(
            "lossjit {} repl: type an expression, :help for the commands, :quit or Ctrl-D to leave\n", kVersion);
    }
    while (!quit_) {
        std::string line;
        if (interactive_) {
            std::cout.flush();
            g_session_names.clear();
            for (const auto& i : inputs_) g_session_names.push_back(i.name);
            for (const auto& p : params_) g_session_names.push_back(p.name);
            for (const auto& d : defs_) g_session_names.push_back(d.name);
            const auto read = read_terminal_line();
            if (!read) {
                std::cout << "\n";
                break;
            }
            line = *read;
            if (!trim(line).empty()) {
                const HIST_ENTRY* previous_entry =
                    history_length > 0 ? history_get(history_base + history_length - 1) : nullptr;
                if (!previous_entry || line != previous_entry->line) {
                    add_history(line.c_str());
                    if (!history.empty() && append_history(1, history.c_str()) != 0) history.clear();
                }
            }
        } else {
            if (!std::getline(std::cin, line)) break;
            if (echo_) std::cout << kPrompt << line << "\n";
        }
        handle(line);
    }
    if (!history.empty()) history_truncate_file(history.c_str(), 1000);
    std::cout.flush();
    return 0;
}

bool Repl::handle(const std::string& line) {
    try {
        execute(line);
        return true;
    } catch (const SourceError& e) {
        report(e, true);
    } catch (const Error& e) {
        report(e, false);
    } catch (const std::bad_alloc&) {
        report(std::runtime_error("out of host memory"), false);
    } catch (const std::exception& e) {
        report(e, false);
    }
    return false;
}

void Repl::execute(const std::string& raw) {
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#') return;
    if (line[0] == ':') {
        const auto space = line.find_first_of(" \t");
        const std::string name = line.substr(0, space);
        const std::string arg = space == std::string::npos ? std::string() : trim(line.substr(space));
        const Command* command = find_command(name);
        if (!command) throw UsageError(fmt::format("unknown command '{}' (:help lists the commands)", name));
        (this->*command->handler)(arg);
        return;
    }
    // An expression (with a body), or definitions only (statements, each ending in ';').
    try {
        parse(line, "expr");
    } catch (const SourceError& first) {
        ast::Program parsed;
        try {
            parsed = parse(line + "\n0", "expr");
        } catch (const SourceError&) {
            fail_at(line, first.where().column, first.message());
        }
        define(line, parsed);
        return;
    }
    evaluate(line);
}

// ---- definitions -------------------------------------------------------------------------------

void Repl::define(const std::string& line, const ast::Program& parsed) {
    std::vector<std::string> pieces;
    {
        std::string text = strip_comment(line);
        std::size_t start = 0;
        while (start <= text.size()) {
            const auto end = text.find(';', start);
            const std::string piece =
                trim(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
            if (!piece.empty()) pieces.push_back(piece);
            if (end == std::string::npos) break;
            start = end + 1;
        }
    }
    if (pieces.size() != parsed.statements.size())
        throw InternalError("repl: the statements of a definitions line did not split at ';'");

    // A name defined again replaces its definition in place, so later definitions that use it see
    // the new one.
    std::vector<Definition> defs = defs_;
    for (std::size_t k = 0; k < pieces.size(); ++k) {
        const auto& statement = parsed.statements[k];
        Definition def{statement.name, pieces[k], {}};
        if (statement.kind == ast::Statement::Kind::Binding) collect_names(*statement.value, def.reads);
        if (std::any_of(inputs_.begin(), inputs_.end(), [&](const Input& i) { return i.name == statement.name; }))
            fail_at(def.text + ";", static_cast<int>(def.text.find(statement.name)) + 1,
                    fmt::format("'{}' is an input; bind another name (or :unset {} first)", statement.name,
                                statement.name));
        auto same = std::find_if(defs.begin(), defs.end(), [&](const Definition& d) { return d.name == def.name; });
        if (same != defs.end())
            *same = std::move(def);
        else
            defs.push_back(std::move(def));
    }

    // A definition may use only earlier ones (a replaced one keeps its place).
    for (std::size_t k = 0; k < defs.size(); ++k) {
        for (const auto& name : defs[k].reads) {
            const auto later = std::find_if(defs.begin() + static_cast<std::ptrdiff_t>(k), defs.end(),
                                            [&](const Definition& d) { return d.name == name; });
            if (later == defs.end()) continue;
            const auto wrapped = parse(defs[k].text + ";\n0", "expr");
            const auto* at = find_name(*wrapped.statements.front().value, name);
            fail_at(
                defs[k].text + ";", at ? at->pos.column : 1,
                later - defs.begin() == static_cast<std::ptrdiff_t>(k)
                    ? fmt::format("'{}' cannot use itself: a definition uses only earlier ones", name)
                    : fmt::format("'{}' is defined after '{}': a definition uses only earlier ones (:defs lists them)",
                                  name, defs[k].name));
        }
    }

    // Check them all together, with every input of the session.
    std::string text;
    std::vector<std::string> shown;
    for (const auto& d : defs) {
        text += d.text + ";\n";
        shown.push_back(d.text + ";");
    }
    text += "0";
    Options options;
    for (const auto& i : inputs_) options.inputs.push_back(i.name);
    for (const auto& p : params_) {
        const bool read = std::any_of(defs.begin(), defs.end(), [&](const Definition& d) {
            return std::find(d.reads.begin(), d.reads.end(), p.name) != d.reads.end();
        });
        if (read) options.params.push_back(p);
    }
    try {
        const Loss loss = compile(text, options);
        if (inputs_.empty() && !loss.inputs().empty()) {
            // No inputs in the session: the checker took the free names for inputs.
            const std::string& name = loss.inputs().front();
            for (std::size_t k = 0; k < defs.size(); ++k) {
                const auto wrapped = parse(defs[k].text + ";\n0", "expr");
                if (wrapped.statements.front().value) {
                    if (const auto* e = find_name(*wrapped.statements.front().value, name))
                        fail_at(shown[k], e->pos.column,
                                fmt::format("unknown name '{}': not an input, a parameter or a binding (give it with "
                                            ":input {}=SHAPE:GENERATOR or {}=FILE.npy)",
                                            name, name, name));
                }
            }
            throw UsageError(fmt::format("unknown name '{}'", name));
        }
    } catch (const SourceError& e) {
        rethrow_in(e, shown);
    }
    defs_ = std::move(defs);
}

// ---- evaluation --------------------------------------------------------------------------------

Compiled Repl::compile_line(const std::string& line) {
    ast::Program parsed;
    try {
        parsed = parse(line, "expr");
    } catch (const SourceError& e) {
        fail_at(line, e.where().column, e.message());
    }
    // What the line reads; names it binds itself shadow the session's definitions.
    std::vector<std::string> reads;
    std::set<std::string> local;
    for (const auto& s : parsed.statements) {
        if (s.value && s.kind == ast::Statement::Kind::Binding) collect_names(*s.value, reads);
        local.insert(s.name);
    }
    collect_names(*parsed.body, reads);
    std::set<std::string> needed;
    for (const auto& r : reads)
        if (!local.count(r)) needed.insert(r);
    std::vector<bool> included(defs_.size(), false);
    for (std::size_t k = defs_.size(); k-- > 0;) {
        if (!needed.count(defs_[k].name)) continue;
        included[k] = true;
        needed.insert(defs_[k].reads.begin(), defs_[k].reads.end());
    }
    std::string text;
    std::vector<std::string> shown;
    for (std::size_t k = 0; k < defs_.size(); ++k) {
        if (!included[k]) continue;
        text += defs_[k].text + ";\n";
        shown.push_back(defs_[k].text + ";");
    }
    text += line;
    shown.push_back(line);

    std::vector<Param> params;
    for (const auto& p : params_)
        if (needed.count(p.name)) params.push_back(p);
    std::string key = text + '\x01';
    for (const auto& i : inputs_) key += i.name + ',';
    key += '\x01';
    for (const auto& p : params) key += p.name + ',';

    auto found = losses_.find(key);
    if (found == losses_.end()) {
        Options options;
        options.device = device_;
        options.params = params;
        for (const auto& i : inputs_) options.inputs.push_back(i.name);
        try {
            // First with every input, so that an unknown name is an error with a caret; then with
            // only those the program reads, so that the others take no part in broadcasting.
            const Loss all = compile(text, options);
            if (options.inputs.empty() && !all.inputs().empty()) {
                const std::string& name = all.inputs().front();
                const ast::Expr* at = nullptr;
                for (const auto& s : parsed.statements)
                    if (!at && s.value) at = find_name(*s.value, name);
                if (!at) at = find_name(*parsed.body, name);
                const std::string message = fmt::format(
                    "unknown name '{}': not an input, a parameter or a binding (give it with :input {}=SHAPE:GENERATOR "
                    "or {}=FILE.npy)",
                    name, name, name);
                if (at) fail_at(line, at->pos.column, message);
                throw UsageError(message);
            }
            std::vector<std::string> used;
            for (const auto& i : inputs_)
                if (all.uses(i.name)) used.push_back(i.name);
            options.inputs = used;
            if (losses_.size() >= 64) losses_.clear();
            found = losses_.emplace(key, CachedLoss{compile(text, options), false, text, options}).first;
        } catch (const SourceError& e) {
            rethrow_in(e, shown, &parsed);
        }
    }
    Compiled c;
    c.entry = &found->second;
    Loss& loss = c.entry->loss;
    for (const auto& p : params)
        if (loss.uses(p.name)) loss.set_param(p.name, p.value);
    for (const auto& name : loss.inputs()) {
        const auto it = std::find_if(inputs_.begin(), inputs_.end(), [&](const Input& i) { return i.name == name; });
        if (it == inputs_.end()) throw InternalError("repl: a compiled program reads an input the session lacks");
        c.inputs.push_back(static_cast<std::size_t>(it - inputs_.begin()));
    }
    return c;
}

std::vector<TensorView> Repl::host_views(const Compiled& c) const {
    std::vector<TensorView> views;
    for (auto k : c.inputs) views.push_back(inputs_[k].host.view());
    return views;
}

std::vector<TensorView> Repl::shape_views(const Compiled& c) const {
    std::vector<TensorView> views;
    for (auto k : c.inputs) views.push_back(TensorView::contiguous(nullptr, inputs_[k].host.shape));
    return views;
}

std::vector<TensorView> Repl::device_views(const Compiled& c) {
    std::vector<TensorView> views;
    for (auto k : c.inputs) {
        Input& in = inputs_[k];
        const std::size_t bytes = in.host.values.size() * sizeof(float);
        if (!in.device && bytes > 0) {
            in.device.emplace(bytes, device_);
            in.device->upload(in.host.values.data(), bytes);
        }
        views.push_back(TensorView::contiguous(in.device ? in.device->data() : nullptr, in.host.shape));
    }
    return views;
}

bool Repl::gpu_present() {
    if (!probed_) {
        probed_ = true;
        has_gpu_ = cuda_available(&why_no_gpu_);
    }
    return has_gpu_;
}

bool Repl::use_gpu() {
    if (force_cpu_) return false;
    if (gpu_present()) return true;
    if (!noted_cpu_) {
        noted_cpu_ = true;
        std::cout.flush();
        std::cerr << "(no CUDA device: values from the CPU reference)\n";
    }
    return false;
}

std::string Repl::arch() { return gpu_present() ? device_info(device_).arch() : std::string("sm_90"); }

void Repl::evaluate(const std::string& line) {
    Compiled c = compile_line(line);
    Loss& loss = c.entry->loss;
    const bool gpu = use_gpu();
    if (loss.kind() == Kind::Reduction) {
        double value = 0;
        if (gpu) {
            value = loss(device_views(c));
            c.entry->launched = true;
        } else {
            value = loss.reference(host_views(c));
        }
        std::cout << fmt::format("{:.9g}\n", value);
    } else {
        const Shape shape = loss.output_shape(shape_views(c));
        std::vector<float> out(static_cast<std::size_t>(element_count(shape)));
        if (gpu) {
            DeviceBuffer buffer(std::max<std::size_t>(out.size(), 1) * sizeof(float), device_);
            buffer.fill_bytes(0xFF);
            loss.map(device_views(c), OutputView::contiguous(buffer.data(), shape));
            synchronize(device_);
            c.entry->launched = true;
            buffer.download(out.data(), out.size() * sizeof(float));
        } else {
            loss.reference_map(host_views(c), OutputView::contiguous(out.data(), shape));
        }
        if (out.empty()) {
            std::cout << fmt::format("map of shape {} (no elements)\n", format_shape(shape));
        } else {
            double lo = INFINITY, hi = -INFINITY, sum = 0;
            std::size_t nans = 0;
            for (float v : out) {
                sum += v;
                if (std::isnan(v)) {
                    ++nans;
                    continue;
                }
                lo = std::min<double>(lo, v);
                hi = std::max<double>(hi, v);
            }
            const std::size_t shown = std::min<std::size_t>(out.size(), 6);
            std::string summary = nans == out.size() ? fmt::format("all {} nan", nans)
                                                     : fmt::format("min {:.7g}, max {:.7g}, mean {:.7g}{}", lo, hi,
                                                                   sum / static_cast<double>(out.size()),
                                                                   nans ? fmt::format(", {} nan", nans) : "");
            std::cout << fmt::format("map of shape {}: {:.7g}{} ({})\n", format_shape(shape),
                                     fmt::join(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                                     out.size() > shown ? ", ..." : "", summary);
        }
    }
    last_ = line;
    if (std::find(expressions_.begin(), expressions_.end(), line) == expressions_.end()) expressions_.push_back(line);
}

// What a stage command works on: its argument, which becomes the last expression if it compiles,
// or else the last expression.
Compiled Repl::compile_for(const std::string& arg, std::string_view command) {
    if (arg.empty() && last_.empty())
        throw UsageError(
            fmt::format("{} needs an expression: give one ({} EXPR) or evaluate one first", command, command));
    Compiled c = compile_line(arg.empty() ? last_ : arg);
    if (!arg.empty()) last_ = arg;
    return c;
}

// ---- inputs and parameters ---------------------------------------------------------------------

std::string Repl::describe(const Input& in) const {
    InputArg arg{in.name, in.spec};
    if (arg.is_file()) return fmt::format("{}: {} from {}", in.name, format_shape(in.host.shape), in.spec);
    const std::string spec = in.spec.find(':') == std::string::npos ? in.spec + ":uniform" : in.spec;
    return fmt::format("{}: {} from {}", in.name, format_shape(in.host.shape), generator_text(parse_generator(spec)));
}

void Repl::set_input(const InputArg& arg, bool quiet) {
    if (std::any_of(params_.begin(), params_.end(), [&](const Param& p) { return p.name == arg.name; }))
        throw UsageError(fmt::format("'{}' is a parameter (:unset {} first)", arg.name, arg.name));
    if (std::any_of(defs_.begin(), defs_.end(), [&](const Definition& d) { return d.name == arg.name; }))
        throw UsageError(
            fmt::format("'{}' is defined as a binding or parameter (:unset {} first)", arg.name, arg.name));
    // The same check the compiler makes, before any data is made.
    const bool identifier =
        !arg.name.empty() && (std::isalpha(static_cast<unsigned char>(arg.name[0])) || arg.name[0] == '_') &&
        std::all_of(arg.name.begin(), arg.name.end(),
                    [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; });
    if (!identifier || arg.name == "param")
        throw UsageError(fmt::format("input name '{}' is not an identifier", printable(arg.name)));
    Input in{arg.name, arg.spec, load_input(arg, seed_), std::nullopt};
    auto same = std::find_if(inputs_.begin(), inputs_.end(), [&](const Input& i) { return i.name == arg.name; });
    const auto index = static_cast<std::size_t>(same - inputs_.begin());
    if (same != inputs_.end())
        *same = std::move(in);
    else
        inputs_.push_back(std::move(in));
    if (!quiet) std::cout << describe(inputs_[index]) << "\n";
}

void Repl::set_param(const Param& p) {
    if (std::any_of(inputs_.begin(), inputs_.end(), [&](const Input& i) { return i.name == p.name; }))
        throw UsageError(fmt::format("'{}' is an input (:unset {} first)", p.name, p.name));
    auto same = std::find_if(params_.begin(), params_.end(), [&](const Param& q) { return q.name == p.name; });
    if (same != params_.end())
        same->value = p.value;
    else
        params_.push_back(p);
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
                   "  normal[mean,std], sign, softmax, const[v] or range, seeded (:seed)\n";
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
    if (force_cpu_) throw UsageError(":regs reads the GPU kernel, and this session uses the CPU reference (:device gpu switches)");
    if (!gpu_present()) throw UsageError(fmt::format(":regs needs a CUDA device ({})", why_no_gpu_));
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
                             info->blocks_per_sm, info->block_threads, 100.0 * info->occupancy, info->grid,
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
    for (const auto& v : views) bytes += static_cast<double>(v.numel()) * sizeof(float);
    std::optional<DeviceBuffer> result;
    std::optional<OutputView> output;
    if (loss.kind() == Kind::Reduction) {
        result.emplace(sizeof(float), device_);
    } else {
        const Shape shape = loss.output_shape(views);
        const auto count = static_cast<std::size_t>(element_count(shape));
        result.emplace(std::max<std::size_t>(count, 1) * sizeof(float), device_);
        output = OutputView::contiguous(result->data(), shape);
        bytes += static_cast<double>(count) * sizeof(float);
    }
    auto launch = [&] {
        if (output)
            loss.map(views, *output);
        else
            loss.evaluate(views, static_cast<float*>(result->data()));
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
        options.params = params_;
        const Loss loss = compile(text, options);
        if (!loss.inputs().empty() && inputs_.empty())
            throw UsageError(fmt::format("{} reads {}: give each with :input NAME=SHAPE:GENERATOR first", path,
                                         fmt::join(loss.inputs(), ", ")));
    }
    std::string joined;
    std::istringstream lines(text);
    for (std::string l; std::getline(lines, l);) joined += strip_comment(l) + "\n";
    std::vector<std::string> pieces;
    std::size_t start = 0;
    while (start <= joined.size()) {
        const auto end = joined.find(';', start);
        const std::string piece =
            collapse_whitespace(joined.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (!piece.empty()) pieces.push_back(piece);
        if (end == std::string::npos) break;
        start = end + 1;
    }
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

}  // namespace

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
    Repl repl(command);
    repl.initial_inputs(command.inputs, command.params);
    return repl.run();
}

}  // namespace lossjit::cli
