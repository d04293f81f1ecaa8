// plans: everything a launch needs beyond the kernel and the caller's pointers, made once per
// layout of the inputs and then reused, and the per-stream state launches work in.
//
// - choose_variant: the caller's knobs, filled from the tuning store, resolved for a layout.
// - Plan: one layout's variant, loaded kernel, grid and fixed kernel arguments. Immutable once made,
//   so any number of streams launch from one plan at once.
// - PlanCache: a program's recent plans by layout; shared by the streams under the Loss's lock.
// - StreamState: what belongs to one stream: its lock, its Workspace (device scratch that the
//   stream's kernels share in stream order) and its LaunchArgs (kernel argument buffers bound to a
//   plan and patched with each call's pointers). Launches on different streams share none of it.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "codegen/kernel_abi.hpp"
#include "codegen/kernel_spec.hpp"
#include "codegen/kinds/parameters.hpp"
#include "cuda/driver.hpp"
#include "lossjit/lossjit.hpp"
#include "pipeline.hpp"
#include "runtime/kernels.hpp"
#include "runtime/scratch.hpp"
#include "runtime/validate.hpp"

namespace lossjit {

// A kernel variant for one layout: the spec, and the launch knob the kernel does not depend on.
struct Variant {
    KernelSpec spec;
    int max_blocks_per_sm = 0;  // 0: reductions what occupancy allows, maps no cap
    std::string tuned;          // the tuning store's knobs used, or ""
    std::string warning;        // the tuning store could not be read
};

// What one call hands a kernel, as far as planning cares.
struct CallViews {
    std::span<const TensorView> inputs;  // program input order; a map's backward: the upstream gradient last
    // A map's output; with gradients, the layout the full-shape gradients share (its data unused).
    const OutputView* output = nullptr;
    DType result = DType::float32;       // a reduction's result
    std::span<const OutputView> grads;   // per derivative; empty when only emitting code
};

// The data and dtypes of a call as the kernel spec sees them (the full-shape gradients are the
// ones with `layout.count` elements). Without gradient views, a derivative gets its input's dtype.
KernelOperands kernel_operands(const ir::Program& program, const Layout& layout, const CallViews& views);

// The knobs for this program and layout: `options.knobs`, with the automatic ones taken from the
// tuning store where it has a record for (program, shapes, dtypes, GPU). `device` is the GPU's
// tuning text, or "" for none known (then the driver is asked only if the store has the program
// and shapes at all). Only `tunable` programs look (gradient kernels are not tuned). `gpu`: the GPU
// the defaults are chosen for (none: the defaults for any GPU).
Variant choose_variant(const Options& options, const ir::Program& program, bool tunable, const Layout& layout,
                       const CallViews& views, std::string device, const GpuFacts& gpu);

// A program a Loss launches (the loss, or it differentiated for a list of inputs) and its plans.
struct Launchable {
    const ir::Program* program = nullptr;
    const std::vector<std::string>* operands = nullptr;  // what its kernels read: the inputs (and a map's upstream)
    std::string label;  // "" for the loss, "grad(p,t) " for gradients: keeps their kernels apart
};

// The inputs' shapes and strides as a caller gave them: what a layout is planned from (a plan's key,
// and the key of the layout a repeated gradient call remembers).
struct ViewShapes {
    std::vector<Dims> shapes;
    std::vector<Dims> strides;

    ViewShapes() = default;
    explicit ViewShapes(std::span<const TensorView> views) {
        for (const auto& v : views) {
            shapes.push_back(v.shape);
            strides.push_back(v.strides);
        }
    }
    bool matches(std::span<const TensorView> views) const {
        if (views.size() != shapes.size()) return false;
        for (std::size_t k = 0; k < views.size(); ++k)
            if (views[k].shape != shapes[k] || views[k].strides != strides[k]) return false;
        return true;
    }
};

// Everything a launch needs that depends only on the inputs' shapes, strides and alignment.
struct Plan {
    ViewShapes inputs;  // the layout it was made for
    Dims output_shape;
    Dims output_strides;
    std::vector<DType> dtypes;  // the inputs', then the result's, then the gradients'
    std::uint64_t alignment = 0;  // which views allow vector accesses of 4 elements (alignment_of in plans.cpp)
    std::uint64_t alignment8 = 0; // ... and of 8
    bool has_output = false;
    bool matches(const CallViews& views) const;

