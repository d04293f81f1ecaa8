// The kernel cache from the command line: `lossjit cache ...`, `lossjit warm`, and many processes
// sharing one directory.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fmt/format.h>

#include "jit/cache.hpp"
#include "paths.hpp"
#include "codegen/kernel_spec.hpp"
#include "pipeline.hpp"

namespace fs = std::filesystem;
using namespace lossjit;

namespace {

struct Result {
    int status;
    std::string output;  // stdout and stderr together
};

Result finish(FILE* pipe) {
    std::string output;
    std::array<char, 4096> buffer{};
    while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
    const int status = ::pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

FILE* start(const std::string& command) {
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    REQUIRE(pipe != nullptr);
    return pipe;
}

Result lossjit_cli(const std::string& args, const std::string& env) {
    return finish(start(env + " " + cli_path() + " " + args));
}

struct TempDir {
    fs::path path;
    TempDir() {
        std::random_device r;
        path = fs::temp_directory_path() / ("lossjit-cache-cli-" + std::to_string(::getpid()) + "-" + std::to_string(r()));
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
    std::string env() const { return "LOSSJIT_CACHE_DIR=" + (path / "cache").string(); }
};

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
    return n;
}

std::string kernel_source(const std::string& program) {
    const auto p = check(parse(program, "expr"), {});
    KernelSpec spec;
    spec.inner_strides.assign(read_inputs(p).size(), 1);
    return emit_cuda(p, spec);
}

// What tests/cache_hammer.cpp reports: key -> image hash, and counters summed over its threads.
struct HammerReport {
    std::map<std::string, std::string> images;
    std::uint64_t memory_hits = 0, disk_hits = 0, compiles = 0, corrupt = 0, write_failures = 0, evictions = 0;
};

HammerReport parse_hammer(const std::string& output) {
    HammerReport r;
    std::istringstream in(output);
    std::string word;
    while (in >> word) {
        if (word == "image") {
            std::string key, hash;
            in >> key >> hash;
            r.images[key] = hash;
        } else if (word == "counters") {
            in >> r.memory_hits >> r.disk_hits >> r.compiles >> r.corrupt >> r.write_failures >> r.evictions;
        }
    }
    return r;
}

std::uint64_t entry_bytes(const fs::path& dir) {
    std::uint64_t total = 0;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".ljk") total += e.file_size();
    return total;
}

}  // namespace

