// fuzz_corpus: every input the fuzzer found interesting (fuzz/corpus) and every reproducer of a
// past finding (fuzz/regressions) goes through the fuzzer's invariants in the ordinary build, so
// they are checked on every CI run, with or without clang. Reproducers are also compiled by NVRTC.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "paths.hpp"
#include "pipeline_check.hpp"

namespace {

std::vector<std::filesystem::path> files_in(const std::string& dir) {
    std::vector<std::filesystem::path> files;
    if (!std::filesystem::is_directory(dir)) return files;
    for (const auto& entry : std::filesystem::directory_iterator(dir))
        if (entry.is_regular_file() && entry.path().filename().string().front() != '.') files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    return files;
}

std::string contents(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_SUITE("fuzz_corpus") {

TEST_CASE("reproducers of past findings hold every invariant, and their kernels compile") {
    const auto files = files_in(source_dir() + "/fuzz/regressions");
    for (const auto& file : files) {
        CAPTURE(file.filename().string());
        CHECK(lossjit::fuzz::check_program(contents(file), {.compile_with_nvrtc = true}) == "");
    }
}

TEST_CASE("the committed corpus holds every invariant") {
    const auto files = files_in(source_dir() + "/fuzz/corpus");
    CHECK(files.size() > 100);
    for (const auto& file : files) {
        const std::string finding = lossjit::fuzz::check_program(contents(file));
        if (!finding.empty()) FAIL_CHECK(file.filename().string() << ": " << finding);
    }
}

}  // TEST_SUITE