    Layout layout;
    KernelSpec spec;
    int max_blocks_per_sm = 0;
    std::string tuned;
    const LoadedKernel* kernel = nullptr;
    LaunchGrid grid;
    std::vector<int> slots;  // program input slot of each kernel input (a map's upstream: one past them)
    double divisor = 1;      // what a reduction's sum is divided by (reduction_divisor)
    // Gradient kernels: the divisor of each reduction the derivatives start from (Program::gradient_totals;
    // a map's backward: 1). The gradients' seeds are the upstream gradient over these (Grads::scale).
    std::vector<double> seed_divisors;
    std::vector<double> scales;  // by-row programs: 1 / each total's divisor (total_divisors)
    std::size_t params = 0;       // the caller's parameters the kernel takes (statistics: from `statistics`)
    std::size_t derivatives = 0;  // gradients the kernel writes
    bool map_forward = false;     // writes a map's output (else a reduction's result, or gradients)
    std::vector<Parameter> parameters;  // the kernel's, in order (kernel_parameters)
};

// Plans `inputs` (and a map's output, or the gradients' shared layout) for `launchable`: the
// layout, the variant (knobs from the tuning store where allowed), its kernel (loaded through
// `kernels`), the grid. Fills the tuning entries of `timings`; the kernel map fills the rest.
std::shared_ptr<const Plan> make_plan(const Launchable& launchable, const Options& options, const CallViews& views,
                                      const DeviceFacts& device, KernelMap& kernels, Timings& timings);

// The most recent plans of one program, found by layout. Not thread-safe: the owner's lock guards it.
class PlanCache {
public:
    std::shared_ptr<const Plan> find(const CallViews& views) const;
    void add(std::shared_ptr<const Plan> plan);

private:
    // A few layouts alternate in practice (training and evaluation batches); more only cost a re-plan.
    static constexpr std::size_t kPlans = 8;
    std::vector<std::shared_ptr<const Plan>> recent_;  // most recent last
};

// Device scratch of one stream. Concurrent calls on different streams must not share it; kernels
// on one stream run one after another, so they can.
class Workspace {
public:
    // A reduction's partials (for `slots` blocks), arrival counters and result, allocated on first
    // use and zeroed on `stream`, so that its first kernel is ordered after the zeroing even when
    // the stream does not synchronise with the legacy default stream.
    void ensure(const std::shared_ptr<cuda::Context>& context, int slots, Stream stream);
    double* partials() const { return layout().partials(base()); }
    unsigned int* arrivals() const { return layout().arrivals(base()); }
    float* result() const { return layout().result(base()); }  // float32
    // The factor a Composite program's gradients are scaled by (ir::Program::gradient_factor), float64.
    double* factor() const { return layout().factor(base()); }
    // The values of a program's statistics (ir::Program::statistics), float64, kMaxStatistics of them.
    double* statistics() const { return layout().statistics(base()); }

    // The arrival counters and partial sums of summed gradients (lj::SumScratch), at least this many.
    // Kernels leave every counter at 0, and the counters never move, so plans of other sizes share
    // the buffer; it is cleared only when it is allocated. Growing it waits for the stream (rare: the
    // first call of a larger layout on this stream).
    void ensure_sums(const std::shared_ptr<cuda::Context>& context, std::size_t arrivals, std::size_t partials,
                     Stream stream);
    unsigned int* sum_arrivals() const { return reinterpret_cast<unsigned int*>(sums_->get()); }
    double* sum_partials() const {
        return reinterpret_cast<double*>(sums_->get() + sizeof(double) * sum_arrival_doubles(sum_arrivals_));
    }

private:
    ReduceScratch layout() const { return ReduceScratch(static_cast<int>(slots_)); }
    void* base() const { return reinterpret_cast<void*>(memory_->get()); }
    std::unique_ptr<cuda::Memory> memory_;  // ReduceScratch's layout
    std::size_t slots_ = 0;
    std::unique_ptr<cuda::Memory> sums_;  // arrival counters (sum_arrivals_ of them), then partial sums
    std::size_t sum_arrivals_ = 0, sum_partials_ = 0;  // capacities
};

// The kernel arguments for launches from one plan: the plan's fixed values, and room for each
// call's pointers and parameters. cuLaunchKernel copies them, so they are patched again as soon as
// it returns. Pointers into itself: it never moves.
class LaunchArgs {
public:
    LaunchArgs() = default;
    LaunchArgs(const LaunchArgs&) = delete;
    LaunchArgs& operator=(const LaunchArgs&) = delete;

    void bind(std::shared_ptr<const Plan> plan);  // the only place that allocates
    const std::shared_ptr<const Plan>& plan() const { return plan_; }
    void** data() { return args_.data(); }

    std::unique_ptr<abi::Inputs> inputs;
    std::vector<double> params;
    abi::Output output{};
    abi::ReduceOut reduce{};
    abi::RowsOut rows{};  // a by-row reduction's (several totals)
    std::vector<std::int64_t> grads;  // lj::Grads<G>: G pointers, kMaxRank strides, upstream and factor pointers, scale (double)
    abi::SumScratch sums{};  // summed gradients' scratch (KernelSpec::sums())
    const double* statistics = nullptr;  // the statistics' values (ir::Program::statistics), on the device

private:
    std::shared_ptr<const Plan> plan_;
    abi::Extents extents_{};
    std::vector<void*> args_;
};

// One stream's share of a Loss. Its launches hold `mutex` from finding their plan to cuLaunchKernel
// (operator(): to queuing the result's copy), so calls on one stream are queued in call order and
// never see each other's half-patched arguments; launches on other streams do not wait for it.
struct StreamState {
    struct Binding {
        explicit Binding(int device) : pointers(device) {}
        LaunchArgs args;
        DevicePointers pointers;  // the pointers of this program's arguments already checked
    };

    std::mutex mutex;
    Workspace workspace;
    std::map<const Launchable*, Binding> bindings;  // by program
    std::shared_ptr<const Plan> last;               // the plan of the most recent launch here
    std::atomic<std::uint64_t> last_call{0};        // its number among the Loss's calls; 0: none yet
};

}  // namespace lossjit
