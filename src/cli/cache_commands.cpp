#include "cli/cache_commands.hpp"
#include "util/units.hpp"

#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/program.hpp"
#include "jit/cache.hpp"
#include "jit/compile.hpp"
#include "lossjit/lossjit.hpp"
#include "runtime/kernels.hpp"
#include "tools/json_text.hpp"

namespace lossjit::cli {

struct CacheCommands {
    CLI::App* stats = nullptr;
    CLI::App* list = nullptr;
    CLI::App* verify = nullptr;
    CLI::App* prune = nullptr;
    CLI::App* clear = nullptr;
    CLI::App* warm = nullptr;
    bool json = false;
    std::string max_bytes;  // prune --max-bytes; empty: the configured bound
    std::string warm_file;
    std::string warm_gpu;  // --gpu: Options::gpu
    std::vector<std::string> archs;
};

namespace {

using util::human_bytes;  // uint64_t sizes convert exactly below 2^53 bytes

double age_seconds(std::filesystem::file_time_type modified) {
    const auto age = std::filesystem::file_time_type::clock::now() - modified;
    return std::max(0.0, std::chrono::duration<double>(age).count());
}

std::string human_age(double seconds) {
    if (seconds < 60) return fmt::format("{:.0f}s", seconds);
    if (seconds < 3600) return fmt::format("{:.0f}m", seconds / 60);
    if (seconds < 86400) return fmt::format("{:.1f}h", seconds / 3600);
    return fmt::format("{:.1f}d", seconds / 86400);
}

// The directory the library would use in this environment; the commands work on it whatever the
// mode, since managing a read-only or disabled cache is still useful.
CacheSettings settings_or_throw() {
    CacheSettings settings = CacheSettings::from_environment();
    if (settings.directory.empty())
        throw UsageError("there is no kernel cache directory: set LOSSJIT_CACHE_DIR (or HOME or XDG_CACHE_HOME)");
    return settings;
}

std::string bound_text(std::uint64_t max_bytes) {
    return max_bytes == 0 ? std::string("none") : fmt::format("{} ({} bytes)", human_bytes(max_bytes), max_bytes);
}

int stats_command(bool json) {
    const CacheSettings settings = settings_or_throw();
    const CacheDirectory scan = scan_cache_directory(settings.directory);
    std::string mode(to_string(settings.disk));
    std::string why_not;
    if (settings.disk == CacheSettings::Mode::ReadWrite) {
        why_not = probe_cache_directory(settings.directory);
        if (!why_not.empty()) mode = "memory only";
    }
    const std::string nvrtc = nvrtc_version();
    // A name that does not parse has no NVRTC version: it is misnamed (`cache verify` says so), not
    // an entry of another NVRTC.
    std::size_t other_nvrtc = 0, misnamed = 0, stale = 0;
    for (const auto& e : scan.entries) {
        if (e.key.empty()) ++misnamed;
        else other_nvrtc += e.nvrtc != nvrtc;
    }
    for (const auto& t : scan.temp_files) stale += age_seconds(t.modified) > std::chrono::seconds(kStaleTempAge).count();
    if (json) {
        std::cout << lossjit::json_text(nlohmann::json{{"directory", settings.directory.string()},
                                    {"mode", mode},
                                    {"not_writable_because", why_not},
                                    {"entries", scan.entries.size()},
                                    {"bytes", scan.entry_bytes},
                                    {"max_bytes", settings.max_bytes},
                                    {"entries_for_other_nvrtc", other_nvrtc},
                                    {"entries_misnamed", misnamed},
                                    {"temp_files", scan.temp_files.size()},
                                    {"stale_temp_files", stale},
                                    {"nvrtc", nvrtc}})
                  << "\n";
        return 0;
    }
    std::cout << fmt::format("directory   {}\n", settings.directory.string());
    std::cout << fmt::format("mode        {}{}\n", mode, why_not.empty() ? "" : " (the directory is not writable: " + why_not + ")");
    std::vector<std::string> notes;
    if (other_nvrtc) notes.push_back(fmt::format("{} for NVRTC versions other than {}", other_nvrtc, nvrtc));
    if (misnamed) notes.push_back(fmt::format("{} not named KEY-TARGET-nvrtcVERSION.ljk: see cache verify", misnamed));
    std::cout << fmt::format("entries     {}, {}{}\n", scan.entries.size(), human_bytes(scan.entry_bytes),
                             notes.empty() ? "" : fmt::format(" ({})", fmt::join(notes, "; ")));
    std::cout << fmt::format("bound       {}\n", bound_text(settings.max_bytes));
    std::cout << fmt::format("temp files  {} ({} stale)\n", scan.temp_files.size(), stale);
    return 0;
}

int list_command(bool json) {
    const CacheSettings settings = settings_or_throw();
    const CacheDirectory scan = scan_cache_directory(settings.directory);
    if (json) {
        auto rows = nlohmann::json::array();
        for (const auto& e : scan.entries) {
            rows.push_back({{"key", e.key}, {"target", e.target}, {"nvrtc", e.nvrtc}, {"bytes", e.bytes},
                            {"age_s", age_seconds(e.modified)}, {"path", e.path.string()}});
        }
        std::cout << json_text(rows) << "\n";
        return 0;
    }
    // Least recently used first: the order prune and eviction remove them in.
    std::cout << fmt::format("{:<32}  {:<12}  {:<6}  {:>10}  {:>6}\n", "KEY", "TARGET", "NVRTC", "SIZE", "AGE");
    for (const auto& e : scan.entries) {
        if (e.key.empty()) {
            std::cout << fmt::format("{:<32}  {:<12}  {:<6}  {:>10}  {:>6}\n", e.path.filename().string(), "?", "?",
                                     human_bytes(e.bytes), human_age(age_seconds(e.modified)));
        } else {
            std::cout << fmt::format("{:<32}  {:<12}  {:<6}  {:>10}  {:>6}\n", e.key, e.target, e.nvrtc,
                                     human_bytes(e.bytes), human_age(age_seconds(e.modified)));
        }
    }
    std::cout << fmt::format("{} entries, {} in {}\n", scan.entries.size(), human_bytes(scan.entry_bytes),
                             settings.directory.string());
    return 0;
}

int verify_command() {
    const CacheSettings settings = settings_or_throw();
    const CacheDirectory scan = scan_cache_directory(settings.directory);
    std::size_t bad = 0;
    for (const auto& e : scan.entries) {
        const std::string why = verify_cache_entry(e);
        if (why.empty()) continue;
        ++bad;
        std::cout << fmt::format("bad: {}: {}\n", e.path.string(), why);
    }
    std::cout << fmt::format("{} entries checked in {}: {}\n", scan.entries.size(), settings.directory.string(),
                             bad == 0 ? std::string("all sound") : fmt::format("{} bad (a lookup recompiles and replaces them; "
                                                                               "`lossjit cache clear` removes everything)", bad));
    return bad == 0 ? 0 : 1;
}

int prune_command(const std::string& max_bytes_text) {
    const CacheSettings settings = settings_or_throw();
    const std::uint64_t bound = max_bytes_text.empty() ? settings.max_bytes : parse_byte_size(max_bytes_text, "--max-bytes");
    const PruneResult result = prune_cache_directory(settings.directory, bound);
    std::cout << fmt::format("removed {} entries ({}) and {} stale temporary files; {} remain, bound {}\n",
                             result.removed, human_bytes(result.removed_bytes), result.stale_temp_removed,
                             human_bytes(result.remaining_bytes), bound_text(bound));
    return 0;
}

int clear_command() {
    const CacheSettings settings = settings_or_throw();
    const std::size_t removed = clear_cache_directory(settings.directory);
    std::cout << fmt::format("removed {} files from {}\n", removed, settings.directory.string());
    return 0;
}

std::string trim(const std::string& text) {
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";
    const auto last = text.find_last_not_of(" \t\r\n");
    return text.substr(first, last - first + 1);
}

int warm_command(const std::string& file, std::vector<std::string> archs, const std::string& gpu) {
    // Check every architecture (and the GPU's name) before compiling anything: a typo should not cost a run.
    if (archs.empty()) archs.push_back("sm_90");
    for (auto& arch : archs) {
        arch = normalize_target(arch);
        require_target_of(gpu, arch);
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) throw UsageError(fmt::format("cannot read warm file '{}'", file));
    require_writable_cache("warm");

    int line_number = 0, programs = 0, failed = 0, compiled = 0, hits = 0;
    std::string line;
    while (std::getline(in, line)) {
        ++line_number;
        const std::string program = trim(line);
        if (program.empty() || program.front() == '#') continue;
        ++programs;
        try {
            Options options;
            options.source_name = file;
            options.gpu = gpu;
            const Loss loss = compile(program, options);
            for (const auto& arch : archs) {
                // No inputs: the kernel for inputs that all share one contiguous shape (see --help),
                // after its statistics' (the kernels that run first).
                auto builds = loss.compile_statistics({}, arch);
                builds.push_back(loss.compile_kernel({}, arch));
                for (std::size_t i = 0; i < builds.size(); ++i) {
                    const KernelBuild& build = builds[i];
                    (build.cache == lossjit::CacheOutcome::Compiled ? compiled : hits)++;
                    const std::string which = i + 1 < builds.size() ? fmt::format(" statistic {}", i) : "";
                    std::cout << fmt::format("{}:{}:{} {} {}{}\n", file, line_number, which, build.target,
                                             lossjit::to_string(build.cache),
                                             build.cache == lossjit::CacheOutcome::Compiled
                                                 ? fmt::format(" (NVRTC {:.1f} ms)", build.nvrtc_ms) : "");
                    if (!build.warning.empty()) {
                        std::cout << std::flush;
                        std::cerr << "lossjit: warning: " << build.warning << "\n";
                    }
                }
            }
        } catch (const SourceError& e) {
            ++failed;
            std::cout << std::flush;  // keep the report in line order where both go to one place
            // The program is one line of the file, so its column is the file's column past the indent.
            const int column = e.where().column + static_cast<int>(line.find_first_not_of(" \t"));
            std::cerr << fmt::format("{}:{}:{}: error: {}\n{}\n{}^\n", file, line_number, column, e.message(), line,
                                     std::string(static_cast<std::size_t>(std::max(column - 1, 0)), ' '));
        } catch (const Error& e) {
            ++failed;
            std::cout << std::flush;
            std::cerr << fmt::format("{}:{}: error: {}\n", file, line_number, e.what());
        }
    }
    const CacheCounters counters = KernelCache::process().counters();
    std::cout << fmt::format("warm: {} programs x {} targets: {} compiled, {} already cached{}{}\n", programs,
                             archs.size(), compiled, hits,
                             counters.corrupt_entries ? fmt::format(", {} damaged entries replaced", counters.corrupt_entries) : "",
                             failed ? fmt::format(", {} {} with errors", failed, failed == 1 ? "line" : "lines") : "");
    require_no_write_failures("warm");
    return failed == 0 ? 0 : 1;
}

}  // namespace

void require_writable_cache(const char* command) {
    const CacheSettings settings = settings_or_throw();
    switch (settings.disk) {
        case CacheSettings::Mode::Off:
            throw UsageError(fmt::format("{} stores kernels in the disk cache, which is off (LOSSJIT_CACHE=off)", command));
        case CacheSettings::Mode::Read:
            throw UsageError(fmt::format("{} stores kernels in the disk cache, which is read-only (LOSSJIT_CACHE=read)",
                                         command));
        case CacheSettings::Mode::ReadWrite: break;
    }
    if (const std::string why = probe_cache_directory(settings.directory); !why.empty())
        throw UsageError(fmt::format("{} stores kernels in the disk cache, but {} is not writable ({})", command,
                                     settings.directory.string(), why));
}

void require_no_write_failures(const char* command) {
    if (const auto failures = KernelCache::process().counters().write_failures)
        throw UsageError(fmt::format("{}: {} {} could not be written to the disk cache (see the warning above)", command,
                                     failures, failures == 1 ? "kernel" : "kernels"));
}

std::shared_ptr<CacheCommands> add_cache_commands(CLI::App& app) {
    auto commands = std::make_shared<CacheCommands>();
    auto& c = *commands;
    auto* cache = app.add_subcommand("cache", "inspect and manage the kernel cache directory (see docs/cache.md)");
    cache->require_subcommand(1);
    c.stats = cache->add_subcommand("stats", "entry count, bytes, bound, directory and mode");
    c.stats->add_flag("--json", c.json, "print JSON");
    c.list = cache->add_subcommand("list", "every entry: key, target, size, age (least recently used first)");
    c.list->add_flag("--json", c.json, "print JSON");
    c.verify = cache->add_subcommand("verify", "check every entry's header and checksum; exit 1 and list the bad ones");
    c.prune = cache->add_subcommand("prune", "remove least recently used entries down to the bound, and stale temporary files");
    c.prune->add_option("--max-bytes", c.max_bytes,
                        "the bound to apply now, e.g. 64M (default: LOSSJIT_CACHE_MAX_BYTES, else 256M)");
    c.clear = cache->add_subcommand("clear", "remove every entry (and nothing else) from the directory");

    c.warm = app.add_subcommand("warm", "precompile a file of programs into the cache (no GPU needed)");
    c.warm->footer(
        "FILE holds one program per line; blank lines and lines starting with '#' are skipped. Each program is "
        "built for inputs that all share one contiguous shape (any shape), the kernel `run` uses when every input "
        "has the same shape; other layouts, such as a broadcast input, get their own kernel at their first call. "
        "A line that fails is reported as FILE:LINE:COL, the others still compile, and warm exits 1 at the end.");
    c.warm->add_option("file", c.warm_file, "the file of programs")->required();
    c.warm->add_option("--arch", c.archs, "sm_XX (CUBIN) or compute_XX (PTX); repeat for several (default sm_90)")
        ->allow_extra_args(false);
    add_gpu_option(c.warm, c.warm_gpu);
    return commands;
}

std::optional<int> run_cache_commands(const CacheCommands& c) {
    if (c.stats->parsed()) return stats_command(c.json);
    if (c.list->parsed()) return list_command(c.json);
    if (c.verify->parsed()) return verify_command();
    if (c.prune->parsed()) return prune_command(c.max_bytes);
    if (c.clear->parsed()) return clear_command();
    if (c.warm->parsed()) return warm_command(c.warm_file, c.archs, c.warm_gpu);
    return std::nullopt;
}

}  // namespace lossjit::cli