TEST_SUITE("cli") {

TEST_CASE("8 processes x 4 threads share one cache directory: every image right, nothing damaged") {
    TempDir dir;
    // The reference images, compiled here without any cache. Same programs and targets as the helper.
    std::map<std::string, std::string> expected;
    std::uint64_t largest_entry = 0;
    for (const char* program : {"mean((p - t)^2)", "sum(abs(x))"}) {
        for (const char* target : {"sm_90", "sm_80"}) {
            const std::string source = kernel_source(program);
            const auto image = compile_cuda(source, target);
            largest_entry = std::max<std::uint64_t>(largest_entry, image.data.size() + 80);  // + the header
            expected[cache_key(source, target)] =
                fmt::format("{:016x}", static_cast<unsigned long long>(XXH3_64bits(image.data.data(), image.data.size())));
        }
    }

    auto hammer = [&](const std::string& env, int iterations) {
        std::vector<FILE*> processes;
        for (int p = 0; p < 8; ++p)
            processes.push_back(start(env + " " + cache_hammer_path() + " 4 " + std::to_string(iterations)));
        HammerReport total;
        for (FILE* process : processes) {
            const auto result = finish(process);
            CHECK_MESSAGE(result.status == 0, result.output);
            const auto report = parse_hammer(result.output);
            CHECK(report.images == expected);  // every key seen, each with the one right image
            total.compiles += report.compiles;
            total.disk_hits += report.disk_hits;
            total.corrupt += report.corrupt;
            total.write_failures += report.write_failures;
            total.evictions += report.evictions;
        }
        CHECK(total.corrupt == 0);  // readers never see a partial write
        CHECK(total.write_failures == 0);
        return total;
    };

    SUBCASE("unbounded: after the first compiles, the directory answers") {
        const auto total = hammer(dir.env(), 12);
        // Once written, an entry answers every later lookup, so each thread compiles a key at most once
        // (and each process's shared cache object once): 8 x (4 x 4 + 4), out of 384 lookups.
        CHECK(total.compiles <= 8 * (4 * 4 + 4));
        CHECK(total.disk_hits > 0);
        CHECK(total.evictions == 0);
    }
    SUBCASE("bounded to about two of the four entries: evictions race with reads and writes") {
        const std::string bound = std::to_string(2 * largest_entry + largest_entry / 2);
        const auto total = hammer(dir.env() + " LOSSJIT_CACHE_MAX_BYTES=" + bound, 3);
        CHECK(total.evictions > 0);
        CHECK(entry_bytes(dir.path / "cache") <= std::stoull(bound));
    }

    const auto verify = lossjit_cli("cache verify", dir.env());
    CHECK_MESSAGE(verify.status == 0, verify.output);
    CHECK(verify.output.find("all sound") != std::string::npos);
    for (const auto& e : fs::directory_iterator(dir.path / "cache"))  // no temporary file left behind
        CHECK_MESSAGE(e.path().extension() == ".ljk", e.path().string());
}

TEST_CASE("warm precompiles a file of programs; a later compile of the same kernel is a disk hit") {
    TempDir dir;
    const fs::path file = dir.path / "losses.txt";
    std::ofstream(file) << "# programs this service uses\n"
                           "mean((p - t)^2)\n"
                           "\n"
                           "  mean(max(0, lgo(p)))\n"
                           "sum(abs(x))\n";
    const auto warm = lossjit_cli("warm " + file.string() + " --arch sm_90 --arch sm_80", dir.env());
    CHECK(warm.status == 1);  // line 4 failed, the rest still compiled
    CHECK(warm.output.find("losses.txt:2: sm_90 compiled") != std::string::npos);
    CHECK(warm.output.find("losses.txt:2: sm_80 compiled") != std::string::npos);
    CHECK(warm.output.find("losses.txt:5: sm_80 compiled") != std::string::npos);
    CHECK(warm.output.find("losses.txt:4:15: error: unknown function 'lgo'") != std::string::npos);
    CHECK(warm.output.find("3 programs x 2 targets: 4 compiled, 0 already cached, 1 line with errors") != std::string::npos);

    // Inputs of one shape (any shape) use the kernel warm built.
    const auto run = lossjit_cli("compile 'mean((p - t)^2)' -i p=300x200 -i t=300x200 --arch sm_90", dir.env());
    CHECK_MESSAGE(run.output.find("(disk hit)") != std::string::npos, run.output);
    // A broadcast input is another kernel: warm could not have built it.
    const auto broadcast = lossjit_cli("compile 'mean((p - t)^2)' -i p=300x200 -i t=200 --arch sm_90", dir.env());
    CHECK(broadcast.output.find("(compiled") != std::string::npos);

    // Warming again finds everything; a clean file exits 0.
    std::ofstream(file, std::ios::trunc) << "mean((p - t)^2)\nsum(abs(x))\n";
    const auto again = lossjit_cli("warm " + file.string() + " --arch sm_90", dir.env());
    CHECK(again.status == 0);
    CHECK(count(again.output, "disk hit") == 2);

    CHECK(lossjit_cli("warm " + file.string() + " --arch sm_9x", dir.env()).status == 2);
    CHECK(lossjit_cli("warm " + (dir.path / "missing.txt").string(), dir.env()).status == 2);
}

TEST_CASE("compile and warm refuse a cache they cannot fill, before compiling") {
    // They exist to fill the disk cache: "compiled" for a kernel no later process finds would be a lie.
    TempDir dir;
    std::ofstream(dir.path / "a-file") << "x";
    const fs::path file = dir.path / "losses.txt";
    std::ofstream(file) << "mean(x)\nsum(x)\nmean(x * 2)\n";
    const std::string unwritable = "LOSSJIT_CACHE_DIR=" + (dir.path / "a-file" / "cache").string();
    const struct {
        std::string env, says;
    } cases[] = {
        {unwritable, "a-file/cache is not writable"},
        {"LOSSJIT_CACHE=off " + dir.env(), "which is off (LOSSJIT_CACHE=off)"},
        {"LOSSJIT_CACHE=read " + dir.env(), "which is read-only (LOSSJIT_CACHE=read)"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.env);
        const auto warm = lossjit_cli("warm " + file.string(), c.env);
        CHECK(warm.status == 2);
        CHECK(warm.output.find("warm stores kernels in the disk cache") != std::string::npos);
        CHECK(warm.output.find(c.says) != std::string::npos);
        CHECK(warm.output.find("NVRTC") == std::string::npos);  // nothing compiled
        const auto compile = lossjit_cli("compile 'mean(x)' -i x=4", c.env);
        CHECK(compile.status == 2);
        CHECK(compile.output.find("compile stores kernels in the disk cache") != std::string::npos);
    }
    CHECK(lossjit_cli("cache stats", unwritable).output.find("mode        memory only") != std::string::npos);
}

TEST_CASE("a kernel that cannot be written is an error after the report") {
    // An entry's own path taken by a directory: the directory is writable, this one rename fails
    // (as a full disk would), so the probe passes and the write itself must be noticed.
    TempDir first, second;
    const auto compiled = lossjit_cli("compile 'mean(x)' -i x=4 --json", first.env());
    REQUIRE(compiled.status == 0);
    const auto key_at = compiled.output.find("\"key\": \"") + 8;
    const std::string key = compiled.output.substr(key_at, 32);
    bool blocked = false;
    for (const auto& entry : fs::directory_iterator(first.path / "cache")) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(key, 0) != 0) continue;
        fs::create_directories(second.path / "cache" / name / "occupied");
        blocked = true;
    }
    REQUIRE(blocked);
    const auto again = lossjit_cli("compile 'mean(x)' -i x=4", second.env());
    CHECK(again.status == 2);
    CHECK(again.output.find("compiled, NVRTC") != std::string::npos);
    CHECK(again.output.find("warning: could not write kernel cache entry") != std::string::npos);
    CHECK(again.output.find("1 kernel could not be written to the disk cache") != std::string::npos);
}

