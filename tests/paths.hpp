// Where the tests find the source tree and the CLI: baked in at build time, overridable from the
// environment so a build folder carried to another machine (the GPU machine) still finds them.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

inline std::string env_or(const char* name, const char* fallback) {
    const char* value = std::getenv(name);
    return value && *value ? value : fallback;
}
inline std::string source_dir() { return env_or("LOSSJIT_SOURCE_DIR", LOSSJIT_SOURCE_DIR); }
inline std::string cli_path() { return env_or("LOSSJIT_CLI", LOSSJIT_CLI); }
inline std::string cache_hammer_path() { return env_or("LOSSJIT_CACHE_HAMMER", LOSSJIT_CACHE_HAMMER); }
// The C++ compiler that built the tests, for a test that compiles kernel code on the host.
inline std::string host_cxx() { return env_or("LOSSJIT_HOST_CXX", LOSSJIT_HOST_CXX); }

// The text of examples/FILE (a .loss program), which several suites compile.
inline std::string example_text(const std::string& file) {
    std::ifstream in(source_dir() + "/examples/" + file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}
