#include "tools/sweep.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "jit/compile.hpp"
#include "cuda/driver.hpp"
#include "tuning/knobs.hpp"
#include "lossjit/errors.hpp"
#include "lossjit/version.hpp"
#include "pipeline.hpp"

namespace lossjit {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr int kMaxVariants = 1000;

std::vector<std::string> split(std::string_view text, char separator) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (true) {
        const auto end = text.find(separator, start);
        parts.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
        if (end == std::string_view::npos) break;
        start = end + 1;
    }
    return parts;
}

double relative_error(double value, double reference) {
    if (std::isnan(value) && std::isnan(reference)) return 0.0;
    if (value == reference) return 0.0;
    const double e = std::fabs(value - reference) / std::max(std::fabs(reference), 1e-30);
    return std::isnan(e) ? INFINITY : e;
}

std::string human_bytes(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    while (bytes >= 1024 && unit < 4) {
        bytes /= 1024;
        ++unit;
    }
    return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[unit]);
}

// The roofline for reductions: a kernel that only streams 16-byte loads, four in flight per thread,
// and keeps them alive with a comparison that never holds for the zero-filled buffer.
constexpr const char* kReadKernel = R"(
extern "C" __global__ void lj_roofline_read(const float4* __restrict__ p, long long n, float* sink) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float a = 0.0f, b = 0.0f, c = 0.0f, d = 0.0f;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const float4 v0 = __ldg(p + i), v1 = __ldg(p + i + stride), v2 = __ldg(p + i + 2 * stride), v3 = __ldg(p + i + 3 * stride);
        a += v0.x + v1.x + v2.x + v3.x;
        b += v0.y + v1.y + v2.y + v3.y;
        c += v0.z + v1.z + v2.z + v3.z;
        d += v0.w + v1.w + v2.w + v3.w;
    }
    for (; i < n; i += stride) {
        const float4 v = __ldg(p + i);
        a += v.x; b += v.y; c += v.z; d += v.w;
    }
    if (a + b + c + d == -1.0f) *sink = a;
}
)";

// CUDA events on the legacy default stream, where Loss's calls without a stream run.
class Timer {
public:
    Timer() {
        LOSSJIT_CU(cuEventCreate(&start_, CU_EVENT_DEFAULT));
        LOSSJIT_CU(cuEventCreate(&stop_, CU_EVENT_DEFAULT));
    }
    ~Timer() {
        cuda::api().cuEventDestroy(start_);
        cuda::api().cuEventDestroy(stop_);
    }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

    // Milliseconds per launch over one interval of `per` back-to-back launches.
    double interval(const std::function<void()>& launch, int per) {
        LOSSJIT_CU(cuEventRecord(start_, nullptr));
        for (int i = 0; i < per; ++i) launch();
        LOSSJIT_CU(cuEventRecord(stop_, nullptr));
        LOSSJIT_CU(cuEventSynchronize(stop_));
        float ms = 0;
        LOSSJIT_CU(cuEventElapsedTime(&ms, start_, stop_));
        return static_cast<double>(ms) / per;
    }
    double median(const std::function<void()>& launch, int reps, int per) {
        std::vector<double> times;
        for (int r = 0; r < reps; ++r) times.push_back(interval(launch, per));
        std::sort(times.begin(), times.end());
        return times.size() % 2 ? times[times.size() / 2]
                                : 0.5 * (times[times.size() / 2 - 1] + times[times.size() / 2]);
    }

private:
    CUevent start_ = nullptr, stop_ = nullptr;
};

bool has_knobs(const Options& o) { return describe_knobs(o) != "defaults"; }

// Everything a sweep holds on the GPU, from upload to the last variant.
class Runner {
public:
    explicit Runner(const SweepRequest& request) : request_(request) {
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
        }
        std::vector<TensorView> host;
        for (const auto& t : request.input_sets[0]) host.push_back(t.view());
        output_shape_ = probe_->output_shape(host);  // UsageError when the shapes do not broadcast
        is_map_ = probe_->kind() == Kind::Map;

