// The sweep's runner: uploads the input sets, computes the references, measures the roofline,
// compiles every variant on all cores and times them one after another on the GPU.
#include "tools/sweep_run.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "cuda/driver.hpp"
#include "cuda/timer.hpp"
#include "jit/compile.hpp"
#include "lossjit/errors.hpp"
#include "pipeline.hpp"
#include "tools/roofline.hpp"
#include "tuning/knobs.hpp"
#include "util/numeric.hpp"
#include "util/units.hpp"

namespace lossjit {
namespace {

using Clock = std::chrono::steady_clock;

bool has_knobs(const Knobs& k) { return k != Knobs{}; }

}  // namespace

// Everything a sweep holds on the GPU, from upload to the last variant.
class SweepRunner::Impl {
public:
    explicit Impl(const SweepRequest& request) : request_(request) {
        if (request.reps < 10)
            throw UsageError(fmt::format("a sweep times at least 10 intervals per variant, not {}", request.reps));
        if (request.warmup < 0) throw UsageError("warm-up launches cannot be negative");
        if (!(request.min_interval_ms > 0)) throw UsageError("the timed interval must be positive");
        if (request.input_sets.empty()) throw UsageError("a sweep needs at least one set of inputs");

        base_ = request.base;
        base_.use_tuning = false;
        probe_ = compile(request.program, base_);  // SourceError, UsageError for the program or the knobs
        for (const auto& set : request.input_sets) {
            if (set.size() != probe_->inputs().size())
                throw UsageError(fmt::format("the program takes {} inputs ({}), but a set has {}", probe_->inputs().size(),
                                             fmt::join(probe_->inputs(), ", "), set.size()));
            for (std::size_t k = 0; k < set.size(); ++k)
                if (set[k].shape != request.input_sets[0][k].shape)
                    throw UsageError(fmt::format("'{}' has shape {} in one input set and {} in another", probe_->inputs()[k],
                                                 format_shape(set[k].shape), format_shape(request.input_sets[0][k].shape)));
                else if (set[k].dtype != request.input_sets[0][k].dtype)
                    throw UsageError(fmt::format("'{}' is {} in one input set and {} in another", probe_->inputs()[k],
                                                 to_string(set[k].dtype), to_string(request.input_sets[0][k].dtype)));
        }
        std::vector<TensorView> host;
        for (const auto& t : request.input_sets[0]) host.push_back(t.view());
        output_shape_ = probe_->output_shape(host);  // UsageError when the shapes do not broadcast
        is_map_ = probe_->kind() == Kind::Map;
        // A map writes what a call without an explicit output would: the inputs' dtype (bfloat16 in,
        // bfloat16 out), the kernel the tuning store files under these dtypes.
        if (is_map_) output_dtype_ = probe_->output_dtype(host);

        if (request.include_default) {
            SweepVariant v{base_.knobs, has_knobs(base_.knobs) ? "base: " + describe(base_.knobs) : "default", ""};
            v.baseline = true;
            variants_.push_back(std::move(v));
        }
        for (auto& v : expand_sweep(base_.knobs, request.axes)) {
            if (request.axes.empty() && request.include_default) break;  // the base alone is the default
            variants_.push_back(std::move(v));
        }
        if (variants_.size() > static_cast<std::size_t>(kMaxSweepVariants))
            throw UsageError(fmt::format("{} variants: a sweep runs at most {}", variants_.size(), kMaxSweepVariants));

        result.program_name = request.base.source_name;
        result.kind = is_map_ ? "map" : std::string(probe_->reduction());
        result.shapes = tuning_shape_text(probe_->inputs(), host, nullptr);
        // As a call whose map output (if any) has the default dtype files it (plans.cpp).
        dtypes_ = tuning_dtype_text(host);
        result.input_sets = static_cast<int>(request.input_sets.size());
        result.reps = request.reps;
        for (std::size_t k = 0; k < host.size(); ++k)
            if (probe_->uses(probe_->inputs()[k]))
                result.bytes_per_call += static_cast<double>(host[k].numel()) * static_cast<double>(size_of(host[k].dtype));
        if (is_map_) result.bytes_per_call += static_cast<double>(element_count(output_shape_)) * static_cast<double>(size_of(output_dtype_));
    }

