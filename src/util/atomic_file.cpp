#include "util/atomic_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "lossjit/errors.hpp"

namespace lossjit::util {
namespace {

// Closes on every path out; the explicit close() reports the error a deferred write can raise.
struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
    bool close() {
        const int result = ::close(fd);
        fd = -1;
        return result == 0;
    }
};

bool write_all(int fd, std::string_view bytes) {
    const char* data = bytes.data();
    std::size_t left = bytes.size();
    while (left > 0) {
        const ssize_t n = ::write(fd, data, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data += n;
        left -= static_cast<std::size_t>(n);
    }
    return true;
}

// Without this a crash right after the rename may leave the old name (or none) on disk. Some
// filesystems refuse fsync on a directory; the data itself is already safe then.
void fsync_directory(const std::filesystem::path& directory) {
    const int fd = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

}  // namespace

std::filesystem::path temp_path_for(const std::filesystem::path& target) {
    thread_local std::mt19937 random{std::random_device{}()};
    return target.parent_path() / fmt::format("{}.tmp.{}.{:08x}", target.filename().string(), ::getpid(), random());
}

WriteOutcome try_write_file_atomically(const std::filesystem::path& target, std::initializer_list<std::string_view> pieces) {
    const auto temp = temp_path_for(target);
    Fd file{::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)};  // never someone else's file
    if (file.fd < 0) return {WriteStep::Create, errno};
    bool ok = true;
    for (const auto piece : pieces) ok = ok && write_all(file.fd, piece);
    ok = ok && ::fsync(file.fd) == 0;
    int error = errno;
    if (!file.close() && ok) {
        ok = false;
        error = errno;
    }
    if (!ok) {
        ::unlink(temp.c_str());
        return {WriteStep::Write, error};
    }
    if (std::rename(temp.c_str(), target.c_str()) != 0) {
        error = errno;
        ::unlink(temp.c_str());
        return {WriteStep::Rename, error};
    }
    fsync_directory(target.parent_path());
    return {};
}

std::string describe(const WriteOutcome& outcome) {
    const char* step = "";
    switch (outcome.failed) {
        case WriteStep::Done: return "written";
        case WriteStep::Create: step = "cannot create a temporary file beside it"; break;
        case WriteStep::Write: step = "write error"; break;
        case WriteStep::Rename: step = "cannot rename the temporary file into place"; break;
    }
    return fmt::format("{}: {}", step, std::strerror(outcome.error));
}

void write_file_atomically(const std::filesystem::path& target, std::initializer_list<std::string_view> pieces) {
    const WriteOutcome outcome = try_write_file_atomically(target, pieces);
    if (!outcome.ok()) throw UsageError(fmt::format("{}: {}", target.string(), describe(outcome)));
}

}  // namespace lossjit::util
