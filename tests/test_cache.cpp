// cache: keys, memory and disk hits, damaged entries, unwritable directories, concurrency.
#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "cache.hpp"
#include "pipeline.hpp"

using namespace lossjit;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        std::random_device r;
        path = fs::temp_directory_path() / ("lossjit-test-" + std::to_string(::getpid()) + "-" + std::to_string(r()));
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::permissions(path, fs::perms::owner_all, ec);
        fs::remove_all(path, ec);
    }
};

CacheSettings settings_for(const fs::path& dir, CacheSettings::Mode mode = CacheSettings::Mode::ReadWrite) {
    CacheSettings s;
    s.directory = dir;
    s.disk = mode;
    return s;
}

std::string kernel_source(const std::string& program) {
    const auto p = check(parse(program, "expr"), {});
    KernelSpec spec;
    spec.inner_strides.assign(read_inputs(p).size(), 1);
    return emit_cuda(p, spec);
}

std::vector<fs::path> entries(const fs::path& dir) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".ljk") out.push_back(e.path());
    return out;
}

}  // namespace

TEST_SUITE("cache") {

TEST_CASE("keys change with the source and the target, and are stable") {
    const std::string a = kernel_source("mean(x)"), b = kernel_source("sum(x)");
    CHECK(cache_key(a, "sm_90") == cache_key(a, "sm_90"));
    CHECK(cache_key(a, "sm_90").size() == 32);
    CHECK(cache_key(a, "sm_90") != cache_key(b, "sm_90"));
    CHECK(cache_key(a, "sm_90") != cache_key(a, "sm_80"));
    CHECK(cache_key(a, "sm_90") != cache_key(a, "compute_90"));
}

TEST_CASE("compile once, then memory hits; a new process (cache object) gets disk hits") {
    TempDir dir;
    const std::string source = kernel_source("mean((p - t)^2)");
    KernelCache first(settings_for(dir.path));
    const auto compiled = first.get(source, "sm_90");
    CHECK(compiled.outcome == CacheOutcome::Compiled);
    CHECK(compiled.compile_ms > 0);
    CHECK(compiled.warning.empty());
    CHECK(first.get(source, "sm_90").outcome == CacheOutcome::Memory);

    const auto files = entries(dir.path);
    REQUIRE(files.size() == 1);
    CHECK(files[0].filename().string().find("-sm_90-nvrtc") != std::string::npos);

    KernelCache second(settings_for(dir.path));
    const auto from_disk = second.get(source, "sm_90");
    CHECK(from_disk.outcome == CacheOutcome::Disk);
    CHECK(from_disk.image->data == compiled.image->data);
}

TEST_CASE("damaged entries are never loaded: they are recompiled and replaced") {
    TempDir dir;
    const std::string source = kernel_source("sum(abs(x))");
    KernelCache(settings_for(dir.path)).get(source, "sm_90");
    const fs::path entry = entries(dir.path).at(0);
    const auto original_size = fs::file_size(entry);

    auto damage_and_reload = [&](auto damage) {
        damage();
        KernelCache fresh(settings_for(dir.path));
        const auto lookup = fresh.get(source, "sm_90");
        CHECK(lookup.outcome == CacheOutcome::Compiled);
        CHECK(fs::file_size(entry) == original_size);  // rewritten whole
        CHECK(KernelCache(settings_for(dir.path)).get(source, "sm_90").outcome == CacheOutcome::Disk);
    };
    SUBCASE("truncated") {
        damage_and_reload([&] { fs::resize_file(entry, original_size / 2); });
    }
    SUBCASE("a flipped payload bit") {
        damage_and_reload([&] {
            std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
            f.seekg(static_cast<std::streamoff>(original_size - 10));
            char c = 0;
            f.read(&c, 1);
            c ^= 0x10;
            f.seekp(static_cast<std::streamoff>(original_size - 10));
            f.write(&c, 1);
        });
    }
    SUBCASE("a foreign file under the entry's name") {
        damage_and_reload([&] { std::ofstream(entry, std::ios::binary | std::ios::trunc) << "not a kernel"; });
    }
    SUBCASE("trailing garbage") {
        damage_and_reload([&] {
            fs::resize_file(entry, original_size);
            std::ofstream(entry, std::ios::binary | std::ios::app) << "xx";
            fs::resize_file(entry, original_size + 2);
        });
    }
}

TEST_CASE("read-only mode and an unwritable directory still work") {
    TempDir dir;
    const std::string source = kernel_source("mean(x + 1)");
    KernelCache read_only(settings_for(dir.path, CacheSettings::Mode::Read));
    CHECK(read_only.get(source, "sm_90").outcome == CacheOutcome::Compiled);
    CHECK(entries(dir.path).empty());

    if (::geteuid() != 0) {  // root ignores permissions
        fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec);
        KernelCache unwritable(settings_for(dir.path));
        const auto lookup = unwritable.get(source, "sm_90");
        CHECK(lookup.outcome == CacheOutcome::Compiled);
        CHECK(lookup.warning.find("memory only") != std::string::npos);
    }
    const fs::path file = dir.path / "a-file";
    std::ofstream(file) << "x";
    KernelCache not_a_directory(settings_for(file / "cache"));
    const auto lookup = not_a_directory.get(source, "sm_90");
    CHECK(lookup.outcome == CacheOutcome::Compiled);
    CHECK_FALSE(lookup.warning.empty());
}

TEST_CASE("many threads asking for one key compile it once") {
    TempDir dir;
    KernelCache cache(settings_for(dir.path, CacheSettings::Mode::Off));
    const std::string source = kernel_source("mean(sigmoid(x))");
    std::atomic<int> compiled{0}, waited{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
        threads.emplace_back([&] {
            const auto lookup = cache.get(source, "sm_90");
            (lookup.outcome == CacheOutcome::Compiled ? compiled : waited)++;
        });
    }
    for (auto& t : threads) t.join();
    CHECK(compiled == 1);
    CHECK(waited == 7);
}

TEST_CASE("a failed compile is not cached and fails again for the next caller") {
    TempDir dir;
    KernelCache cache(settings_for(dir.path));
    CHECK_THROWS(cache.get("not CUDA", "sm_90"));
    CHECK_THROWS(cache.get("not CUDA", "sm_90"));
    CHECK(entries(dir.path).empty());
}

}  // TEST_SUITE
