// timer: GPU time of launches, measured with a pair of CUDA events through the dlopen'ed driver.
// The sweep, the REPL's :time and the benchmark all time this way.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "cuda/driver.hpp"

namespace lossjit::cuda {

// Two events in `context`, recorded on that context's legacy default stream, where Loss's calls
// without a stream run. Owned from creation: a throw anywhere destroys them.
class EventTimer {
public:
    explicit EventTimer(std::shared_ptr<Context> context);
    ~EventTimer();
    EventTimer(const EventTimer&) = delete;
    EventTimer& operator=(const EventTimer&) = delete;

    // Milliseconds per launch over one interval of `launches` back-to-back calls of `launch`.
    double interval_ms(const std::function<void()>& launch, int launches = 1);
    // The median of `reps` such intervals (reps >= 1).
    double median_ms(const std::function<void()>& launch, int reps, int launches = 1);

private:
    std::shared_ptr<Context> context_;
    CUevent start_ = nullptr, stop_ = nullptr;
};

// The middle value (the mean of the two middle ones for an even count); `values` must not be empty.
double median(std::vector<double> values);

}  // namespace lossjit::cuda
