// cache: keys, memory and disk hits, damaged entries, unwritable directories, concurrency.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "jit/cache.hpp"
#include "lossjit/lossjit.hpp"
#include "codegen/kernel_spec.hpp"
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

std::uint64_t entry_bytes(const fs::path& dir) {
    std::uint64_t total = 0;
    for (const auto& e : entries(dir)) total += fs::file_size(e);
    return total;
}

void set_age(const fs::path& file, std::chrono::seconds age) {
    fs::last_write_time(file, fs::file_time_type::clock::now() - age);
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

    const auto a = first.counters(), b = second.counters();
    CHECK(a.compiles == 1);
    CHECK(a.memory_hits == 1);
    CHECK(a.disk_hits == 0);
    CHECK(b.compiles == 0);
    CHECK(b.disk_hits == 1);
    CHECK(a.corrupt_entries + b.corrupt_entries + a.write_failures + b.write_failures + a.evictions + b.evictions == 0);
}

TEST_CASE("damaged entries are never loaded: they are recompiled and replaced") {
    TempDir dir;
    const std::string source = kernel_source("sum(abs(x))");
    KernelCache(settings_for(dir.path)).get(source, "sm_90");
    const fs::path entry = entries(dir.path).at(0);
    const auto original_size = fs::file_size(entry);

    auto damage_and_reload = [&](auto damage) {
        damage();
        CacheEntryInfo info{entry, {}, {}, {}, fs::file_size(entry), {}};
        info.key = entry.filename().string().substr(0, 32);
        info.target = "sm_90";
        CHECK_FALSE(verify_cache_entry(info).empty());
        KernelCache fresh(settings_for(dir.path));
        const auto lookup = fresh.get(source, "sm_90");
        CHECK(lookup.outcome == CacheOutcome::Compiled);
        CHECK(fresh.counters().corrupt_entries == 1);
        CHECK(fresh.counters().compiles == 1);
        CHECK(fs::file_size(entry) == original_size);  // rewritten whole
        info.bytes = original_size;
        CHECK(verify_cache_entry(info).empty());
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
    SUBCASE("another format version") {
        damage_and_reload([&] {
            std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
            const std::uint32_t version = 99;
            f.seekp(8);  // after the magic
            f.write(reinterpret_cast<const char*>(&version), sizeof version);
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
    // A directory that cannot exist: the path runs through a regular file (root cannot write there either).
    const fs::path file = dir.path / "a-file";
    std::ofstream(file) << "x";
    KernelCache not_a_directory(settings_for(file / "cache"));
    const auto lookup = not_a_directory.get(source, "sm_90");
    CHECK(lookup.outcome == CacheOutcome::Compiled);
    CHECK(lookup.warning.find("memory only") != std::string::npos);
    CHECK(not_a_directory.memory_only());
    CHECK_FALSE(probe_cache_directory(file / "cache").empty());
    CHECK(probe_cache_directory(dir.path).empty());

    // Warned once: later lookups, new keys included, work from memory and say nothing more.
    const auto again = not_a_directory.get(kernel_source("sum(x * 2)"), "sm_90");
    CHECK(again.outcome == CacheOutcome::Compiled);
    CHECK(again.warning.empty());
    CHECK(not_a_directory.get(source, "sm_90").outcome == CacheOutcome::Memory);
    CHECK(not_a_directory.counters().write_failures == 1);  // memory only: no second attempt
    CHECK(not_a_directory.counters().compiles == 2);
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

TEST_CASE("the directory stays under its bound, evicting the least recently used entries") {
    TempDir dir;
    const std::string a = kernel_source("mean(x)"), b = kernel_source("sum(x)"), c = kernel_source("mean(x * x)");
    KernelCache(settings_for(dir.path)).get(a, "sm_90");
    const auto one_entry = entry_bytes(dir.path);
    KernelCache(settings_for(dir.path)).get(b, "sm_90");
    REQUIRE(entries(dir.path).size() == 2);

    // Room for two entries (theirs differ by a few bytes). Explicit ages keep the order certain on
    // file systems with coarse timestamps.
    CacheSettings bounded = settings_for(dir.path);
    bounded.max_bytes = one_entry * 2 + one_entry / 2;
    const fs::path path_a = KernelCache(bounded).entry_path(cache_key(a, "sm_90"), "sm_90");
    const fs::path path_b = KernelCache(bounded).entry_path(cache_key(b, "sm_90"), "sm_90");
    const fs::path path_c = KernelCache(bounded).entry_path(cache_key(c, "sm_90"), "sm_90");
    set_age(path_a, std::chrono::seconds(200));
    set_age(path_b, std::chrono::seconds(100));

    // A disk hit makes `a` the most recently used, so writing `c` evicts `b`.
    KernelCache reader(bounded);
    CHECK(reader.get(a, "sm_90").outcome == CacheOutcome::Disk);
    CHECK(fs::last_write_time(path_a) > fs::last_write_time(path_b));
    KernelCache writer(bounded);
    CHECK(writer.get(c, "sm_90").outcome == CacheOutcome::Compiled);
    CHECK(writer.counters().evictions == 1);
    CHECK(fs::exists(path_a));
    CHECK_FALSE(fs::exists(path_b));
    CHECK(fs::exists(path_c));
    CHECK(entry_bytes(dir.path) <= bounded.max_bytes);

    // The listing is least recently used first; prune applies a smaller bound now.
    set_age(path_c, std::chrono::seconds(300));
    const auto scan = scan_cache_directory(dir.path);
    REQUIRE(scan.entries.size() == 2);
    CHECK(scan.entries[0].path == path_c);
    CHECK(scan.entries[0].key == cache_key(c, "sm_90"));
    CHECK(scan.entries[0].target == "sm_90");
    CHECK(scan.entries[0].nvrtc == nvrtc_version());
    CHECK(scan.entry_bytes == entry_bytes(dir.path));
    const auto pruned = prune_cache_directory(dir.path, one_entry + one_entry / 2);
    CHECK(pruned.removed == 1);
    CHECK_FALSE(fs::exists(path_c));
    CHECK(pruned.remaining_bytes == entry_bytes(dir.path));
    CHECK(clear_cache_directory(dir.path) == 1);
    CHECK(entries(dir.path).empty());
}

TEST_CASE("an entry larger than the bound is kept by the lookup that wrote it") {
    TempDir dir;
    CacheSettings tiny = settings_for(dir.path);
    tiny.max_bytes = 1;
    KernelCache cache(tiny);
    cache.get(kernel_source("mean(x)"), "sm_90");
    CHECK(entries(dir.path).size() == 1);
    cache.get(kernel_source("sum(x)"), "sm_90");
    CHECK(entries(dir.path).size() == 1);  // the older one went
    CHECK(cache.counters().evictions == 1);
}

TEST_CASE("stale temporary files are cleaned; fresh ones may belong to a writer and stay") {
    TempDir dir;
    const fs::path stale = dir.path / "0123-sm_90-nvrtc13.0.ljk.tmp.42.deadbeef";
    const fs::path fresh = dir.path / "4567-sm_90-nvrtc13.0.ljk.tmp.43.deadbeef";
    const fs::path unrelated = dir.path / "notes.txt";
    for (const auto& p : {stale, fresh, unrelated}) std::ofstream(p) << "partial";
    set_age(stale, std::chrono::hours(2));
    set_age(unrelated, std::chrono::hours(2));
    const auto scan = scan_cache_directory(dir.path);
    CHECK(scan.entries.empty());
    CHECK(scan.temp_files.size() == 2);

    // Any write prunes, bound or not, so the cleaning happens without anyone running `lossjit cache prune`.
    CacheSettings unbounded = settings_for(dir.path);
    unbounded.max_bytes = 0;
    KernelCache(unbounded).get(kernel_source("mean(x)"), "sm_90");
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(fresh));
    CHECK(fs::exists(unrelated));  // never ours to remove
    CHECK(clear_cache_directory(dir.path) == 2);  // the entry and the fresh temporary file
    CHECK(fs::exists(unrelated));
}

TEST_CASE("a file with an entry's extension but not its name is reported, not trusted") {
    TempDir dir;
    std::ofstream(dir.path / "junk.ljk") << "junk";
    const auto scan = scan_cache_directory(dir.path);
    REQUIRE(scan.entries.size() == 1);
    CHECK(scan.entries[0].key.empty());
    CHECK(verify_cache_entry(scan.entries[0]).find("name") != std::string::npos);
}

TEST_CASE("sizes for LOSSJIT_CACHE_MAX_BYTES") {
    CHECK(parse_byte_size("0", "x") == 0);
    CHECK(parse_byte_size("268435456", "x") == kDefaultCacheMaxBytes);
    CHECK(parse_byte_size("256M", "x") == kDefaultCacheMaxBytes);
    CHECK(parse_byte_size("256MiB", "x") == kDefaultCacheMaxBytes);
    CHECK(parse_byte_size("64k", "x") == 65536);
    CHECK(parse_byte_size("1g", "x") == (1ull << 30));
    CHECK_THROWS_AS(parse_byte_size("", "x"), UsageError);
    CHECK_THROWS_AS(parse_byte_size("12x", "x"), UsageError);
    CHECK_THROWS_AS(parse_byte_size("-1", "x"), UsageError);
    CHECK_THROWS_AS(parse_byte_size("99999999999999999999", "x"), UsageError);
    CHECK_THROWS_WITH_AS(parse_byte_size("lots", "LOSSJIT_CACHE_MAX_BYTES"),
                         doctest::Contains("LOSSJIT_CACHE_MAX_BYTES='lots'"), UsageError);
}

TEST_CASE("timings add up") {
    const auto loss = lossjit::compile("mean((p - t)^2)");
    const auto& t = loss.timings();
    CHECK(t.parse_ms > 0);
    CHECK(t.total_ms() == doctest::Approx(t.parse_ms + t.check_ms));
    CHECK(!t.cache);  // no kernel prepared yet
}

}  // TEST_SUITE
