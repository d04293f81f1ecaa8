// The REPL on a terminal: readline with line editing, completion and a history file, and Ctrl-C
// dropping the line being typed. (From a pipe the session reads std::cin plainly.)
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lossjit::cli::repl {

inline constexpr const char* kPrompt = "lossjit> ";

// readline is process-wide state: one Terminal at a time.
class Terminal {
public:
    // Completes `commands` after a leading ':', else the language's words and the session's names.
    // Reads the history file (LOSSJIT_HISTORY, a path or "off", else the XDG state directory).
    explicit Terminal(std::vector<std::string> commands);
    ~Terminal();  // bounds the history file
    Terminal(const Terminal&) = delete;
    Terminal& operator=(const Terminal&) = delete;

    void set_session_names(std::vector<std::string> names);  // inputs, parameters, definitions
    // One line (added to the history unless blank or a repeat); nullopt at Ctrl-D.
    std::optional<std::string> read_line();

private:
    std::string history_;  // the history file, or "" for none
};

}  // namespace lossjit::cli::repl
