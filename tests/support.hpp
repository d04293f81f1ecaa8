// What several test files need: a scratch directory, and running a command (the CLI) for its exit
// status and output.
#pragma once

#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "paths.hpp"

namespace lossjit_test {

// A fresh directory under the system's temporary directory, removed with everything in it.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& prefix = "lossjit-test") {
        std::random_device r;
        path = std::filesystem::temp_directory_path() /
               (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(r()));
        std::filesystem::create_directories(path);
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
};

struct Result {
    int status;          // the exit status; -1 if the command did not exit normally
    std::string output;  // stdout and stderr together
};

// Runs a shell command line; its standard error joins its output.
inline Result run_shell(const std::string& command) {
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string output;
    std::array<char, 4096> buffer{};
    while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
    const int status = ::pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// `lossjit ARGS`, with ENV (e.g. "LOSSJIT_CACHE_DIR=/tmp/x") before it.
inline Result run_cli(const std::string& args, const std::string& env = "") {
    return run_shell(env + " " + cli_path() + " " + args);
}

inline std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace lossjit_test
