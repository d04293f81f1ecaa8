#include "cli/repl/terminal.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <readline/history.h>
#include <readline/readline.h>
#include <sys/select.h>
#include <unistd.h>

#include "pipeline.hpp"

namespace lossjit::cli::repl {

namespace fs = std::filesystem;


namespace {

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

std::vector<std::string> g_commands;  // the command names, for completion after ':'

char** complete(const char* text, int start, int) {
    g_completions.clear();
    const std::string_view line(rl_line_buffer);
    if (start == 0 && text[0] == ':') {
        g_completions = g_commands;
    } else if (!line.empty() && line[0] == ':') {
        return nullptr;  // a command's argument: file names (readline's default)
    } else {
        for (std::string_view word : reserved_words()) g_completions.emplace_back(word);
        g_completions.insert(g_completions.end(), g_session_names.begin(), g_session_names.end());
        rl_completion_append_character = '\0';
    }
    rl_attempted_completion_over = 1;
    return rl_completion_matches(text, completion_generator);
}

}  // namespace

Terminal::Terminal(std::vector<std::string> commands) {
    g_commands = std::move(commands);
    rl_readline_name = "lossjit";
    rl_attempted_completion_function = complete;
    history_ = history_path();
    if (!history_.empty()) {
        std::error_code ec;
        fs::create_directories(fs::path(history_).parent_path(), ec);
        if (!fs::exists(history_, ec)) std::ofstream(history_, std::ios::app);
        if (!fs::exists(history_, ec))
            history_.clear();  // unwritable: no history file, no complaint
        else
            read_history(history_.c_str());
    }
}

Terminal::~Terminal() {
    if (!history_.empty()) history_truncate_file(history_.c_str(), 1000);
}

void Terminal::set_session_names(std::vector<std::string> names) { g_session_names = std::move(names); }

std::optional<std::string> Terminal::read_line() {
    auto line = read_terminal_line();
    if (!line) return line;
    if (line->find_first_not_of(" \t\r\n") != std::string::npos) {
        const HIST_ENTRY* previous_entry = history_length > 0 ? history_get(history_base + history_length - 1) : nullptr;
        if (!previous_entry || *line != previous_entry->line) {
            add_history(line->c_str());
            if (!history_.empty() && append_history(1, history_.c_str()) != 0) history_.clear();
        }
    }
    return line;
}

}  // namespace lossjit::cli::repl