        if (request.include_default) {
            SweepVariant v{base_, has_knobs(base_) ? "base: " + describe_knobs(base_) : "default", ""};
            variants_.push_back(std::move(v));
        }
        for (auto& v : expand_sweep(base_, request.axes)) {
            if (request.axes.empty() && request.include_default) break;  // the base alone is the default
            variants_.push_back(std::move(v));
        }
        if (variants_.size() > static_cast<std::size_t>(kMaxVariants))
            throw UsageError(fmt::format("{} variants: a sweep runs at most {}", variants_.size(), kMaxVariants));

        result.program_name = request.base.source_name;
        result.kind = is_map_ ? "map" : std::string(probe_->reduction());
        result.shapes = tuning_shape_text(probe_->inputs(), host, nullptr);
        result.input_sets = static_cast<int>(request.input_sets.size());
        result.reps = request.reps;
        for (std::size_t k = 0; k < host.size(); ++k)
            if (probe_->uses(probe_->inputs()[k])) result.bytes_per_call += static_cast<double>(host[k].numel()) * sizeof(float);
        if (is_map_) result.bytes_per_call += static_cast<double>(element_count(output_shape_)) * sizeof(float);
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
                const std::size_t bytes = t.values.size() * sizeof(float);
                set.buffers.emplace_back(std::max<std::size_t>(bytes, 16), device);
                if (bytes > 0) set.buffers.back().upload(t.values.data(), bytes);
                set.device.push_back(TensorView::contiguous(set.buffers.back().data(), t.shape));
                set.host.push_back(t.view());
            }
            sets_.push_back(std::move(set));
        }
        for (int s = 0; s < count; ++s) {
            report(SweepProgress::Stage::Reference, s, count, "");
            Set& set = sets_[static_cast<std::size_t>(s)];
            if (is_map_) {
                set.map_reference.resize(static_cast<std::size_t>(element_count(output_shape_)));
                probe_->reference_map(set.host, OutputView::contiguous(set.map_reference.data(), output_shape_));
            } else {
                set.reference = probe_->reference(set.host);
                result.references.push_back(set.reference);
            }
        }
        const std::size_t out_bytes = static_cast<std::size_t>(element_count(output_shape_)) * sizeof(float);
        if (is_map_) output_.emplace(std::max<std::size_t>(out_bytes, 16), device);
        value_.emplace(sizeof(float), device);
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
                losses[i] = compile(request_.program, variants_[i].options);
            } catch (const Error& e) {
                failures[i] = e.what();
            }
        }
        compile_all(losses, failures);

        Timer timer;
        std::vector<SweepRow> rows;
        for (std::size_t i = 0; i < n; ++i) {
            SweepRow row;
            row.knobs = variants_[i].knobs;
            row.is_default = request_.include_default && i == 0;
            row.input_set = static_cast<int>(i % sets_.size());
            row.failure = failures[i];
            if (row.failure.empty()) {
                report(SweepProgress::Stage::Time, static_cast<int>(i), static_cast<int>(n), row.knobs);
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
                    row.kernel.max_blocks_per_sm == rows[0].kernel.max_blocks_per_sm)
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
    std::optional<KernelInfo> check(const Options& options, double& error) {
        Loss loss = compile(request_.program, options);
        error = check_error(loss, sets_[0]);
        return loss.kernel_info();
    }

    TuningKey key() const {
        CheckOptions check_options;
        check_options.inputs = base_.inputs;
        for (const auto& p : base_.params) check_options.params.push_back({p.name, p.value});
        const ir::Program program = lossjit::check(parse(request_.program, base_.source_name), check_options);
        return {tuning_program_text(program), result.shapes, "float32", result.device};
    }

    SweepResult result;

private:
    struct Set {
        std::vector<DeviceBuffer> buffers;
        std::vector<TensorView> device, host;
        double reference = 0;
        std::vector<float> map_reference;
    };

    void report(SweepProgress::Stage stage, int done, int total, const std::string& what) const {
        if (request_.progress) request_.progress(SweepProgress{stage, done, total, what});
    }

    void launch(Loss& loss, const Set& set) {
        if (is_map_) loss.map(set.device, OutputView::contiguous(output_->data(), output_shape_));
        else loss.evaluate(set.device, static_cast<float*>(value_->data()));
    }

    double check_error(Loss& loss, const Set& set) {
        if (!is_map_) return relative_error(loss(set.device), set.reference);
        output_->fill_bytes(0xFF);  // nan: an element this launch did not write cannot pass
        launch(loss, set);
        LOSSJIT_CU(cuCtxSynchronize());
        std::vector<float> out(set.map_reference.size());
        if (!out.empty()) output_->download(out.data(), out.size() * sizeof(float));
        // The largest elementwise error, in parallel: maps can be large.
        const std::size_t threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 32);
        std::vector<double> worst(threads, 0.0);
        std::vector<std::thread> pool;
        const std::size_t chunk = (out.size() + threads - 1) / threads;
        for (std::size_t t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
                const std::size_t end = std::min(out.size(), (t + 1) * chunk);
                for (std::size_t i = t * chunk; i < end; ++i)
                    worst[t] = std::max(worst[t], relative_error(out[i], set.map_reference[i]));
            });
        }
        for (auto& p : pool) p.join();
        return *std::max_element(worst.begin(), worst.end());
    }

    void time_variant(Loss& loss, SweepRow& row, Timer& timer) {
        const Set& set = sets_[static_cast<std::size_t>(row.input_set)];
        const auto go = [&] { launch(loss, set); };
        go();  // the first call loads the kernel (compiled already)
        for (int w = 0; w < request_.warmup; ++w) go();
        LOSSJIT_CU(cuCtxSynchronize());
        const double one = timer.interval(go, 1);
        row.launches_per_interval = static_cast<int>(std::clamp(std::ceil(request_.min_interval_ms / std::max(one, 1e-4)), 1.0, 10000.0));
        row.ms = timer.median(go, request_.reps, row.launches_per_interval);
        row.kernel = *loss.kernel_info();
        row.gbps = result.bytes_per_call / (row.ms * 1e6);
        row.roofline = result.roofline_gbps > 0 ? row.gbps / result.roofline_gbps : 0;
        // Reductions (and the default) are checked on every set: that is cheap and tune relies on it.
        row.error = check_error(loss, set);
        if (!is_map_ || row.is_default)
            for (auto& other : sets_)
                if (&other != &set) row.error = std::max(row.error, check_error(loss, other));
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
                           n > 0 ? variants_[current].knobs : "");
                    lock.lock();
                }
                if (done == n) break;
                changed.wait(lock, [&] { return done != shown; });
            }
        }
        for (auto& t : pool) t.join();
    }

    void measure_roofline() {
        Timer timer;
        const int reps = request_.reps;
        if (!is_map_) {
            const std::size_t bytes =
                static_cast<std::size_t>(std::clamp(result.bytes_per_call, 256.0 * (1 << 20), 2048.0 * (1 << 20))) / 16 * 16;
            DeviceBuffer buffer(bytes, base_.device), sink(64, base_.device);
            buffer.fill_bytes(0);
            const KernelImage image = compile_cuda(kReadKernel, result.target);
            const cuda::Module module(context_, image.data);
            const CUfunction f = module.function("lj_roofline_read");
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
                    const double ms = timer.median(go, reps, 1);
                    result.roofline_gbps = std::max(result.roofline_gbps, static_cast<double>(bytes) / (ms * 1e6));
                    ++shapes;
                }
            }
            result.roofline_method = fmt::format("streaming read: a read-only kernel over {}, the best of {} launch shapes",
                                                 human_bytes(static_cast<double>(bytes)), shapes);
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
            const double ms = timer.median(go, reps, 1);
            result.roofline_gbps = 2.0 * static_cast<double>(bytes) / (ms * 1e6);
            result.roofline_method =
                fmt::format("copy: cuMemcpyDtoD of {}, read + write counted", human_bytes(static_cast<double>(bytes)));
        }
    }

    const SweepRequest& request_;
    Options base_;
    std::optional<Loss> probe_;
    Shape output_shape_;
    bool is_map_ = false;
    std::vector<SweepVariant> variants_;
    Clock::time_point start_ = Clock::now();
    std::shared_ptr<cuda::Context> context_;
    std::optional<cuda::ScopedContext> scope_;
    int sms_ = 0, max_threads_per_sm_ = 0;
    std::vector<Set> sets_;
    std::optional<DeviceBuffer> output_, value_;
};

