#include "jit/cache.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "lossjit/version.hpp"
#include "util/atomic_file.hpp"

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

constexpr std::string_view kEntrySuffix = ".ljk";
constexpr std::string_view kTempMarker = ".ljk.tmp.";

EntryHeader make_header(const std::string& key, const KernelImage& image) {
    EntryHeader header{};
    std::memcpy(header.magic, kMagic, sizeof kMagic);
    header.format_version = kFormatVersion;
    header.target_length = static_cast<std::uint32_t>(image.target.size());
    std::memcpy(header.key, key.data(), std::min(key.size(), sizeof header.key));
    std::memcpy(header.target, image.target.data(), std::min(image.target.size(), sizeof header.target));
    header.payload_length = image.data.size();
    header.payload_checksum = XXH3_64bits(image.data.data(), image.data.size());
    return header;
}

// Closes on every path out.
struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

bool read_all(int fd, char* data, std::size_t size) {
    while (size > 0) {
        const ssize_t n = ::read(fd, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

enum class EntryState { Absent, Sound, Bad };

// Reads an entry and checks every header field against what its name promises. Anything that does
// not match is Bad (never loaded); `why` says which check failed, for `lossjit cache verify`.
EntryState read_entry(const std::filesystem::path& path, const std::string& key, const std::string& target,
                      std::string& payload, std::string& why) {
    Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (file.fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) return EntryState::Absent;
        why = fmt::format("cannot be opened ({})", std::strerror(errno));
        return EntryState::Bad;
    }
    struct stat st {};
    if (::fstat(file.fd, &st) != 0) {
        why = fmt::format("cannot be examined ({})", std::strerror(errno));
        return EntryState::Bad;
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    EntryHeader header{};
    if (size < sizeof header || !read_all(file.fd, reinterpret_cast<char*>(&header), sizeof header)) {
        why = fmt::format("{} bytes: shorter than the {}-byte header", size, sizeof header);
        return EntryState::Bad;
    }
    if (std::memcmp(header.magic, kMagic, sizeof kMagic) != 0) {
        why = "not a lossjit cache entry (bad magic)";
    } else if (header.format_version != kFormatVersion) {
        why = fmt::format("format version {}, this lossjit reads {}", header.format_version, kFormatVersion);
    } else if (key.size() != sizeof header.key || std::memcmp(header.key, key.data(), sizeof header.key) != 0) {
        why = "the key in the header is not the key in the name";
    } else if (header.target_length != target.size() || header.target_length > sizeof header.target ||
               std::memcmp(header.target, target.data(), target.size()) != 0) {
        why = "the target in the header is not the target in the name";
    } else if (header.payload_length != size - sizeof header) {
        why = fmt::format("the header promises {} payload bytes, the file holds {} (truncated or extended)",
                          header.payload_length, size - sizeof header);
    }
    if (!why.empty()) return EntryState::Bad;
    payload.resize(header.payload_length);
    if (!read_all(file.fd, payload.data(), payload.size())) {
        why = "the payload could not be read whole";
        return EntryState::Bad;
    }
    if (XXH3_64bits(payload.data(), payload.size()) != header.payload_checksum) {
        why = "the payload does not match its checksum";
        return EntryState::Bad;
    }
    return EntryState::Sound;
}

bool is_hex(std::string_view text) {
    return std::all_of(text.begin(), text.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// KEY-TARGET-nvrtcVERSION.ljk; fields stay empty when the name does not have that form.
void parse_entry_name(CacheEntryInfo& info) {
    const std::string name = info.path.filename().string();
    if (name.size() <= kEntrySuffix.size() + 33) return;
    const std::string stem = name.substr(0, name.size() - kEntrySuffix.size());
    const auto nvrtc = stem.rfind("-nvrtc");
    if (stem[32] != '-' || !is_hex(std::string_view(stem).substr(0, 32)) || nvrtc == std::string::npos || nvrtc <= 33)
        return;
    info.key = stem.substr(0, 32);
    info.target = stem.substr(33, nvrtc - 33);
    info.nvrtc = stem.substr(nvrtc + 6);
}

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string_view to_string(CacheOutcome outcome) {
    switch (outcome) {
        case CacheOutcome::Memory: return "memory hit";
        case CacheOutcome::Disk: return "disk hit";
        case CacheOutcome::Compiled: return "compiled";
    }
    return "?";
}

std::string_view to_string(CacheSettings::Mode mode) {
    switch (mode) {
        case CacheSettings::Mode::Off: return "off";
        case CacheSettings::Mode::Read: return "read";
        case CacheSettings::Mode::ReadWrite: return "readwrite";
    }
    return "?";
}

std::uint64_t parse_byte_size(const std::string& text, const std::string& what) {
    const auto bad = [&] {
        return UsageError(fmt::format("{}='{}': expected a size in bytes, optionally with a K, M or G suffix "
                                      "(e.g. 268435456 or 256M)", what, text));
    };
    std::size_t digits = 0;
    while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
    if (digits == 0 || digits > 19) throw bad();
    std::string suffix = text.substr(digits);
    for (auto& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    int shift = 0;
    if (suffix.empty() || suffix == "b") shift = 0;
    else if (suffix == "k" || suffix == "kb" || suffix == "kib") shift = 10;
    else if (suffix == "m" || suffix == "mb" || suffix == "mib") shift = 20;
    else if (suffix == "g" || suffix == "gb" || suffix == "gib") shift = 30;
    else throw bad();
    const std::uint64_t value = std::stoull(text.substr(0, digits));
    if (value > (std::numeric_limits<std::uint64_t>::max() >> shift)) throw bad();
    return value << shift;
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
    if (const char* bound = std::getenv("LOSSJIT_CACHE_MAX_BYTES"); bound && *bound)
        s.max_bytes = parse_byte_size(bound, "LOSSJIT_CACHE_MAX_BYTES");
    return s;
}

std::string cache_key(const std::string& source, const std::string& target, bool fast_math) {
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
    for (const auto& option : compile_options(target, fast_math)) add(option);
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

CacheCounters KernelCache::counters() const {
    CacheCounters c;
    c.memory_hits = memory_hits_.load();
    c.disk_hits = disk_hits_.load();
    c.compiles = compiles_.load();
    c.corrupt_entries = corrupt_.load();
    c.write_failures = write_failures_.load();
    c.evictions = evictions_.load();
    return c;
}

void KernelCache::warn_once(std::string message, std::string& warning) {
    if (!warned_.exchange(true)) warning = std::move(message);
}

void KernelCache::write_entry(const std::filesystem::path& path, const std::string& key, const KernelImage& image,
                              std::string& warning) {
    std::error_code ec;
    std::filesystem::create_directories(settings_.directory, ec);
    const EntryHeader header = make_header(key, image);

    // The shared atomic write (a private temporary file, fsync, rename, fsync the directory): readers
    // see either no entry or a complete one, and concurrent writers of one key each rename a complete
    // file. Its temporary names ("<entry>.tmp.<pid>.<random>") carry kTempMarker, which the pruning
    // below relies on. Failures are this cache's to judge, so it takes the outcome, not an exception.
    const std::string_view header_bytes(reinterpret_cast<const char*>(&header), sizeof header);
    const util::WriteOutcome written = util::try_write_file_atomically(path, {header_bytes, image.data});
    if (written.failed == util::WriteStep::Create) {
        // The directory itself refuses: every later write would too, so stop trying.
        ++write_failures_;
        memory_only_ = true;
        warn_once(fmt::format("kernel cache directory {} is not writable ({}); kernels are cached in memory only",
                              settings_.directory.string(), std::strerror(written.error)),
                  warning);
        return;
    }
    if (!written.ok()) {
        // Perhaps only this entry (a full disk): keep trying later ones, but say so only once.
        ++write_failures_;
        warn_once(fmt::format("could not write kernel cache entry {} ({})", path.string(), std::strerror(written.error)),
                  warning);
        return;
    }
    // Even without a bound this pass clears temporary files left by writers that died. It lists the
    // directory, which costs far less than the compile that preceded it.
    evictions_ += prune_cache_directory(settings_.directory, settings_.max_bytes, path).removed;
}

CacheLookup KernelCache::get(const std::string& source, const std::string& target, bool fast_math) {
    CacheLookup lookup;
    lookup.key = cache_key(source, target, fast_math);

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
        ++memory_hits_;
        return lookup;
    }

    // This thread owns the key now; no lock is held while reading the disk or running NVRTC.
    try {
        const bool use_disk = settings_.disk != CacheSettings::Mode::Off;
        const bool writable = settings_.disk == CacheSettings::Mode::ReadWrite;
        const auto path = use_disk ? entry_path(lookup.key, target) : std::filesystem::path();
        if (use_disk) {
            std::string payload, why;
            switch (read_entry(path, lookup.key, target, payload, why)) {
                case EntryState::Sound: {
                    auto image = std::make_shared<KernelImage>();
                    image->target = target;
                    image->data = std::move(payload);
                    lookup.image = std::move(image);
                    // The modification time is the recency eviction goes by; a failure only makes
                    // this entry look older.
                    if (writable && !memory_only_) ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
                    break;
                }
                case EntryState::Bad: ++corrupt_; break;  // replaced below by the fresh compile
                case EntryState::Absent: break;
            }
        }
        if (lookup.image) {
            lookup.outcome = CacheOutcome::Disk;
            ++disk_hits_;
        } else {
            const auto start = std::chrono::steady_clock::now();
            lookup.image = std::make_shared<const KernelImage>(compile_cuda(source, target, fast_math));
            lookup.compile_ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
            lookup.outcome = CacheOutcome::Compiled;
            ++compiles_;
            if (writable && !memory_only_) write_entry(path, lookup.key, *lookup.image, lookup.warning);
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

// ---- the directory --------------------------------------------------------------------------------

CacheDirectory scan_cache_directory(const std::filesystem::path& directory) {
    namespace fs = std::filesystem;
    CacheDirectory out;
    std::error_code ec;
    fs::directory_iterator it(directory, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        const bool temp = name.find(kTempMarker) != std::string::npos;
        if (!temp && !ends_with(name, kEntrySuffix)) continue;
        std::error_code stat_ec;
        CacheEntryInfo info;
        info.path = it->path();
        if (!it->is_regular_file(stat_ec)) continue;
        info.bytes = it->file_size(stat_ec);
        info.modified = it->last_write_time(stat_ec);
        if (stat_ec) continue;  // removed since the listing: not ours to count
        if (temp) {
            out.temp_files.push_back(std::move(info));
        } else {
            parse_entry_name(info);
            out.entry_bytes += info.bytes;
            out.entries.push_back(std::move(info));
        }
    }
    std::sort(out.entries.begin(), out.entries.end(), [](const CacheEntryInfo& a, const CacheEntryInfo& b) {
        return a.modified != b.modified ? a.modified < b.modified : a.path < b.path;
    });
    return out;
}

std::string verify_cache_entry(const CacheEntryInfo& entry) {
    if (entry.key.empty()) return "the name is not KEY-TARGET-nvrtcVERSION.ljk";
    std::string payload, why;
    switch (read_entry(entry.path, entry.key, entry.target, payload, why)) {
        case EntryState::Sound: return "";
        case EntryState::Absent: return "";  // evicted since the scan: nothing wrong with the cache
        case EntryState::Bad: return why;
    }
    return why;
}

PruneResult prune_cache_directory(const std::filesystem::path& directory, std::uint64_t max_bytes,
                                  const std::filesystem::path& keep) {
    PruneResult result;
    const CacheDirectory scan = scan_cache_directory(directory);
    const auto stale_before = std::filesystem::file_time_type::clock::now() - kStaleTempAge;
    for (const auto& temp : scan.temp_files) {
        std::error_code ec;
        if (temp.modified < stale_before && std::filesystem::remove(temp.path, ec)) ++result.stale_temp_removed;
    }
    std::uint64_t total = scan.entry_bytes;
    for (const auto& entry : scan.entries) {  // least recently used first
        if (max_bytes == 0 || total <= max_bytes) break;
        if (!keep.empty() && entry.path == keep) continue;
        std::error_code ec;
        const bool removed = std::filesystem::remove(entry.path, ec);
        if (ec) continue;  // cannot remove it: it still counts
        total -= entry.bytes;  // removed now, or by another process since the scan
        if (removed) {
            ++result.removed;
            result.removed_bytes += entry.bytes;
        }
    }
    result.remaining_bytes = total;
    return result;
}

std::size_t clear_cache_directory(const std::filesystem::path& directory) {
    const CacheDirectory scan = scan_cache_directory(directory);
    std::size_t removed = 0;
    for (const auto* list : {&scan.entries, &scan.temp_files}) {
        for (const auto& file : *list) {
            std::error_code ec;
            if (std::filesystem::remove(file.path, ec)) ++removed;
        }
    }
    return removed;
}

std::string probe_cache_directory(const std::filesystem::path& directory) {
    std::error_code ec;
    std::filesystem::create_directories(directory, ec);
    if (ec) return ec.message();
    // The same test a write makes: can a temporary file be created here? Its name marks it as a
    // temporary file, so a probe that dies before unlinking it is cleaned up like any other.
    const auto probe = util::temp_path_for(directory / "probe.ljk");  // "probe.ljk.tmp.<pid>.<random>"
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return std::strerror(errno);
    ::close(fd);
    ::unlink(probe.c_str());
    return "";
}

}  // namespace lossjit