    void prepare() {
        std::string why;
        if (!cuda_available(&why)) throw CudaError(fmt::format("no CUDA device: {}", why));
        start_ = Clock::now();
        const int device = base_.device;
        const auto info = device_info(device);
        context_ = cuda::Context::for_device(device);
        scope_.emplace(*context_);
        result.device = tuning_device_text(device);
        result.target = target_for(info.major, info.minor);
        sms_ = info.multiprocessors;
        max_threads_per_sm_ = cuda::attribute(context_->device(), CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);

        const int count = static_cast<int>(request_.input_sets.size());
        for (int s = 0; s < count; ++s) {
            report(SweepProgress::Stage::Upload, s, count, "");
            Set set;
            for (const auto& t : request_.input_sets[static_cast<std::size_t>(s)]) {
                const std::size_t bytes = t.bytes.size();
                set.buffers.emplace_back(std::max<std::size_t>(bytes, 16), device);
                if (bytes > 0) set.buffers.back().upload(t.bytes.data(), bytes);
                set.device.push_back(TensorView::contiguous(set.buffers.back().data(), t.shape, t.dtype));
                set.host.push_back(t.view());
            }
            sets_.push_back(std::move(set));
        }
        for (int s = 0; s < count; ++s) {
            report(SweepProgress::Stage::Reference, s, count, "");
            Set& set = sets_[static_cast<std::size_t>(s)];
            if (is_map_) {  // in the output's dtype, rounded as the kernel rounds it
                set.map_reference.assign(static_cast<std::size_t>(element_count(output_shape_)) * size_of(output_dtype_), 0);
                probe_->reference_map(set.host, OutputView::contiguous(set.map_reference.data(), output_shape_, output_dtype_));
            } else {
                set.reference = probe_->reference(set.host);
                result.references.push_back(set.reference);
            }
        }
        const std::size_t out_bytes = static_cast<std::size_t>(element_count(output_shape_)) * size_of(output_dtype_);
        if (is_map_) output_.emplace(std::max<std::size_t>(out_bytes, 16), device);
        value_.emplace(sizeof(float) * probe_->result_count(), device);
        report(SweepProgress::Stage::Roofline, 0, 1, "");
        measure_roofline();
    }

    void run() {
        const std::size_t n = variants_.size();
        std::vector<std::string> failures(n);
        std::vector<std::optional<Loss>> losses(n);
        for (std::size_t i = 0; i < n; ++i) {
            failures[i] = variants_[i].error;
            if (!failures[i].empty()) continue;
            try {
                Options options = base_;  // tuning off
                options.knobs = variants_[i].knobs;
                losses[i] = compile(request_.program, options);
            } catch (const Error& e) {
                failures[i] = e.what();
            }
        }
        compile_all(losses, failures);

        cuda::EventTimer timer(context_);
        std::vector<SweepRow> rows;
        for (std::size_t i = 0; i < n; ++i) {
            SweepRow row;
            row.label = variants_[i].label;
            row.baseline = variants_[i].baseline;
            row.is_default = row.baseline;
            row.input_set = static_cast<int>(i % sets_.size());
            row.failure = failures[i];
            if (row.failure.empty()) {
                report(SweepProgress::Stage::Time, static_cast<int>(i), static_cast<int>(n), row.label);
                try {
                    time_variant(*losses[i], row, timer);
                } catch (const Error& e) {
                    row.failure = e.what();
                }
            }
            losses[i].reset();  // unloads its kernel
            rows.push_back(std::move(row));
        }
        // Variants that resolve to the default's kernel and launch are the default too.
        if (request_.include_default && rows[0].failure.empty()) {
            for (auto& row : rows)
                if (row.failure.empty() && row.kernel.signature == rows[0].kernel.signature &&
                    row.kernel.knobs.max_blocks_per_sm == rows[0].kernel.knobs.max_blocks_per_sm)
                    row.is_default = true;
        }
        std::stable_sort(rows.begin(), rows.end(), [](const SweepRow& a, const SweepRow& b) {
            if (a.failure.empty() != b.failure.empty()) return a.failure.empty();
            return a.failure.empty() && a.ms < b.ms;
        });
        result.rows = std::move(rows);
        result.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    }

    // A fresh Loss with `options` (tuning as they say), run once on the first input set.
    std::optional<KernelInfo> check(const Options& options, double& error, double& error_of_largest) {
        Loss loss = compile(request_.program, options);
        const Errors e = check_error(loss, sets_[0]);
        error = e.elementwise;
        error_of_largest = e.of_largest;
        return loss.kernel_info();
    }

    TuningKey key() const {
        return {tuning_program_text(checked_program(request_)), result.shapes, dtypes_, result.device};
    }

    SweepResult result;
    std::string dtypes_ = "float32";

private:
    struct Set {
        std::vector<DeviceBuffer> buffers;
        std::vector<TensorView> device, host;
        double reference = 0;
        std::vector<unsigned char> map_reference;  // a map's, in output_dtype_
    };

    void report(SweepProgress::Stage stage, int done, int total, const std::string& what) const {
        if (request_.progress) request_.progress(SweepProgress{stage, done, total, what});
    }

