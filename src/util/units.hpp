// Numbers as people read them, one convention for every command.
#pragma once

#include <string>

namespace lossjit::util {

// Binary units, as docs/cache.md and LOSSJIT_CACHE_MAX_BYTES spell sizes: "512 B", "16.0 KiB",
// "256.0 MiB", "4.0 GiB", "1.5 TiB" (one decimal from KiB up).
std::string human_bytes(double bytes);

}  // namespace lossjit::util
