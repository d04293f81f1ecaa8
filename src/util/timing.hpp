// Wall time of the library's own stages (Timings), in milliseconds.
#pragma once

#include <chrono>

namespace lossjit::util {

class Stopwatch {
public:
    // Milliseconds since the stopwatch started or since the last lap, and starts the next lap.
    double lap_ms() {
        const auto now = Clock::now();
        const double ms = std::chrono::duration<double, std::milli>(now - start_).count();
        start_ = now;
        return ms;
    }

private:
    using Clock = std::chrono::steady_clock;
    Clock::time_point start_ = Clock::now();
};

}  // namespace lossjit::util
