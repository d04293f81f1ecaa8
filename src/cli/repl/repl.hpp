// `lossjit repl`: an interactive session. Type an expression and get its value on the current
// inputs; `:commands` set inputs and parameters, show each stage, time the kernel and save the
// session. With a terminal it uses readline (line editing, history); from a pipe it reads lines
// plainly and prints only what the lines produce, so a session can be scripted and tested.
#pragma once

#include <memory>
#include <optional>

namespace CLI {
class App;
}

namespace lossjit::cli {

struct ReplCommand;  // the subcommand and the options it parsed into

// Adds the `repl` subcommand to `app`. Keep the result until run_repl_command().
std::shared_ptr<ReplCommand> add_repl_command(CLI::App& app);

// Runs the session if `repl` was given and returns its exit status (0 at the end of the input or
// at :quit); nullopt when it was not given. Mistakes inside the session are reported and the
// session goes on; only the command line's own options (-i, -p) throw, for main() to report.
std::optional<int> run_repl_command(const ReplCommand& command);

}  // namespace lossjit::cli