TEST_CASE("cache stats, list, verify, prune and clear") {
    TempDir dir;
    const fs::path cache = dir.path / "cache";
    const fs::path file = dir.path / "losses.txt";
    std::ofstream(file) << "mean(x)\nsum(x)\nmean(x * 2)\n";
    REQUIRE(lossjit_cli("warm " + file.string(), dir.env()).status == 0);

    const auto stats = lossjit_cli("cache stats", dir.env() + " LOSSJIT_CACHE_MAX_BYTES=64M");
    CHECK(stats.status == 0);
    CHECK(stats.output.find("directory   " + cache.string()) != std::string::npos);
    CHECK(stats.output.find("mode        readwrite") != std::string::npos);
    CHECK(stats.output.find("entries     3,") != std::string::npos);
    CHECK(stats.output.find("bound       64.0 MiB (67108864 bytes)") != std::string::npos);
    CHECK(lossjit_cli("cache stats --json", dir.env()).output.find("\"entries\": 3") != std::string::npos);
    CHECK(lossjit_cli("cache stats", "LOSSJIT_CACHE=read " + dir.env()).output.find("mode        read\n") != std::string::npos);

    {
        // An entry of another NVRTC and a misnamed file are told apart.
        TempDir other;
        fs::create_directories(other.path / "cache");
        std::ofstream(other.path / "cache" / "0123456789abcdef0123456789abcdef-sm_90-nvrtc12.0.ljk") << "x";
        std::ofstream(other.path / "cache" / "notes.ljk") << "x";
        const auto mixed = lossjit_cli("cache stats", other.env());
        CHECK(mixed.output.find("entries     2,") != std::string::npos);
        CHECK_MESSAGE(mixed.output.find("(1 for NVRTC versions other than ") != std::string::npos, mixed.output);
        CHECK_MESSAGE(mixed.output.find("; 1 not named KEY-TARGET-nvrtcVERSION.ljk: see cache verify)") != std::string::npos,
                      mixed.output);
    }

    const auto list = lossjit_cli("cache list", dir.env());
    CHECK(list.status == 0);
    CHECK(count(list.output, "  sm_90  ") == 3);
    CHECK(list.output.find("3 entries") != std::string::npos);
    for (const auto& e : fs::directory_iterator(cache))
        CHECK(list.output.find(e.path().filename().string().substr(0, 32)) != std::string::npos);

    // Damage two entries: verify names exactly those and fails.
    std::vector<fs::path> paths;
    for (const auto& e : fs::directory_iterator(cache)) paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
    fs::resize_file(paths[0], 100);
    std::ofstream(paths[1], std::ios::binary | std::ios::app) << "extra";
    const auto verify = lossjit_cli("cache verify", dir.env());
    CHECK(verify.status == 1);
    CHECK(count(verify.output, "bad: ") == 2);
    CHECK(verify.output.find(paths[0].string()) != std::string::npos);
    CHECK(verify.output.find(paths[1].string()) != std::string::npos);
    CHECK(verify.output.find(paths[2].string()) == std::string::npos);

    // Prune to a bound that holds one entry; a nonsense bound is a usage error.
    const auto one = fs::file_size(paths[2]);
    const auto prune = lossjit_cli("cache prune --max-bytes " + std::to_string(one + 10), dir.env());
    CHECK(prune.status == 0);
    CHECK(prune.output.find("removed ") != std::string::npos);
    CHECK(entry_bytes(cache) <= one + 10);
    std::size_t remaining = 0;  // which entries go depends on their ages and sizes; the bound must hold
    for (const auto& e : fs::directory_iterator(cache)) remaining += e.path().extension() == ".ljk";
    CHECK(remaining < paths.size());
    CHECK(lossjit_cli("cache prune --max-bytes lots", dir.env()).status == 2);

    std::ofstream(cache / "keep-me.txt") << "not ours";
    const auto clear = lossjit_cli("cache clear", dir.env());
    CHECK(clear.status == 0);
    CHECK(clear.output.find("removed " + std::to_string(remaining) + " files") != std::string::npos);
    CHECK(fs::exists(cache / "keep-me.txt"));
    CHECK(lossjit_cli("cache verify", dir.env()).status == 0);
    CHECK(lossjit_cli("cache", dir.env()).status != 0);  // a subcommand is required
}

