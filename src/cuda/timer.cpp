#include "cuda/timer.hpp"

#include <algorithm>

#include "lossjit/errors.hpp"

namespace lossjit::cuda {

EventTimer::EventTimer(std::shared_ptr<Context> context) : context_(std::move(context)) {
    const ScopedContext scope(*context_);
    LOSSJIT_CU(cuEventCreate(&start_, CU_EVENT_DEFAULT));
    try {
        LOSSJIT_CU(cuEventCreate(&stop_, CU_EVENT_DEFAULT));
    } catch (...) {
        api().cuEventDestroy(start_);
        throw;
    }
}

EventTimer::~EventTimer() {
    const ScopedContext scope(*context_);
    api().cuEventDestroy(start_);
    api().cuEventDestroy(stop_);
}

double EventTimer::interval_ms(const std::function<void()>& launch, int launches) {
    const ScopedContext scope(*context_);
    LOSSJIT_CU(cuEventRecord(start_, nullptr));
    for (int i = 0; i < launches; ++i) launch();
    LOSSJIT_CU(cuEventRecord(stop_, nullptr));
    LOSSJIT_CU(cuEventSynchronize(stop_));
    float ms = 0;
    LOSSJIT_CU(cuEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms) / launches;
}

double EventTimer::median_ms(const std::function<void()>& launch, int reps, int launches) {
    std::vector<double> times;
    for (int r = 0; r < reps; ++r) times.push_back(interval_ms(launch, launches));
    return median(std::move(times));
}

double median(std::vector<double> values) {
    if (values.empty()) throw InternalError("median of no values");
    std::sort(values.begin(), values.end());
    const std::size_t mid = values.size() / 2;
    return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

}  // namespace lossjit::cuda
