// Everything lossjit throws derives from lossjit::Error. The library never prints: callers (the
// CLI among them) catch and decide what to show.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace lossjit {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Where in the user's program something is. Lines and columns count from 1; columns count bytes.
struct SourceLocation {
    std::string source_name = "expr";
    int line = 1;
    int column = 1;
};

// A mistake in the user's expression. what() is the full diagnostic:
//   expr:1:13: error: unknown function 'lgo'
//   mean(max(0, lgo(p)))
//               ^
class SourceError : public Error {
public:
    SourceError(SourceLocation where, std::string message, const std::string& source);
    const SourceLocation& where() const { return where_; }
    const std::string& message() const { return message_; }

private:
    SourceLocation where_;
    std::string message_;
};

// The API or CLI was used wrongly: shapes that do not broadcast, a missing input, an unknown
// parameter, an unreadable .npy file, ...
class UsageError : public Error {
public:
    using Error::Error;
};

// A valid request that lossjit cannot carry out yet where it was asked (e.g. a gradient over a
// broadcast pattern the GPU kernels do not sum; the CPU reference computes it). Callers that can
// fall back catch this type; they never need to read the message.
class UnsupportedError : public UsageError {
public:
    using UsageError::UsageError;
};

// NVRTC rejected the generated source. That is a lossjit bug (the checker should have caught the
// problem), so the log, the options and the source travel with the exception for the report.
class CompileError : public Error {
public:
    CompileError(const std::string& summary, std::string log, std::vector<std::string> options,
                 std::string source);
    const std::string& log() const { return log_; }
    const std::vector<std::string>& options() const { return options_; }
    const std::string& source() const { return source_; }

private:
    std::string log_;
    std::vector<std::string> options_;
    std::string source_;
};

// The CUDA driver is missing or a driver call failed.
class CudaError : public Error {
public:
    CudaError(const std::string& message, int code = -1) : Error(message), code_(code) {}
    int code() const { return code_; }  // CUresult, or -1 when there is none (no driver)

private:
    int code_;
};

// A call that would compile or load a kernel, or allocate device memory, on a stream that is being
// captured into a CUDA graph (torch.cuda.graph, cudaStreamBeginCapture). Those driver calls would
// invalidate the capture, so lossjit refuses before making them: run the call once before capturing
// (a warm-up) so that its kernel is loaded, and lend scratch (lossjit/scratch.hpp).
class CaptureError : public Error {
public:
    using Error::Error;
};

// The device scratch lent to a call (lossjit::ScratchScope) is smaller than the call needs.
// needed() is the size that suffices; lend at least that much and call again.
class ScratchTooSmall : public UsageError {
public:
    ScratchTooSmall(const std::string& message, std::size_t needed) : UsageError(message), needed_(needed) {}
    std::size_t needed() const { return needed_; }

private:
    std::size_t needed_;
};

// A broken invariant inside lossjit; never the user's fault.
class InternalError : public Error {
public:
    explicit InternalError(const std::string& message)
        : Error("internal error (please report): " + message) {}
};

}  // namespace lossjit
