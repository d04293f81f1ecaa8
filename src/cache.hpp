// cache: compiled kernel images by a strong hash of everything that determines them, in memory for
// this process and in a directory shared by all processes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "compile.hpp"

namespace lossjit {

enum class CacheOutcome { Memory, Disk, Compiled };
std::string_view to_string(CacheOutcome outcome);

struct CacheLookup {
    std::shared_ptr<const KernelImage> image;
    CacheOutcome outcome = CacheOutcome::Compiled;
    std::string key;          // 32 hex digits
    double compile_ms = 0.0;  // NVRTC time when outcome is Compiled
    std::string warning;      // set when the disk cache could not be used; the caller decides to show it
};

struct CacheSettings {
    enum class Mode { Off, Read, ReadWrite } disk = Mode::ReadWrite;
    std::filesystem::path directory;
    // LOSSJIT_CACHE_DIR, else $XDG_CACHE_HOME/lossjit, else ~/.cache/lossjit; LOSSJIT_CACHE=off|read|readwrite.
    static CacheSettings from_environment();
};

// The key: XXH3-128 over lossjit's version, NVRTC's version, the target, the compile options and
// the complete source (templates included, so editing a template changes every key).
std::string cache_key(const std::string& source, const std::string& target);

class KernelCache {
public:
    explicit KernelCache(CacheSettings settings);
    static KernelCache& process();  // the process-wide cache, configured from the environment

    // One compile per key: concurrent callers for the same key wait for the first one.
    CacheLookup get(const std::string& source, const std::string& target);

    std::filesystem::path entry_path(const std::string& key, const std::string& target) const;
    const CacheSettings& settings() const { return settings_; }

private:
    std::shared_ptr<const KernelImage> read_entry(const std::filesystem::path& path, const std::string& key,
                                                  const std::string& target) const;
    void write_entry(const std::filesystem::path& path, const std::string& key, const KernelImage& image,
                     std::string& warning) const;

    CacheSettings settings_;
    std::mutex mutex_;
    std::map<std::string, std::shared_future<std::shared_ptr<const KernelImage>>> entries_;
};

}  // namespace lossjit
