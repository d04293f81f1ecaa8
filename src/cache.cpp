#include "cache.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include <fcntl.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "lossjit/version.hpp"

namespace lossjit {
namespace {

// Entry file: a fixed header, then the payload. A file that does not match in every field is
// treated as absent (and overwritten by a fresh compile), never loaded.
constexpr char kMagic[8] = {'L', 'J', 'K', 'C', 'A', 'C', 'H', 'E'};
constexpr std::uint32_t kFormatVersion = 1;

struct EntryHeader {
    char magic[8];
    std::uint32_t format_version;
    std::uint32_t target_length;
    char key[32];
    char target[16];
    std::uint64_t payload_length;
    std::uint64_t payload_checksum;  // XXH3-64 of the payload
};
static_assert(sizeof(EntryHeader) == 80);

std::string hex128(XXH128_hash_t h) { return fmt::format("{:016x}{:016x}", h.high64, h.low64); }

}  // namespace

std::string_view to_string(CacheOutcome outcome) {
    switch (outcome) {
        case CacheOutcome::Memory: return "memory hit";
        case CacheOutcome::Disk: return "disk hit";
        case CacheOutcome::Compiled: return "compiled";
    }
    return "?";
}

CacheSettings CacheSettings::from_environment() {
    CacheSettings s;
    if (const char* mode = std::getenv("LOSSJIT_CACHE")) {
        const std::string m = mode;
        if (m == "off") s.disk = Mode::Off;
        else if (m == "read") s.disk = Mode::Read;
        else if (m == "readwrite" || m.empty()) s.disk = Mode::ReadWrite;
        else throw UsageError(fmt::format("LOSSJIT_CACHE='{}': expected off, read or readwrite", m));
    }
    if (const char* dir = std::getenv("LOSSJIT_CACHE_DIR"); dir && *dir) {
        s.directory = dir;
    } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
        s.directory = std::filesystem::path(xdg) / "lossjit";
    } else if (const char* home = std::getenv("HOME"); home && *home) {
        s.directory = std::filesystem::path(home) / ".cache" / "lossjit";
    } else {
        s.disk = Mode::Off;  // nowhere sensible to write
    }
    return s;
}

std::string cache_key(const std::string& source, const std::string& target) {
    XXH3_state_t* state = XXH3_createState();
    if (!state) throw std::bad_alloc();
    XXH3_128bits_reset(state);
    auto add = [&](const std::string& field) {
        const std::uint64_t length = field.size();  // length-prefixed: fields cannot run into each other
        XXH3_128bits_update(state, &length, sizeof length);
        XXH3_128bits_update(state, field.data(), field.size());
    };
    add(kVersion);
    add(nvrtc_version());
    add(target);
    for (const auto& option : compile_options(target)) add(option);
    add(source);
    const auto hash = XXH3_128bits_digest(state);
    XXH3_freeState(state);
    return hex128(hash);
}

KernelCache::KernelCache(CacheSettings settings) : settings_(std::move(settings)) {}

KernelCache& KernelCache::process() {
    static KernelCache cache(CacheSettings::from_environment());
    return cache;
}

std::filesystem::path KernelCache::entry_path(const std::string& key, const std::string& target) const {
    // The name carries the target and NVRTC version so a directory listing tells what is inside.
    return settings_.directory / fmt::format("{}-{}-nvrtc{}.ljk", key, target, nvrtc_version());
}

std::shared_ptr<const KernelImage> KernelCache::read_entry(const std::filesystem::path& path, const std::string& key,
                                                           const std::string& target) const {
    std::ifstream in(path, std::ios::binary);
    if (!in) return nullptr;
    EntryHeader header{};
    if (!in.read(reinterpret_cast<char*>(&header), sizeof header)) return nullptr;
    if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0 || header.format_version != kFormatVersion ||
        std::memcmp(header.key, key.data(), sizeof header.key) != 0 || header.target_length != target.size() ||
        header.target_length > sizeof header.target ||
        std::memcmp(header.target, target.data(), target.size()) != 0 || header.payload_length > (1ull << 30)) {
        return nullptr;
    }
    auto image = std::make_shared<KernelImage>();
    image->target = target;
    image->data.resize(header.payload_length);
    if (!in.read(image->data.data(), static_cast<std::streamsize>(image->data.size()))) return nullptr;
    if (in.peek() != std::char_traits<char>::eof()) return nullptr;  // trailing bytes: not ours
    if (XXH3_64bits(image->data.data(), image->data.size()) != header.payload_checksum) return nullptr;
    return image;
}

