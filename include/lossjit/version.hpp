#pragma once

namespace lossjit {
// Part of every cache key: a new version never loads kernels an older one compiled.
inline constexpr const char* kVersion = "0.1.0";
}  // namespace lossjit
