// Replacing a file so that readers see the old content or the new, never part of either, and a
// crash leaves at worst a temporary file: the .npy writer, the tuning store, the REPL's :save and
// the kernel cache all write this way.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>

namespace lossjit::util {

// A temporary file's name beside `target`: "<target's name>.tmp.<pid>.<8 hex digits>". Cleaners of
// abandoned temporary files (the kernel cache, the tuning store) recognise them by this shape.
std::filesystem::path temp_path_for(const std::filesystem::path& target);

// Which step failed, for writers that decide for themselves what a failure means (the kernel
// cache stops writing when it cannot even create a file, and only warns when one write fails).
enum class WriteStep { Done, Create, Write, Rename };

struct WriteOutcome {
    WriteStep failed = WriteStep::Done;
    int error = 0;  // errno of the failed step
    bool ok() const { return failed == WriteStep::Done; }
};

// Writes the pieces, in order, to a new temporary file beside `target` (the same directory, so the
// rename stays on one filesystem), fsyncs it, renames it over `target` and fsyncs the directory so
// the rename itself survives a crash. On failure the temporary file is removed. Never throws.
WriteOutcome try_write_file_atomically(const std::filesystem::path& target, std::initializer_list<std::string_view> pieces);

// The same, throwing UsageError "PATH: cannot write: REASON" on failure.
void write_file_atomically(const std::filesystem::path& target, std::initializer_list<std::string_view> pieces);

// "cannot create a temporary file beside it", "write error", "cannot rename into place", with the
// system's reason: the words every atomic writer uses for its failures.
std::string describe(const WriteOutcome& outcome);

}  // namespace lossjit::util