void KernelCache::write_entry(const std::filesystem::path& path, const std::string& key, const KernelImage& image,
                              std::string& warning) const {
    std::error_code ec;
    std::filesystem::create_directories(settings_.directory, ec);
    EntryHeader header{};
    std::memcpy(header.magic, kMagic, sizeof kMagic);
    header.format_version = kFormatVersion;
    header.target_length = static_cast<std::uint32_t>(image.target.size());
    std::memcpy(header.key, key.data(), sizeof header.key);
    std::memcpy(header.target, image.target.data(), std::min(image.target.size(), sizeof header.target));
    header.payload_length = image.data.size();
    header.payload_checksum = XXH3_64bits(image.data.data(), image.data.size());

    // Write a private temporary file, flush it to disk, then rename: readers see either no entry or
    // a complete one, and concurrent writers of one key each rename a complete file.
    std::random_device random;
    const auto temp = path.string() + fmt::format(".tmp.{}.{:08x}", ::getpid(), random());
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        warning = fmt::format("kernel cache directory {} is not writable ({}); kernels are cached in memory only",
                              settings_.directory.string(), std::strerror(errno));
        return;
    }
    auto write_all = [fd](const char* data, std::size_t size) {
        while (size > 0) {
            const ssize_t n = ::write(fd, data, size);
            if (n < 0) {
                if (errno == EINTR) continue;
                return false;
            }
            data += n;
            size -= static_cast<std::size_t>(n);
        }
        return true;
    };
    const bool ok = write_all(reinterpret_cast<const char*>(&header), sizeof header) &&
                    write_all(image.data.data(), image.data.size()) && ::fsync(fd) == 0;
    const bool closed = ::close(fd) == 0;
    if (!ok || !closed || std::rename(temp.c_str(), path.c_str()) != 0) {
        warning = fmt::format("could not write kernel cache entry {} ({})", path.string(), std::strerror(errno));
        ::unlink(temp.c_str());
    }
}

CacheLookup KernelCache::get(const std::string& source, const std::string& target) {
    CacheLookup lookup;
    lookup.key = cache_key(source, target);

    std::promise<std::shared_ptr<const KernelImage>> promise;
    std::shared_future<std::shared_ptr<const KernelImage>> existing;
    {
        std::lock_guard lock(mutex_);
        if (auto it = entries_.find(lookup.key); it != entries_.end()) {
            existing = it->second;
        } else {
            entries_.emplace(lookup.key, promise.get_future().share());
        }
    }
    if (existing.valid()) {
        lookup.image = existing.get();  // waits, unlocked, while another thread compiles this key
        lookup.outcome = CacheOutcome::Memory;
        return lookup;
    }

    // This thread owns the key now; no lock is held while reading the disk or running NVRTC.
    try {
        const bool use_disk = settings_.disk != CacheSettings::Mode::Off;
        const auto path = use_disk ? entry_path(lookup.key, target) : std::filesystem::path();
        if (use_disk) lookup.image = read_entry(path, lookup.key, target);
        if (lookup.image) {
            lookup.outcome = CacheOutcome::Disk;
        } else {
            const auto start = std::chrono::steady_clock::now();
            lookup.image = std::make_shared<const KernelImage>(compile_cuda(source, target));
            lookup.compile_ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
            lookup.outcome = CacheOutcome::Compiled;
            if (settings_.disk == CacheSettings::Mode::ReadWrite) write_entry(path, lookup.key, *lookup.image, lookup.warning);
        }
        promise.set_value(lookup.image);
    } catch (...) {
        promise.set_exception(std::current_exception());
        std::lock_guard lock(mutex_);
        entries_.erase(lookup.key);  // a later call may try again
        throw;
    }
    return lookup;
}

}  // namespace lossjit