    void launch(Loss& loss, const Set& set) {
        if (is_map_) loss.map(set.device, OutputView::contiguous(output_->data(), output_shape_, output_dtype_));
        else loss.evaluate(set.device, OutputView::contiguous(value_->data(), Dims{static_cast<std::int64_t>(loss.result_count())}));
    }

    // SweepRow::error and SweepRow::error_of_largest.
    struct Errors {
        double elementwise = 0, of_largest = 0;
        Errors& operator|=(const Errors& o) {
            elementwise = std::max(elementwise, o.elementwise);
            of_largest = std::max(of_largest, o.of_largest);
            return *this;
        }
    };

    Errors check_error(Loss& loss, const Set& set) {
        if (!is_map_) {
            const double e = util::relative_error(loss(set.device), set.reference);
            return {e, e};
        }
        output_->fill_bytes(0xFF);  // nan: an element this launch did not write cannot pass
        launch(loss, set);
        LOSSJIT_CU(cuCtxSynchronize());
        std::vector<unsigned char> out(set.map_reference.size());
        if (!out.empty()) output_->download(out.data(), out.size());
        const auto elements = static_cast<std::size_t>(element_count(output_shape_));
        // The largest elementwise error, and the largest difference and reference magnitude (as
        // util::largest_error_relative_to_max counts them), in parallel: maps can be large.
        const std::size_t threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 32);
        std::vector<double> worst(threads, 0.0), difference(threads, 0.0), largest(threads, 0.0);
        std::vector<std::thread> pool;
        const std::size_t chunk = (elements + threads - 1) / threads;
        for (std::size_t t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
                const std::size_t end = std::min(elements, (t + 1) * chunk);
                for (std::size_t i = t * chunk; i < end; ++i) {
                    const auto at = static_cast<std::int64_t>(i);
                    const double v = load_as_double(out.data(), output_dtype_, at, DType::float64);
                    const double r = load_as_double(set.map_reference.data(), output_dtype_, at, DType::float64);
                    worst[t] = std::max(worst[t], util::relative_error(v, r));
                    if (std::isfinite(r)) largest[t] = std::max(largest[t], std::fabs(r));
                    if (v == r || (std::isnan(v) && std::isnan(r))) continue;
                    const double d = std::fabs(v - r);
                    difference[t] = std::isfinite(d) ? std::max(difference[t], d) : INFINITY;
                }
            });
        }
        for (auto& p : pool) p.join();
        const double d = *std::max_element(difference.begin(), difference.end());
        const double scale = *std::max_element(largest.begin(), largest.end());
        return {*std::max_element(worst.begin(), worst.end()), scale > 0 ? d / scale : d};
    }

    void time_variant(Loss& loss, SweepRow& row, cuda::EventTimer& timer) {
        const Set& set = sets_[static_cast<std::size_t>(row.input_set)];
        const auto go = [&] { launch(loss, set); };
        go();  // the first call loads the kernel (compiled already)
        for (int w = 0; w < request_.warmup; ++w) go();
        LOSSJIT_CU(cuCtxSynchronize());
        const double one = timer.interval_ms(go, 1);
        row.launches_per_interval = static_cast<int>(std::clamp(std::ceil(request_.min_interval_ms / std::max(one, 1e-4)), 1.0, 10000.0));
        row.ms = timer.median_ms(go, request_.reps, row.launches_per_interval);
        row.kernel = *loss.kernel_info();
        row.gbps = result.bytes_per_call / (row.ms * 1e6);
        row.roofline = result.roofline_gbps > 0 ? row.gbps / result.roofline_gbps : 0;
        // Reductions (and the default) are checked on every set: that is cheap and tune relies on it.
        Errors errors = check_error(loss, set);
        if (!is_map_ || row.is_default)
            for (auto& other : sets_)
                if (&other != &set) errors |= check_error(loss, other);
        row.error = errors.elementwise;
        row.error_of_largest = errors.of_largest;
    }

    // NVRTC on every core: each variant's kernel lands in the process's kernel cache, so that its
    // first call only loads it.
    void compile_all(std::vector<std::optional<Loss>>& losses, std::vector<std::string>& failures) {
        const std::size_t n = losses.size();
        std::atomic<std::size_t> next{0};
        std::mutex mutex;
        std::condition_variable changed;
        std::size_t done = 0;
        const std::size_t workers = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, std::max<std::size_t>(n, 1));
        std::vector<std::thread> pool;
        for (std::size_t w = 0; w < workers; ++w) {
            pool.emplace_back([&] {
                for (std::size_t i = next++; i < n; i = next++) {
                    std::string failure;
                    if (failures[i].empty()) {
                        try {
                            losses[i]->compile_kernel(sets_[i % sets_.size()].device, result.target);
                        } catch (const std::exception& e) {
                            failure = e.what();
                        }
                    }
                    std::lock_guard lock(mutex);
                    if (!failure.empty()) failures[i] = failure;
                    ++done;
                    changed.notify_one();
                }
            });
        }
        {
            std::unique_lock lock(mutex);
            std::size_t shown = static_cast<std::size_t>(-1);
            while (true) {
                if (done != shown) {
                    shown = done;
                    const std::size_t current = std::min(done, n - 1);
                    lock.unlock();
                    report(SweepProgress::Stage::Compile, static_cast<int>(shown), static_cast<int>(n),
                           n > 0 ? variants_[current].label : "");
                    lock.lock();
                }
                if (done == n) break;
                changed.wait(lock, [&] { return done != shown; });
            }
        }
        for (auto& t : pool) t.join();
    }

    void measure_roofline() {
        cuda::EventTimer timer(context_);
        const int reps = request_.reps;
        if (!is_map_) {
            const std::size_t bytes =
                static_cast<std::size_t>(std::clamp(result.bytes_per_call, 256.0 * (1 << 20), 2048.0 * (1 << 20))) / 16 * 16;
            DeviceBuffer buffer(bytes, base_.device), sink(64, base_.device);
            buffer.fill_bytes(0);
            const auto module = load_roofline(context_, result.target);
            const CUfunction f = module->function(kRooflineRead);
            int shapes = 0;
            for (int block : {256, 512, 1024}) {
                for (int per_sm : {2, 4, 8}) {
                    if (block * per_sm > max_threads_per_sm_) continue;
                    void* p = buffer.data();
                    void* s = sink.data();
                    long long n4 = static_cast<long long>(bytes / 16);
                    void* args[] = {&p, &n4, &s};
                    const unsigned grid = static_cast<unsigned>(sms_ * per_sm);
                    const auto go = [&] {
                        LOSSJIT_CU(cuLaunchKernel(f, grid, 1, 1, static_cast<unsigned>(block), 1, 1, 0, nullptr, args, nullptr));
                    };
                    go();
                    const double ms = timer.median_ms(go, reps, 1);
                    result.roofline_gbps = std::max(result.roofline_gbps, static_cast<double>(bytes) / (ms * 1e6));
                    ++shapes;
                }
            }
            result.roofline_method = fmt::format("streaming read: a read-only kernel over {}, the best of {} launch shapes",
                                                 util::human_bytes(static_cast<double>(bytes)), shapes);
        } else {
            const std::size_t bytes =
                static_cast<std::size_t>(std::clamp(result.bytes_per_call / 2, 128.0 * (1 << 20), 1024.0 * (1 << 20))) / 16 * 16;
            DeviceBuffer from(bytes, base_.device), to(bytes, base_.device);
            from.fill_bytes(0);
            const auto go = [&] {
                LOSSJIT_CU(cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(to.data()),
                                             reinterpret_cast<CUdeviceptr>(from.data()), bytes, nullptr));
            };
            go();
            const double ms = timer.median_ms(go, reps, 1);
            result.roofline_gbps = 2.0 * static_cast<double>(bytes) / (ms * 1e6);
            result.roofline_method =
                fmt::format("copy: cuMemcpyDtoD of {}, read + write counted", util::human_bytes(static_cast<double>(bytes)));
        }
    }

    const SweepRequest& request_;
    Options base_;
    std::optional<Loss> probe_;
    Shape output_shape_;
    DType output_dtype_ = DType::float32;  // a map's output
    bool is_map_ = false;
    std::vector<SweepVariant> variants_;
    Clock::time_point start_ = Clock::now();
    std::shared_ptr<cuda::Context> context_;
    std::optional<cuda::ScopedContext> scope_;
    int sms_ = 0, max_threads_per_sm_ = 0;
    std::vector<Set> sets_;
    std::optional<DeviceBuffer> output_, value_;
};

SweepRunner::SweepRunner(const SweepRequest& request) : impl_(std::make_unique<Impl>(request)) {}
SweepRunner::~SweepRunner() = default;

const SweepResult& SweepRunner::run() {
    impl_->prepare();
    impl_->run();
    return impl_->result;
}

ir::Program checked_program(const SweepRequest& request) {
    CheckOptions check_options;
    check_options.inputs = request.base.inputs;
    for (const auto& p : request.base.params) check_options.params.push_back({p.name, p.value});
    return check(parse(request.program, request.base.source_name), check_options);
}

std::optional<KernelInfo> SweepRunner::check(const Options& options, double& error, double& error_of_largest) {
    return impl_->check(options, error, error_of_largest);
}

TuningKey SweepRunner::key() const { return impl_->key(); }

SweepResult run_sweep(const SweepRequest& request) {
    SweepRunner runner(request);
    return runner.run();
}

}  // namespace lossjit