std::string utc_now() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char text[32] = {};
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

std::string occupancy_text(const KernelInfo& k) {
    return fmt::format("{:.0f}% ({}/SM)", 100.0 * k.occupancy, k.blocks_per_sm);
}

}  // namespace

SweepAxis parse_sweep_axis(std::string_view text) {
    const auto eq = text.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
        throw UsageError(fmt::format("--sweep '{}': expected KNOB=VALUE,VALUE,... (e.g. block=128,256,512)", printable(text)));
    const auto name = knob_name(text.substr(0, eq));
    SweepAxis axis;
    Options probe;
    apply_knob(probe, text.substr(0, eq), "auto");  // an unknown knob throws, naming the knobs
    axis.knob = *name;
    for (auto& value : split(text.substr(eq + 1), ',')) {
        if (value.empty()) throw UsageError(fmt::format("--sweep '{}': an empty value", printable(text)));
        Options alone;
        set_knob(alone, axis.knob, value);  // a value this knob can never take throws here
        axis.values.push_back(std::move(value));
    }
    return axis;
}

std::vector<SweepVariant> expand_sweep(const Options& base, std::span<const SweepAxis> axes) {
    std::set<std::string> seen;
    std::size_t total = 1;
    for (const auto& axis : axes) {
        if (!seen.insert(axis.knob).second) throw UsageError(fmt::format("two --sweep axes set the knob {}", axis.knob));
        if (axis.values.empty()) throw UsageError(fmt::format("the --sweep axis {} has no values", axis.knob));
        total *= axis.values.size();
        if (total > static_cast<std::size_t>(kMaxVariants))
            throw UsageError(fmt::format("the axes make more than {} variants", kMaxVariants));
    }
    std::vector<SweepVariant> out;
    for (std::size_t t = 0; t < total; ++t) {
        SweepVariant v{base, "", ""};
        v.options.use_tuning = false;
        std::vector<std::string> parts;
        std::size_t rest = t;
        std::vector<std::size_t> index(axes.size());
        for (std::size_t a = axes.size(); a-- > 0;) {  // the last axis varies fastest
            index[a] = rest % axes[a].values.size();
            rest /= axes[a].values.size();
        }
        for (std::size_t a = 0; a < axes.size(); ++a) {
            const auto& value = axes[a].values[index[a]];
            apply_knob(v.options, axes[a].knob, value);
            parts.push_back(fmt::format("{}={}", axes[a].knob, value));
        }
        v.knobs = parts.empty() ? "base" : fmt::format("{}", fmt::join(parts, " "));
        try {
            validate_knobs(v.options);
        } catch (const UsageError& e) {
            v.error = e.what();
        }
        out.push_back(std::move(v));
    }
    return out;
}

