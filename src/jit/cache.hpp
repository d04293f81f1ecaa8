// cache: compiled kernel images by a strong hash of everything that determines them, in memory for
// this process and in a directory shared by all processes. docs/cache.md describes the directory.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jit/compile.hpp"
#include "lossjit/cache_outcome.hpp"

namespace lossjit {

struct CacheLookup {
    std::shared_ptr<const KernelImage> image;
    CacheOutcome outcome = CacheOutcome::Compiled;
    std::string key;          // 32 hex digits
    double compile_ms = 0.0;  // NVRTC time when outcome is Compiled
    // Set on the first lookup that could not write the directory, and never again in this cache
    // object: the caller shows it once, the library stays silent.
    std::string warning;
};

inline constexpr std::uint64_t kDefaultCacheMaxBytes = 256ull << 20;

struct CacheSettings {
    enum class Mode { Off, Read, ReadWrite } disk = Mode::ReadWrite;
    std::filesystem::path directory;
    std::uint64_t max_bytes = kDefaultCacheMaxBytes;  // bound on the directory's entries; 0: none
    // LOSSJIT_CACHE_DIR, else $XDG_CACHE_HOME/lossjit, else ~/.cache/lossjit; LOSSJIT_CACHE=off|read|readwrite;
    // LOSSJIT_CACHE_MAX_BYTES (bytes, or with a K, M or G suffix; 0 for no bound).
    static CacheSettings from_environment();
};
std::string_view to_string(CacheSettings::Mode mode);

// "268435456", "256M", "1g" -> bytes; throws UsageError naming `what` otherwise.
std::uint64_t parse_byte_size(const std::string& text, const std::string& what);

// The key: XXH3-128 over lossjit's version, NVRTC's version, the target, the compile options
// (fast math among them) and the complete source (templates included, so editing a template
// changes every key).
std::string cache_key(const std::string& source, const std::string& target, bool fast_math = false);

// What one cache object has done since it was made. Counters only grow.
struct CacheCounters {
    std::uint64_t memory_hits = 0;
    std::uint64_t disk_hits = 0;
    std::uint64_t compiles = 0;
    std::uint64_t corrupt_entries = 0;  // damaged or foreign entry files found (and replaced when writable)
    std::uint64_t write_failures = 0;
    std::uint64_t evictions = 0;        // entries this object removed to keep under max_bytes
};

class KernelCache {
public:
    explicit KernelCache(CacheSettings settings);
    static KernelCache& process();  // the process-wide cache, configured from the environment

    // One compile per key: concurrent callers for the same key wait for the first one.
    CacheLookup get(const std::string& source, const std::string& target, bool fast_math = false);

    std::filesystem::path entry_path(const std::string& key, const std::string& target) const;
    const CacheSettings& settings() const { return settings_; }
    CacheCounters counters() const;
    // True once a write failed because of the directory itself: later lookups no longer try to write.
    bool memory_only() const { return memory_only_.load(); }

private:
    void write_entry(const std::filesystem::path& path, const std::string& key, const KernelImage& image,
                     std::string& warning);
    void warn_once(std::string message, std::string& warning);

    CacheSettings settings_;
    std::mutex mutex_;
    std::map<std::string, std::shared_future<std::shared_ptr<const KernelImage>>> entries_;
    std::atomic<bool> memory_only_{false};
    std::atomic<bool> warned_{false};
    std::atomic<std::uint64_t> memory_hits_{0}, disk_hits_{0}, compiles_{0}, corrupt_{0}, write_failures_{0},
        evictions_{0};
};

// ---- the directory, for tools (`lossjit cache ...`) ----------------------------------------------

// An entry file as its name describes it: KEY-TARGET-nvrtcVERSION.ljk.
struct CacheEntryInfo {
    std::filesystem::path path;
    std::string key, target, nvrtc;  // empty when the name does not parse
    std::uint64_t bytes = 0;
    std::filesystem::file_time_type modified;
};

struct CacheDirectory {
    std::vector<CacheEntryInfo> entries;  // *.ljk, least recently used first
    std::uint64_t entry_bytes = 0;
    std::vector<CacheEntryInfo> temp_files;  // unfinished writes (*.ljk.tmp.*): in progress, or left by a crash
};

// An absent directory is an empty cache.
CacheDirectory scan_cache_directory(const std::filesystem::path& directory);

// "" when the entry is sound (its header matches its name, its payload its checksum), else why not.
std::string verify_cache_entry(const CacheEntryInfo& entry);

struct PruneResult {
    std::size_t removed = 0;
    std::uint64_t removed_bytes = 0;
    std::size_t stale_temp_removed = 0;
    std::uint64_t remaining_bytes = 0;
};

// Temporary files older than this belong to a writer that died; younger ones may still be renamed.
inline constexpr std::chrono::hours kStaleTempAge{1};

// Removes least recently used entries until the entries total at most `max_bytes` (0: no bound),
// never `keep`, and stale temporary files. Safe while other processes use the directory: an entry
// removed under a reader is still read whole, and a missing entry is only a miss.
PruneResult prune_cache_directory(const std::filesystem::path& directory, std::uint64_t max_bytes,
                                  const std::filesystem::path& keep = {});

// Removes every entry and temporary file (nothing else); returns how many files went.
std::size_t clear_cache_directory(const std::filesystem::path& directory);

// "" when a lookup could write entries into `directory` (creating it if needed), else why not.
std::string probe_cache_directory(const std::filesystem::path& directory);

}  // namespace lossjit
