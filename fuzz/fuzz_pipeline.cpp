// libFuzzer target: the input bytes are a program. SourceError and UsageError are the expected ways
// to refuse one; anything else (a broken invariant, InternalError, another exception, a crash or a
// sanitizer report) is a finding, reported by aborting so libFuzzer saves the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "pipeline_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const lossjit::fuzz::CheckConfig config{.compile_with_nvrtc = std::getenv("LOSSJIT_FUZZ_NVRTC") != nullptr};
    const std::string finding =
        lossjit::fuzz::check_program(std::string_view(reinterpret_cast<const char*>(data), size), config);
    if (!finding.empty()) {
        std::fprintf(stderr, "lossjit fuzz finding: %s\n", finding.c_str());
        std::abort();
    }
    return 0;
}