std::vector<SweepAxis> default_tune_axes() {
    return {{"block", {"128", "256", "512", "1024"}}, {"items", {"4", "8", "16", "32"}}, {"blocks_per_sm", {"auto", "2", "4"}}};
}

SweepResult run_sweep(const SweepRequest& request) {
    Runner runner(request);
    runner.prepare();
    runner.run();
    return std::move(runner.result);
}

TuneResult tune(SweepRequest request, const TuneOptions& options) {
    if (request.axes.empty()) request.axes = default_tune_axes();
    request.include_default = true;
    if (!(options.tolerance >= 0)) throw UsageError("the tolerance must be a non-negative number");
    Runner runner(request);
    runner.prepare();
    runner.run();
    TuneResult r;
    r.sweep = runner.result;

    const SweepRow* defaults = nullptr;  // the row timed as the defaults (knobs "default" or "base: ...")
    int timed = 0;
    for (const auto& row : r.sweep.rows) {
        if (row.failure.empty()) ++timed;
        if (!defaults && (row.knobs == "default" || row.knobs.rfind("base: ", 0) == 0)) defaults = &row;
    }
    // Tuning may not make results worse than the project's bound, or than the defaults already are
    // (a map's elementwise error, or a hard reduction): whichever is larger.
    const double default_error = defaults && defaults->failure.empty() && std::isfinite(defaults->error) ? defaults->error : 0.0;
    r.bound = std::max(options.tolerance, default_error);
    for (std::size_t i = 0; i < r.sweep.rows.size(); ++i) {
        const auto& row = r.sweep.rows[i];
        if (row.failure.empty() && row.error <= r.bound) {
            r.winner = static_cast<int>(i);
            break;
        }
    }
    if (r.winner < 0) {
        r.not_stored = fmt::format("no variant was within the accuracy bound ({:.3g}) of {} timed", r.bound, timed);
        return r;
    }
    const SweepRow& win = r.sweep.rows[static_cast<std::size_t>(r.winner)];
    TuningRecord record;
    record.key = runner.key();
    record.knobs.block_threads = win.kernel.block_threads;
    record.knobs.items_per_thread = win.kernel.strided ? 0 : win.kernel.items_per_thread;
    record.knobs.vector_width = win.kernel.strided ? 0 : win.kernel.vector_width;
    record.knobs.max_blocks_per_sm = win.kernel.max_blocks_per_sm;
    record.knobs.accumulator = win.kernel.accumulator;
    record.knobs.fast_math = win.kernel.fast_math;
    record.ms = win.ms;
    record.default_ms = defaults && defaults->failure.empty() ? defaults->ms : 0.0;
    record.rel_error = win.error;
    record.variants = timed;
    record.lossjit = kVersion;
    record.nvrtc = nvrtc_version();
    record.when = utc_now();
    r.record = record;

    TuningStore* store = TuningStore::process();
    if (!options.store) {
        r.not_stored = "not asked to (--dry-run)";
    } else if (!store) {
        r.not_stored = "the kernel cache is off (LOSSJIT_CACHE=off, or no cache directory), and the tuning store with it";
    } else if (!store->writable()) {
        r.not_stored = fmt::format("the tuning store {} is read-only here (LOSSJIT_CACHE=read)", store->file().string());
    } else {
        store->put(record);
        r.stored_in = store->file().string();
        // What a later compile with automatic knobs does now; this also puts its kernel in the disk
        // cache, so the next process starts with a disk hit.
        Options fresh = request.base;
        fresh.use_tuning = true;
        r.check = runner.check(fresh, r.check_error);
    }
    return r;
}

