#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "lossjit/device.hpp"

// Exit code ctest reports as "Skipped" (SKIP_RETURN_CODE in tests/CMakeLists.txt).
constexpr int kSkipped = 77;

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int result = context.run();
    if (context.shouldExit() || result != 0) return result;
    // The GPU suite on a machine without a GPU: say so, and let ctest count it as skipped rather
    // than passed.
    bool only_gpu = false;
    for (int i = 1; i < argc; ++i) only_gpu = only_gpu || std::strcmp(argv[i], "--test-suite=gpu") == 0;
    std::string reason;
    if (only_gpu && !lossjit::cuda_available(&reason)) {
        std::printf("GPU suite skipped: %s\n", reason.c_str());
        return kSkipped;
    }
    return result;
}
