// The invariants the fuzzer holds the pipeline to, shared by the libFuzzer target and the doctest
// suite that replays fuzz/corpus and fuzz/regressions in every build (so a reproducer keeps being
// checked where no clang is installed).
#pragma once

#include <string>
#include <string_view>

namespace lossjit::fuzz {

struct CheckConfig {
    // NVRTC takes ~100 ms per program, far too slow for fuzzing; the replay of the small
    // regression set turns it on.
    bool compile_with_nvrtc = false;
};

// Runs `text` through parse -> check -> emit (two kernel variants) -> dump -> re-parse -> CPU
// reference on tiny inputs. SourceError and UsageError from parse/check are expected outcomes.
// Returns "" when every invariant held, otherwise a description of the finding. Exceptions other
// than those expected are caught and reported as findings too.
std::string check_program(std::string_view text, const CheckConfig& config = {});

}  // namespace lossjit::fuzz