std::string format_sweep_table(const SweepResult& r) {
    std::string out;
    int timed = 0;
    for (const auto& row : r.rows) timed += row.failure.empty() ? 1 : 0;
    out += fmt::format("{} ({}) on {}: inputs {}, {} per call\n", r.program_name, r.kind, r.device, r.shapes,
                       human_bytes(r.bytes_per_call));
    out += fmt::format("{} variant{} timed{}; each the median of {} intervals of back-to-back launches, on {} input set{} "
                       "in turn; {:.1f} s in all\n",
                       timed, timed == 1 ? "" : "s",
                       timed == static_cast<int>(r.rows.size()) ? "" : fmt::format(" of {}", r.rows.size()), r.reps,
                       r.input_sets, r.input_sets == 1 ? "" : "s", r.seconds);
    out += fmt::format("roofline {:.0f} GB/s ({})\n\n", r.roofline_gbps, r.roofline_method);

    const std::vector<std::string> header{"#", "block", "items", "vector", "unroll", "bps cap", "acc", "fast math", "ms",
                                          "GB/s", "% roof", "regs", "spill B", "occupancy", "rel. error", ""};
    std::vector<std::vector<std::string>> cells;
    std::vector<std::string> notes, failures;
    int rank = 0;
    for (const auto& row : r.rows) {
        if (!row.failure.empty()) {
            failures.push_back(fmt::format("  {}: {}", row.knobs, row.failure));
            continue;
        }
        ++rank;
        const auto& k = row.kernel;
        std::string mark = row.is_default ? "default" : "";
        if (row.knobs != "default" && row.knobs.rfind("base: ", 0) != 0 && row.is_default) mark = "= default";
        cells.push_back({std::to_string(rank), std::to_string(k.block_threads),
                         k.strided ? "-" : std::to_string(k.items_per_thread),
                         k.strided ? "-" : std::to_string(k.vector_width), k.strided ? "-" : std::to_string(k.unroll),
                         k.max_blocks_per_sm ? std::to_string(k.max_blocks_per_sm) : "auto",
                         std::string(to_string(k.accumulator)), k.fast_math ? "on" : "off", fmt::format("{:.4f}", row.ms),
                         fmt::format("{:.0f}", row.gbps), fmt::format("{:.1f}%", 100.0 * row.roofline),
                         std::to_string(k.registers), std::to_string(k.local_bytes), occupancy_text(k),
                         fmt::format("{:.2e}", row.error), mark});
        for (const auto& note : k.notes) notes.push_back(fmt::format("  #{} ({}): {}", rank, row.knobs, note));
    }
    std::vector<std::size_t> width(header.size());
    for (std::size_t c = 0; c < header.size(); ++c) {
        width[c] = header[c].size();
        for (const auto& line : cells) width[c] = std::max(width[c], line[c].size());
    }
    auto print_line = [&](const std::vector<std::string>& line) {
        std::string text;
        for (std::size_t c = 0; c < line.size(); ++c) {
            // Numbers right-aligned, words and the last column left.
            const bool left = c == 6 || c == 7 || c + 1 == line.size();
            text += left ? fmt::format("{:<{}}", line[c], width[c]) : fmt::format("{:>{}}", line[c], width[c]);
            if (c + 1 < line.size()) text += "  ";
        }
        while (!text.empty() && text.back() == ' ') text.pop_back();
        out += text + "\n";
    };
    print_line(header);
    for (const auto& line : cells) print_line(line);
    if (!notes.empty()) out += "notes:\n" + fmt::format("{}\n", fmt::join(notes, "\n"));
    if (!failures.empty()) out += "not timed:\n" + fmt::format("{}\n", fmt::join(failures, "\n"));
    return out;
}

