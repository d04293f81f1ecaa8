// Inside the sweep: the runner that run_sweep() and tune() drive. Not for other callers.
#pragma once

#include <memory>
#include <optional>

#include "ir/program.hpp"
#include "tools/sweep.hpp"

namespace lossjit {

constexpr int kMaxSweepVariants = 1000;

// The request's program, checked with its options (SourceError, UsageError).
ir::Program checked_program(const SweepRequest& request);

// Holds the GPU state of one sweep (inputs, references, the roofline) from run() until it is
// destroyed, so that tune() can check a fresh compile on the same data afterwards.
class SweepRunner {
public:
    // UsageError / SourceError for the request, before any GPU work.
    explicit SweepRunner(const SweepRequest& request);
    ~SweepRunner();
    SweepRunner(const SweepRunner&) = delete;
    SweepRunner& operator=(const SweepRunner&) = delete;

    const SweepResult& run();  // CudaError "no CUDA device: ..." without one
    // A fresh Loss with `options` (tuning as they say), run once on the first input set; after run().
    // Its errors as SweepRow's.
    std::optional<KernelInfo> check(const Options& options, double& error, double& error_of_largest);
    TuningKey key() const;  // the tuning store's key for this program, these shapes, this GPU; after run()

private:
    class Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace lossjit
