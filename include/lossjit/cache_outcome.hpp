// Where a kernel image came from: part of Timings and KernelBuild, and what the cache reports.
#pragma once

#include <string_view>

namespace lossjit {

enum class CacheOutcome { Memory, Disk, Compiled };
std::string_view to_string(CacheOutcome outcome);  // "memory hit", "disk hit", "compiled"

}  // namespace lossjit