std::string format_tune_summary(const TuneResult& t) {
    std::string out;
    int timed = 0, within = 0;
    const SweepRow* defaults = nullptr;
    for (const auto& row : t.sweep.rows) {
        if (!row.failure.empty()) continue;
        ++timed;
        if (row.error <= t.bound) ++within;
        if (!defaults && (row.knobs == "default" || row.knobs.rfind("base: ", 0) == 0)) defaults = &row;
    }
    out += fmt::format("tune: {} of {} timed variants within the accuracy bound {:.3g} (relative error against the "
                       "float64 reference; the bound is max(tolerance, the defaults' own error))\n",
                       within, timed, t.bound);
    if (t.winner >= 0) {
        const SweepRow& win = t.sweep.rows[static_cast<std::size_t>(t.winner)];
        out += fmt::format("winner: #{} ({}) {:.4f} ms, {:.0f} GB/s", t.winner + 1, win.knobs, win.ms, win.gbps);
        if (defaults) out += fmt::format("; the defaults {:.4f} ms ({:.3f}x)", defaults->ms, defaults->ms / win.ms);
        out += "\n";
        if (t.record) out += fmt::format("  knobs: {}\n", describe(t.record->knobs));
    }
    if (!t.stored_in.empty()) {
        out += fmt::format("stored in {} for {} float32 on {}\n", t.stored_in, t.sweep.shapes, t.sweep.device);
    } else {
        out += fmt::format("not stored: {}\n", t.not_stored);
    }
    if (t.check) {
        out += fmt::format("check: a new compile with automatic knobs runs \"{}\"{}, rel. error {:.2e}\n",
                           t.check->signature, t.check->tuned.empty() ? " (NOT from the tuning store)" : "",
                           t.check_error);
    }
    return out;
}

