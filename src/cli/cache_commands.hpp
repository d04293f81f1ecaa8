// `lossjit cache stats|list|verify|prune|clear` and `lossjit warm`: the kernel cache directory, for
// people and deployment scripts.
#pragma once

#include <memory>
#include <optional>

namespace CLI {
class App;
}

namespace lossjit::cli {

struct CacheCommands;  // the subcommands and the options they parsed into

// Adds the `cache` and `warm` subcommands to `app`. Keep the result until run_cache_commands().
std::shared_ptr<CacheCommands> add_cache_commands(CLI::App& app);

// Runs whichever of these subcommands was given and returns its exit status; nullopt when none was.
// Throws lossjit::Error (UsageError, ...) like the other commands, for main() to report.
std::optional<int> run_cache_commands(const CacheCommands& commands);

// `compile` and `warm` exist to fill the disk cache: with the cache off, read-only or unwritable they
// would report "compiled" for kernels no later process finds, so they refuse (UsageError) before
// compiling anything. `command` names the command in the message.
void require_writable_cache(const char* command);

// After compiling: a write that failed anyway (a full disk) is an error too.
void require_no_write_failures(const char* command);

}  // namespace lossjit::cli
