#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "pipeline.hpp"

namespace lossjit {
namespace {

std::string line_of(const std::string& source, int line) {
    std::size_t start = 0;
    for (int i = 1; i < line && start != std::string::npos; ++i) {
        start = source.find('\n', start);
        if (start != std::string::npos) ++start;
    }
    if (start == std::string::npos || start > source.size()) return {};
    const auto end = source.find('\n', start);
    std::string text = source.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!text.empty() && text.back() == '\r') text.pop_back();
    return text;
}

// "expr:1:13: error: message", the source line, and a caret under the column. Tabs in the source
// line are kept in the caret line so the caret lines up in a terminal.
std::string format_diagnostic(const SourceLocation& where, const std::string& message,
                              const std::string& source) {
    std::string text = fmt::format("{}:{}:{}: error: {}", where.source_name, where.line, where.column, message);
    const std::string line = line_of(source, where.line);
    constexpr std::size_t kMaxShown = 200;  // a 1 MB one-line program must not flood the terminal
    if (line.size() <= kMaxShown || static_cast<std::size_t>(where.column) <= kMaxShown) {
        std::string shown = line.substr(0, kMaxShown);
        std::string caret;
        for (std::size_t i = 0; i + 1 < static_cast<std::size_t>(where.column) && i < shown.size(); ++i)
            caret += shown[i] == '\t' ? '\t' : ' ';
        for (char& c : shown)
            if (static_cast<unsigned char>(c) < 0x20 && c != '\t') c = ' ';
        text += fmt::format("\n{}{}\n{}^", shown, line.size() > kMaxShown ? " ..." : "", caret);
    }
    return text;
}

}  // namespace

std::string printable(std::string_view text) {
    constexpr std::size_t kMaxShown = 64;
    std::string out;
    for (std::size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c < 0x7f && c != '\\') out += static_cast<char>(c);
        else out += fmt::format("\\x{:02x}", c);
    }
    if (text.size() > kMaxShown) out += fmt::format("... ({} bytes)", text.size());
    return out;
}

SourceError::SourceError(SourceLocation where, std::string message, const std::string& source)
    : Error(format_diagnostic(where, message, source)), where_(std::move(where)), message_(std::move(message)) {}

CompileError::CompileError(const std::string& summary, std::string log, std::vector<std::string> options,
                           std::string source)
    : Error(fmt::format("{}\n--- NVRTC log ---\n{}\n--- options ---\n{}\n--- generated source ---\n{}", summary,
                        log, fmt::join(options, " "), source)),
      log_(std::move(log)),
      options_(std::move(options)),
      source_(std::move(source)) {}

}  // namespace lossjit