std::string sweep_json(const SweepResult& r, const TuneResult* tuned) {
    json rows = json::array();
    int rank = 0;
    for (const auto& row : r.rows) {
        const auto& k = row.kernel;
        json j{{"knobs", row.knobs}, {"input_set", row.input_set}};
        if (!row.failure.empty()) {
            j["failure"] = row.failure;
            rows.push_back(j);
            continue;
        }
        j["rank"] = ++rank;
        j["default"] = row.is_default;
        j["signature"] = k.signature;
        j["block_threads"] = k.block_threads;
        j["strided"] = k.strided;
        j["items_per_thread"] = k.items_per_thread;
        j["vector_width"] = k.vector_width;
        j["unroll"] = k.unroll;
        j["max_blocks_per_sm"] = k.max_blocks_per_sm;
        j["accumulator"] = std::string(to_string(k.accumulator));
        j["fast_math"] = k.fast_math;
        j["ms"] = row.ms;
        j["gbps"] = row.gbps;
        j["roofline_fraction"] = row.roofline;
        j["registers"] = k.registers;
        j["local_bytes"] = k.local_bytes;
        j["shared_bytes"] = k.shared_bytes;
        j["resident_blocks_per_sm"] = k.resident_blocks_per_sm;
        j["blocks_per_sm"] = k.blocks_per_sm;
        j["occupancy"] = k.occupancy;
        j["grid"] = k.grid;
        j["rel_error"] = row.error;
        j["launches_per_interval"] = row.launches_per_interval;
        j["notes"] = k.notes;
        rows.push_back(j);
    }
    json out{{"program", r.program_name},
             {"kind", r.kind},
             {"device", r.device},
             {"target", r.target},
             {"shapes", r.shapes},
             {"bytes_per_call", r.bytes_per_call},
             {"roofline", {{"gbps", r.roofline_gbps}, {"method", r.roofline_method}}},
             {"reps", r.reps},
             {"input_sets", r.input_sets},
             {"references", r.references},
             {"seconds", r.seconds},
             {"rows", rows}};
    if (tuned) {
        json t{{"bound", tuned->bound}, {"winner_rank", tuned->winner >= 0 ? json(tuned->winner + 1) : json(nullptr)}};
        if (tuned->record) {
            const auto& k = tuned->record->knobs;
            t["knobs"] = {{"block_threads", k.block_threads}, {"items_per_thread", k.items_per_thread},
                          {"vector_width", k.vector_width},   {"max_blocks_per_sm", k.max_blocks_per_sm},
                          {"accumulator", std::string(to_string(k.accumulator))}, {"fast_math", k.fast_math}};
            t["key"] = tuned->record->key.id();
        }
        t["stored_in"] = tuned->stored_in.empty() ? json(nullptr) : json(tuned->stored_in);
        if (!tuned->not_stored.empty()) t["not_stored"] = tuned->not_stored;
        if (tuned->check)
            t["check"] = {{"signature", tuned->check->signature}, {"tuned", tuned->check->tuned},
                          {"rel_error", tuned->check_error}};
        out["tune"] = t;
    }
    return out.dump(2);
}

}  // namespace lossjit