TEST_CASE("LOSSJIT_CACHE_MAX_BYTES bounds the directory across processes") {
    TempDir dir;
    const std::string env = dir.env() + " LOSSJIT_CACHE_MAX_BYTES=20k";  // one entry (~16 KiB)
    for (const char* program : {"mean(x)", "sum(x)", "mean(x * 2)"})
        CHECK(lossjit_cli(std::string("compile '") + program + "' -i x=8", env).status == 0);
    CHECK(entry_bytes(dir.path / "cache") <= 20 * 1024);
    CHECK(lossjit_cli("compile 'mean(x * 2)' -i x=8", env).output.find("(disk hit)") != std::string::npos);
    CHECK(lossjit_cli("cache stats", dir.env() + " LOSSJIT_CACHE_MAX_BYTES=12x").status == 2);
}

TEST_CASE("LOSSJIT_FAST_COMPILE=1 builds other kernels under other keys") {
    TempDir dir;
    const std::string args = "compile 'mean((p - t)^2)' -i p=8 -i t=8 --json";
    const auto normal = lossjit_cli(args, dir.env());
    const auto fast = lossjit_cli(args, "LOSSJIT_FAST_COMPILE=1 " + dir.env());
    CHECK(normal.output.find("\"cache\": \"compiled\"") != std::string::npos);
    CHECK(fast.output.find("\"cache\": \"compiled\"") != std::string::npos);  // not the normal kernel's entry
    const auto key = [](const std::string& out) { return out.substr(out.find("\"key\""), 44); };
    CHECK(key(normal.output) != key(fast.output));
    CHECK(lossjit_cli(args, "LOSSJIT_FAST_COMPILE=0 " + dir.env()).output.find("\"cache\": \"disk hit\"") != std::string::npos);
}

}  // TEST_SUITE
