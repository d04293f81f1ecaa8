// GPU tests: the five reference problems at their full shapes against the CPU reference, plus
// layouts, parameters, determinism and edge cases. Skipped, visibly, where there is no device.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "builtin_calls.hpp"
#include "cuda/driver.hpp"
#include "lang/builtins.hpp"
#include "tools/host.hpp"
#include "lossjit/lossjit.hpp"
#include "paths.hpp"

using namespace lossjit;

namespace {

bool have_gpu() {
    static const bool available = [] {
        std::string reason;
        const bool ok = cuda_available(&reason);
        if (!ok) std::printf("[lossjit] GPU tests SKIPPED: %s\n", reason.c_str());
        return ok;
    }();
    return available;
}

struct DeviceTensor {
    HostTensor host;
    DeviceBuffer buffer;
    explicit DeviceTensor(HostTensor h) : host(std::move(h)), buffer(host.bytes.size() + 4) {
        buffer.upload(host.bytes.data(), host.bytes.size());
    }
    TensorView device() const { return TensorView::contiguous(buffer.data(), host.shape, host.dtype); }
};

DeviceTensor make(const std::string& spec, std::uint64_t seed) { return DeviceTensor(generate(parse_generator(spec), seed)); }

// LOSSJIT_GPU_TEST_SCALE=k divides every extent of the full-size problems by k, for runs under
// compute-sanitizer, which slows kernels down by orders of magnitude.
std::string full_size(const std::string& spec) {
    const char* env = std::getenv("LOSSJIT_GPU_TEST_SCALE");
    const long long scale = env ? std::max(1ll, std::atoll(env)) : 1;
    if (scale == 1) return spec;
    const auto colon = spec.find(':');
    GeneratorSpec parsed = parse_generator(spec);
    std::string shape;
    for (auto extent : parsed.shape) shape += (shape.empty() ? "" : "x") + std::to_string(std::max(1ll, static_cast<long long>(extent) / scale));
    return shape + spec.substr(colon);
}

double rel_error(double a, double b) { return a == b ? 0.0 : std::fabs(a - b) / std::fabs(b); }

// Reduction on the GPU vs the CPU reference on the same data.
void check_reduction(const std::string& program, const std::vector<std::string>& specs, double tolerance = 1e-5) {
    auto loss = compile(program);
    std::vector<DeviceTensor> inputs;
    for (std::size_t i = 0; i < specs.size(); ++i) inputs.push_back(make(specs[i], 100 + i));
    std::vector<TensorView> device, host;
    for (const auto& t : inputs) {
        device.push_back(t.device());
        host.push_back(t.host.view());
    }
    const double gpu = loss(device);
    const double reference = loss.reference(host);
    INFO(program << " gpu " << gpu << " reference " << reference);
    CHECK(rel_error(gpu, reference) <= tolerance);
}

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("device" * doctest::skip(!have_gpu())) {
    const auto info = device_info(0);
    MESSAGE("running on " << info.name << " (" << info.arch() << ", " << info.multiprocessors << " SMs)");
    CHECK(info.multiprocessors > 0);
}

TEST_CASE("the five reference problems at full size match the CPU reference" * doctest::skip(!have_gpu())) {
    SUBCASE("hinge 32768x32768, t broadcast over rows") {
        check_reduction(example_text("hinge.loss"), {full_size("32768x32768:uniform"), full_size("32768:sign")});
    }
    SUBCASE("mse 32768x32768") {
        check_reduction(example_text("mse.loss"), {full_size("32768x32768:uniform"), full_size("32768x32768:uniform")});
    }
    SUBCASE("kl batchmean 16384x16384 softmax rows") {
        check_reduction(example_text("kl.loss"), {full_size("16384x16384:softmax"), full_size("16384x16384:softmax")});
    }
    SUBCASE("smooth_l1 32768x32768") {
        check_reduction(example_text("smooth_l1.loss"), {full_size("32768x32768:normal"), full_size("32768x32768:normal")});
    }
    SUBCASE("hardsigmoid 4096x393216: every element written") {
        auto loss = compile(example_text("hardsigmoid.loss"));
        const DeviceTensor x = make(full_size("4096x393216:normal[0,3]"), 7);
        DeviceBuffer out(x.host.bytes.size());
        out.fill_bytes(0xFF);  // NaN: an element the kernel skips cannot match the reference
        const std::vector<TensorView> inputs{x.device()};
        loss.map(inputs, OutputView::contiguous(out.data(), x.host.shape));
        synchronize();
        std::vector<float> gpu(x.host.floats().size());
        out.download(gpu.data(), gpu.size() * sizeof(float));
        std::vector<float> reference(gpu.size());
        const std::vector<TensorView> host{x.host.view()};
        loss.reference_map(host, OutputView::contiguous(reference.data(), x.host.shape));
        std::size_t bad = 0;
        for (std::size_t i = 0; i < gpu.size(); ++i)
            if (!(std::fabs(gpu[i] - reference[i]) <= 1e-5f * std::max(1.0f, std::fabs(reference[i])))) ++bad;
        CHECK(bad == 0);
    }
}

TEST_CASE("sizes around block and grid boundaries" * doctest::skip(!have_gpu())) {
    for (const char* n : {"1", "31", "255", "256", "257", "65537", "1000003", "5000000"}) {
        CAPTURE(n);
        check_reduction("mean(sin(x) * y)", {std::string(n) + ":normal", std::string(n) + ":normal"}, 1e-5);
        check_reduction("sum(x)", {std::string(n) + ":uniform"}, 1e-6);
    }
}

TEST_CASE("layouts: broadcast rows and columns, scalars, transposed inputs" * doctest::skip(!have_gpu())) {
    check_reduction("mean(p * t)", {"3000x1000:normal", "3000x1:normal"});
    check_reduction("mean(p * t)", {"3000x1000:normal", "1000:normal"});
    check_reduction("mean(p + s)", {"20x30x40:normal", "scalar:normal"});
    check_reduction("mean(a * b * c)", {"7x1x5x1:normal", "1x3x1x11:normal", "11:normal"});
    // Inputs that repeat every row ([C] against [N, C]) are loaded once per block where the grid is a
    // whole multiple of the tiles per row (rows.cuh), else every tile: rows of 3 tiles (the grid
    // rounded), of more tiles than the grid has blocks, and of 16-bit elements.
    check_reduction("mean(max(0, 1 - p*t))", {"2000x20000:normal", "20000:sign"});
    check_reduction("mean(max(0, 1 - p*t))", {"8x3000000:normal", "3000000:sign"});
    check_reduction("mean(p * t + u)", {"500x7000:normal", "7000:normal", "500x7000:normal"});
    check_reduction("mean(max(0, 1 - p*t))", {"3000x20000:normal:bf16", "20000:sign:bf16"});

    // A transposed view: the same memory read with swapped strides.
    auto loss = compile("sum(x * w)");
    const DeviceTensor x = make("300x500:normal", 1);
    const DeviceTensor w = make("500x300:normal", 2);
    TensorView xt = x.device();
    xt.shape = {500, 300};
    xt.strides = {1, 500};
    const std::vector<TensorView> device{xt, w.device()};
    TensorView xt_host = x.host.view();
    xt_host.shape = {500, 300};
    xt_host.strides = {1, 500};
    const std::vector<TensorView> host{xt_host, w.host.view()};
    CHECK(rel_error(loss(device), loss.reference(host)) < 1e-5);
}

TEST_CASE("maps: strided output, broadcast inputs, every element written" * doctest::skip(!have_gpu())) {
    auto loss = compile("max(a, b) - relu(a) * 0.5");
    const DeviceTensor a = make("64x1:normal", 1);
    const DeviceTensor b = make("100:normal", 2);
    const std::vector<TensorView> device{a.device(), b.device()};
    const std::vector<TensorView> host{a.host.view(), b.host.view()};
    DeviceBuffer out(64 * 100 * sizeof(float));
    out.fill_bytes(0xFF);
    const OutputView transposed{out.data(), DType::float32, {64, 100}, {1, 64}};  // column-major output
    loss.map(device, transposed);
    synchronize();
    std::vector<float> gpu(64 * 100), reference(64 * 100);
    out.download(gpu.data(), gpu.size() * sizeof(float));
    loss.reference_map(host, OutputView{reference.data(), DType::float32, {64, 100}, {1, 64}});
    CHECK(gpu == reference);
}

TEST_CASE("parameters change per call without recompiling" * doctest::skip(!have_gpu())) {
    auto loss = compile(example_text("smooth_l1.loss"));
    const DeviceTensor p = make("100000:normal", 1), t = make("100000:normal", 2);
    const std::vector<TensorView> device{p.device(), t.device()};
    const std::vector<TensorView> host{p.host.view(), t.host.view()};
    // The kernel divides by beta through its reciprocal (templates/lj_div.cuh) where beta is in
    // [2^-40, 2^40], else divides: 1e-42 (subnormal) and 1e20 take the division.
    for (double beta : {1.0, 0.5, 2.0, 0.01, 1e-42, 1e20}) {
        CAPTURE(beta);
        loss.set_param("beta", beta);
        CHECK(rel_error(loss(device), loss.reference(host)) < 1e-5);
    }
    CHECK(loss.timings().cache.has_value());  // compiled (or found) once, for the first beta
}

TEST_CASE("the same bits every run; evaluate() leaves the result on the device" * doctest::skip(!have_gpu())) {
    auto loss = compile(example_text("mse.loss"));
    const DeviceTensor p = make("4096x4096:uniform", 1), t = make("4096x4096:uniform", 2);
    const std::vector<TensorView> device{p.device(), t.device()};
    const float first = loss(device);
    for (int i = 0; i < 10; ++i) {
        const float again = loss(device);
        CHECK(std::memcmp(&again, &first, sizeof first) == 0);
    }
    DeviceBuffer result(sizeof(float));
    loss.evaluate(device, static_cast<float*>(result.data()));
    synchronize();
    float on_device = 0;
    result.download(&on_device, sizeof on_device);
    CHECK(std::memcmp(&on_device, &first, sizeof first) == 0);
}

TEST_CASE("edge cases: empty tensors, nan, misuse" * doctest::skip(!have_gpu())) {
    auto mean = compile("mean(x)");
    DeviceBuffer dummy(16);
    const std::vector<TensorView> empty{TensorView::contiguous(dummy.data(), {0, 5})};
    CHECK(std::isnan(mean(empty)));
    CHECK(compile("sum(x)")(empty) == 0.0f);

    const DeviceTensor with_nan(HostTensor::from_floats({3}, {1.0f, NAN, 2.0f}));
    const std::vector<TensorView> nan_input{with_nan.device()};
    CHECK(std::isnan(compile("mean(max(x, 0))")(nan_input)));
    CHECK(compile("mean(where(isnan(x), 0, x))")(nan_input) == doctest::Approx(1.0));

    CHECK_THROWS_AS(mean(std::vector<TensorView>{}), UsageError);
    auto map = compile("x + 1");
    CHECK_THROWS_AS(map(nan_input), UsageError);  // a map has no scalar value
    CHECK_THROWS_AS(map.map(nan_input, OutputView::contiguous(dummy.data(), {4})), UsageError);  // wrong shape
    CHECK(mean(nan_input) != 0.0f);  // still usable after errors
}

// The rows loop evaluates log and xlogy on their common path (positive normal inputs) and computes a
// vector again in full when one of its inputs was rare: whatever the rare value and wherever it sits
// in its vector, reductions and maps give the reference's values, and so do its vector's neighbours.
TEST_CASE("log and xlogy: a rare input anywhere in a vector gives the reference's value" * doctest::skip(!have_gpu())) {
    const std::vector<float> rare{0.0f, -0.0f, -1.0f, 1e-40f, 0x1p-149f, INFINITY, -INFINITY, NAN};
    constexpr std::size_t n = 4104;  // a multiple of every vector width, more than one tile
    const std::vector<std::size_t> places{0, 3, 6, 2049, n - 1};
    struct Case {
        const char* program;
        std::vector<std::string> inputs;
    };
    const std::vector<Case> cases{{"sum(log(x))", {"x"}}, {"sum(xlogy(t, x))", {"t", "x"}},
                                  {"sum(xlogy(x, x))", {"x"}}, {"sum(t * log(x) - xlogy(t, t))", {"t", "x"}},
                                  {"sum(xlogy(t, t) - t * log(x))", {"t", "x"}}};  // one log (lj_kl_term)
    auto same = [](double gpu, double reference) {
        if (std::isnan(reference)) return std::isnan(gpu);
        if (std::isinf(reference)) return gpu == reference;
        return rel_error(gpu, reference) <= 1e-6;
    };
    for (const Case& c : cases) {
        Options options;
        options.inputs = c.inputs;
        auto loss = compile(c.program, options);
        for (const float v : rare) {
            for (const std::size_t at : places) {
                std::vector<float> x(n), t(n);
                for (std::size_t i = 0; i < n; ++i) {
                    x[i] = 0.5f + static_cast<float>(i % 97) / 64.0f;
                    t[i] = static_cast<float>(i % 5) * 0.25f;  // 0 every fifth
                }
                x[at] = v;
                t[at] = at % 2 == 0 ? 0.0f : 0.75f;  // xlogy's x == 0 beside a rare y, and not
                const DeviceTensor dx(HostTensor::from_floats({n}, x)), dt(HostTensor::from_floats({n}, t));
                std::vector<TensorView> device, host;
                for (const auto& name : c.inputs) {
                    const DeviceTensor& d = name == "x" ? dx : dt;
                    device.push_back(d.device());
                    host.push_back(d.host.view());
                }
                const double gpu = loss(device), reference = loss.reference(host);
                INFO(c.program << " x[" << at << "] = " << v << ": gpu " << gpu << " reference " << reference);
                CHECK(same(gpu, reference));
            }
        }
    }
    // A map over the rows loop: the rare elements exactly, every element within one float ulp.
    auto map = compile("log(x) + xlogy(x, x)");
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = i % 11 == 0 ? rare[i / 11 % rare.size()] : 0.25f + static_cast<float>(i % 89) / 16.0f;
    const DeviceTensor dx(HostTensor::from_floats({n}, x));
    DeviceBuffer out(n * sizeof(float));
    map.map(std::vector<TensorView>{dx.device()}, OutputView::contiguous(out.data(), {n}));
    synchronize();
    std::vector<float> gpu(n), reference(n);
    out.download(gpu.data(), n * sizeof(float));
    map.reference_map(std::vector<TensorView>{dx.host.view()}, OutputView::contiguous(reference.data(), {n}));
    for (std::size_t i = 0; i < n; ++i) {
        INFO("x[" << i << "] = " << x[i] << ": gpu " << gpu[i] << " reference " << reference[i]);
        if (std::isnan(reference[i]) || std::isinf(reference[i])) CHECK(same(gpu[i], reference[i]));
        else CHECK(std::fabs(gpu[i] - reference[i]) <= std::fabs(reference[i]) * 0x1p-23f);
    }
}

// KL's term prints as one log of the ratio (templates/lj_log.cuh: lj_kl_term, with the GPU's own
// rcp.approx): every element within the bound there of a log(a / b) in float64, 0 where a == b, and
// the special values (zeros, subnormals, inf, nan, negatives on either side) as the reference's two-log
// form gives them.
TEST_CASE("KL's term with one log: each element within 3.5 ulp and 2^-43 a, special values as the reference" * doctest::skip(!have_gpu())) {
    const std::vector<float> special{0.0f, -0.0f, 0x1p-149f, 0x1p-127f, 0x1p-126f, 0.25f, 1.0f, 0x1p126f,
                                     FLT_MAX, INFINITY, -1.0f, -INFINITY, NAN};
    std::vector<float> t, p;
    for (float a : special)
        for (float b : special) {
            t.push_back(a);
            p.push_back(b);
        }
    std::mt19937 rng(98);
    std::uniform_real_distribution<double> exponent(-28.0, 0.0);
    std::uniform_int_distribution<int> ulps(-40, 40);
    while (t.size() < (1u << 20)) {
        const float a = static_cast<float>(std::exp(exponent(rng))), b = static_cast<float>(std::exp(exponent(rng)));
        t.push_back(a);
        p.push_back(b);
        float near = a;
        for (int k = ulps(rng); k != 0; k += k < 0 ? 1 : -1) near = std::nextafter(near, k < 0 ? 0.0f : 2.0f);
        t.push_back(a);
        p.push_back(near);
    }
    const std::size_t n = t.size();
    Options options;
    options.inputs = {"p", "t"};
    auto map = compile("xlogy(t, t) - t * log(p)", options);
    const DeviceTensor dp(HostTensor::from_floats({n}, p)), dt(HostTensor::from_floats({n}, t));
    DeviceBuffer out(n * sizeof(float));
    map.map(std::vector<TensorView>{dp.device(), dt.device()}, OutputView::contiguous(out.data(), {n}));
    synchronize();
    std::vector<float> gpu(n), reference(n);
    out.download(gpu.data(), n * sizeof(float));
    map.reference_map(std::vector<TensorView>{dp.host.view(), dt.host.view()}, OutputView::contiguous(reference.data(), {n}));
    int checked = 0;
    for (std::size_t i = 0; i < n; ++i) {
        INFO("t " << t[i] << " p " << p[i] << ": gpu " << gpu[i] << " reference " << reference[i]);
        // a >= 2^126 takes the two-log form, whose products overflow float where a log(a / b) need not
        const double a_log_a = t[i] * std::log(static_cast<double>(t[i])), a_log_b = t[i] * std::log(static_cast<double>(p[i]));
        if (std::fabs(a_log_a) > FLT_MAX || std::fabs(a_log_b) > FLT_MAX) continue;
        if (std::isnan(reference[i]) || std::isinf(reference[i]) || t[i] == 0.0f || t[i] == p[i]) {
            CHECK((std::isnan(reference[i]) ? std::isnan(gpu[i]) : gpu[i] == reference[i]));
            continue;
        }
        const double a = t[i], b = p[i];
        const double exact = std::fabs(a - b) < 0.5 * b ? a * std::log1p((a - b) / b) : a * std::log(a / b);
        const double ulp = std::ldexp(1.0, std::max(std::ilogb(exact), -126) - 23);
        // The one-log path's bound where its inputs lie well inside its ranges; elsewhere the two-log
        // form's: each product's rounding and log's ulp (a subnormal a: its products are normal).
        const bool one_log = a >= 0x1p-126 && a < 0x1p126 && b >= 0x1p-126 && b <= FLT_MAX && a / b >= 0x1p-125 && a / b <= 0x1p127;
        const double bound = one_log ? 3.5 * ulp + std::ldexp(a, -43) : 0x1p-22 * (std::fabs(a_log_a) + std::fabs(a_log_b)) + ulp;
        CHECK(std::fabs(gpu[i] - exact) <= bound);
        ++checked;
    }
    CHECK(checked > static_cast<int>(n / 2));
}

// KL between close distributions (distillation near convergence): two logs a term, rounded apart,
// cancel to thousands of ulp of the term, which the sum of small terms does not hide (2.8e-3 of this
// KL of 5e-7 on an H100 and an H200); one log of the ratio keeps each term to a few ulp (6e-7).
TEST_CASE("KL of nearly equal distributions: one log keeps the relative error small" * doctest::skip(!have_gpu())) {
    constexpr std::size_t rows = 64, classes = 16384;
    std::mt19937 rng(7);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<float> t(rows * classes), p(rows * classes);
    for (std::size_t r = 0; r < rows; ++r) {
        std::vector<double> x(classes), y(classes);
        double sx = 0, sy = 0;
        for (std::size_t i = 0; i < classes; ++i) {
            x[i] = std::exp(2.0 * normal(rng));
            y[i] = x[i] * std::exp(1e-3 * normal(rng));  // logits 1e-3 apart
            sx += x[i];
            sy += y[i];
        }
        for (std::size_t i = 0; i < classes; ++i) {
            t[r * classes + i] = static_cast<float>(x[i] / sx);
            p[r * classes + i] = static_cast<float>(y[i] / sy);
        }
    }
    Options options;
    options.inputs = {"p", "t"};
    auto loss = compile(example_text("kl.loss"), options);
    const DeviceTensor dp(HostTensor::from_floats({rows, classes}, p)), dt(HostTensor::from_floats({rows, classes}, t));
    const double gpu = loss(std::vector<TensorView>{dp.device(), dt.device()});
    const double reference = loss.reference(std::vector<TensorView>{dp.host.view(), dt.host.view()});
    // The same program with log(p) bound to a name, which the printer leaves as two logs: for the record
    auto two_logs = compile("l = log(p); batchmean(xlogy(t, t) - t * l)", options);
    const double gpu_two_logs = two_logs(std::vector<TensorView>{dp.device(), dt.device()});
    MESSAGE("KL " << reference << ": one log " << rel_error(gpu, reference) << " off, two logs "
                  << rel_error(gpu_two_logs, reference));
    INFO("gpu " << gpu << " reference " << reference);
    CHECK(reference > 1e-7);
    CHECK(rel_error(gpu, reference) < 1e-5);
}

}  // TEST_SUITE

TEST_SUITE("gpu") {

namespace {

// How a gradient test calls the GPU.
enum class GradCall { ValueAndGrad, Grad, DeviceUpstream };

// Gradients on the GPU against the CPU reference: the value (reductions) and every gradient element,
// each gradient in its input's own shape (broadcast inputs summed). A map is differentiated against
// an upstream tensor of normal values; a reduction against `upstream` (a number, or a device scalar).
void check_gradients(const std::string& program, const std::vector<std::pair<std::string, std::string>>& inputs,
                     const std::vector<std::string>& wrt, float upstream = 1.0f,
                     GradCall call = GradCall::ValueAndGrad, const Knobs& knobs = {}) {
    Options options;
    options.knobs = knobs;
    for (const auto& [name, spec] : inputs) options.inputs.push_back(name);
    auto loss = compile(program, options);
    std::vector<DeviceTensor> tensors;
    for (std::size_t i = 0; i < inputs.size(); ++i) tensors.push_back(make(inputs[i].second, 300 + i));
    std::vector<TensorView> device, host;
    for (const auto& t : tensors) {
        device.push_back(t.device());
        host.push_back(t.host.view());
    }
    std::vector<DeviceBuffer> buffers;
    std::vector<OutputView> grads;
    std::vector<Shape> shapes;
    for (const auto& name : wrt) {
        std::size_t slot = 0;
        while (slot < inputs.size() && inputs[slot].first != name) ++slot;
        REQUIRE(slot < inputs.size());
        shapes.push_back(tensors[slot].host.shape);
        buffers.emplace_back(static_cast<std::size_t>(element_count(shapes.back())) * sizeof(float) + 4);
        buffers.back().fill_bytes(0xFF);  // nan: an unwritten element cannot match the reference
        grads.push_back(OutputView::contiguous(buffers.back().data(), shapes.back()));
    }

    std::vector<ReferenceGradient> reference;
    if (loss.kind() == Kind::Map) {
        const DeviceTensor up = make(format_shape(loss.output_shape(host)) + ":normal", 77);
        loss.grad(device, wrt, grads, up.device());
        synchronize();
        reference = loss.reference_grad(host, wrt, up.host.view());
    } else {
        DeviceBuffer value(sizeof(float)), scalar(sizeof(float));
        value.fill_bytes(0xFF);
        if (call == GradCall::ValueAndGrad) {
            loss.value_and_grad(device, wrt, grads, static_cast<float*>(value.data()), nullptr, upstream);
        } else if (call == GradCall::Grad) {
            loss.grad(device, wrt, grads, nullptr, upstream);
        } else {  // upstream = 0.5 * a device scalar holding 2 * upstream
            const float on_device = 2.0f * upstream;
            scalar.upload(&on_device, sizeof on_device);
            loss.value_and_grad(device, wrt, grads, static_cast<float*>(value.data()), nullptr,
                                Upstream::on_device(static_cast<const float*>(scalar.data()), 0.5f));
        }
        synchronize();
        if (call != GradCall::Grad) {
            float v = 0;
            value.download(&v, sizeof v);
            CHECK(rel_error(v, loss.reference(host)) < 1e-5);
        }
        reference = loss.reference_grad(host, wrt, upstream);
    }
    for (std::size_t k = 0; k < wrt.size(); ++k) {
        CAPTURE(wrt[k]);
        const auto count = static_cast<std::size_t>(element_count(shapes[k]));
        REQUIRE(reference[k].values.size() == count);
        std::vector<float> gpu(count);
        buffers[k].download(gpu.data(), count * sizeof(float));
        double scale = 0;  // gradients are tiny (1/N): compare against the largest magnitude
        for (double r : reference[k].values) scale = std::max(scale, std::fabs(r));
        std::size_t bad = 0;
        for (std::size_t i = 0; i < count; ++i)
            if (!(std::fabs(gpu[i] - reference[k].values[i]) <= 1e-5 * scale)) ++bad;
        CHECK(bad == 0);
    }
}

}  // namespace

TEST_CASE("value_and_grad: one kernel, the value and every gradient element match the reference" *
          doctest::skip(!have_gpu())) {
    check_gradients(example_text("smooth_l1.loss"), {{"p", full_size("32768x32768:normal")}, {"t", full_size("32768x32768:normal")}}, {"p"});
    check_gradients(example_text("mse.loss"), {{"p", "1000x333:normal"}, {"t", "1000x333:normal"}}, {"p", "t"}, 2.5f);
    check_gradients(example_text("kl.loss"), {{"p", "512x512:softmax"}, {"t", "512x512:softmax"}}, {"p"});
    check_gradients(example_text("hinge.loss"), {{"p", "300x200:uniform"}, {"t", "200:sign"}}, {"p"});
    check_gradients("sum(where(x > 0, sigmoid(x) * y, -y) + x * y)", {{"x", "100003:normal"}, {"y", "100003:normal"}}, {"y", "x"});
}

TEST_CASE("every row of the language table: the GPU's value and derivatives match the CPU reference" *
          doctest::skip(!have_gpu())) {
    for (const auto& row : builtin_table()) {
        const auto d = builtin_domain(row);
        const std::string x = fmt::format("4099:uniform[{},{}]", d.lo, d.hi);
        const std::string y = fmt::format("4099:uniform[{},{}]", d.ylo, d.yhi);
        const std::vector<std::pair<std::string, std::string>> all{{"x", x}, {"y", y}, {"z", y}};
        const std::vector<std::pair<std::string, std::string>> inputs(all.begin(), all.begin() + row.arity);
        const std::string program = "sum(" + builtin_call(row, {"x", "y", "z"}) + ")";
        CAPTURE(program);
        if (row.gradient == Gradient::Refused) {
            std::vector<std::string> specs;
            for (const auto& [name, spec] : inputs) specs.push_back(spec);
            check_reduction(program, specs);
            continue;
        }
        std::vector<std::string> wrt;
        for (int i = 0; i < row.arity; ++i)
            if (row.arg_types[static_cast<std::size_t>(i)] == 'f') wrt.push_back(inputs[static_cast<std::size_t>(i)].first);
        if (wrt.empty()) wrt.push_back("x");  // !x, x && y: the derivative is zero, on the GPU too
        check_gradients(program, inputs, wrt);
    }
}

TEST_CASE("gradients of broadcast inputs are summed over the rows, deterministically" * doctest::skip(!have_gpu())) {
    // hinge's t at full size: 32768 columns, each a sum over 32768 rows.
    check_gradients(example_text("hinge.loss"), {{"p", full_size("32768x32768:uniform")}, {"t", full_size("32768:sign")}}, {"p", "t"});
    // Odd widths (no 16-byte accesses), rank 3, more strips than one resident grid, a row [1, C].
    check_gradients(example_text("hinge.loss"), {{"p", "333x201:uniform"}, {"t", "201:sign"}}, {"t"}, 3.0f);
    check_gradients("mean(w * (p - t)^2)", {{"w", "1x64:uniform"}, {"p", "7x9x64:normal"}, {"t", "7x9x64:normal"}}, {"w", "p"});
    check_gradients("sum(softplus(x * b) - y * b)", {{"x", "3x2000000:normal"}, {"b", "2000000:normal"}, {"y", "3x2000000:normal"}}, {"b"});
    check_gradients("mean(b)", {{"b", "64:normal"}, {"x", "5x64:normal"}}, {"b"});  // b broadcast, x unread

    // The same bits on every run.
    auto loss = compile(example_text("hinge.loss"));
    const DeviceTensor p = make("4099x520:normal", 5), t = make("520:sign", 6);
    const std::vector<TensorView> device{p.device(), t.device()};
    DeviceBuffer g(520 * sizeof(float));
    const std::vector<OutputView> grads{OutputView::contiguous(g.data(), {520})};
    const std::vector<std::string> wrt{"t"};
    std::vector<float> first(520), again(520);
    for (int run = 0; run < 5; ++run) {
        loss.grad(device, wrt, grads);
        synchronize();
        g.download(run == 0 ? first.data() : again.data(), 520 * sizeof(float));
        if (run > 0) CHECK(std::memcmp(first.data(), again.data(), 520 * sizeof(float)) == 0);
    }
}

TEST_CASE("gradients of one value per row and of scalars are summed on the GPU, deterministically" *
          doctest::skip(!have_gpu())) {
    const std::string squared_hinge = "mean(max(0, 1 - p*t)^2)";
    // One value per row: rows of one tile, and rows of many tiles (partials per tile, per-row arrivals).
    check_gradients(squared_hinge, {{"p", "300x200:uniform"}, {"t", "300x1:sign"}}, {"p", "t"});
    // No rows: the gradient is empty (the value, a mean of nothing, is nan).
    check_gradients(squared_hinge, {{"p", "0x200:uniform"}, {"t", "0x1:sign"}}, {"t"}, 1.0f, GradCall::Grad);
    check_gradients(squared_hinge, {{"p", "5x300001:uniform"}, {"t", "5x1:sign"}}, {"t", "p"}, 2.0f);
    check_gradients(squared_hinge, {{"p", "3x100003:uniform"}, {"t", "3x1:sign"}}, {"t"}, 1.0f, GradCall::DeviceUpstream);
    check_gradients(squared_hinge, {{"p", full_size("8192x8192:uniform")}, {"t", full_size("8192x1:sign")}}, {"p", "t"});
    // Blocks taking whole rows (rows of 4 tiles, 32 rows and more per block: a block per SM): each
    // row added once; and an element of many rows ([1, 8, 1] against [1024, 8, 1000], walked
    // [8, 1024, 1000]), whose rows leave partials that the last to arrive adds.
    const Knobs small_tiles{.block_threads = 64, .unroll = 1, .max_blocks_per_sm = 1};
    check_gradients(squared_hinge, {{"p", "8192x1000:uniform"}, {"t", "8192x1:sign"}}, {"p", "t"}, 1.0f,
                    GradCall::ValueAndGrad, small_tiles);
    check_gradients("mean(w * (p - t)^2)", {{"w", "1x8x1:uniform"}, {"p", "1024x8x1000:normal"}, {"t", "1024x8x1000:normal"}},
                    {"w", "p"}, 2.0f, GradCall::ValueAndGrad, small_tiles);
    // Rank 3: [N, M, 1] and [N, 1, 1] against [N, M, C] (the outer dimensions merge into rows).
    check_gradients("mean(w * (p - t)^2)", {{"w", "7x9x1:uniform"}, {"p", "7x9x64:normal"}, {"t", "7x9x64:normal"}}, {"w", "p"});
    check_gradients("mean(w * (p - t)^2)", {{"w", "7x1x1:uniform"}, {"p", "7x9x64:normal"}, {"t", "7x9x64:normal"}}, {"w"});
    // One row per batch of rows: [N, 1, C] against [N, M, C], odd widths, several chunks per batch.
    check_gradients("mean(w * (p - t)^2)", {{"w", "7x1x64:uniform"}, {"p", "7x9x64:normal"}, {"t", "7x9x64:normal"}}, {"w", "p"});
    check_gradients("mean(w * (p - t)^2)", {{"w", "5x1x333:uniform"}, {"p", "5x1000x333:normal"}, {"t", "5x1000x333:normal"}}, {"w"}, 3.0f);
    check_gradients("mean(w * (p - t)^2)", {{"w", "4x1x1x32:uniform"}, {"p", "4x3x5x32:normal"}, {"t", "32:normal"}}, {"w", "p"});
    check_gradients("mean(max(0, 1 - p*t))", {{"p", full_size("16x512x8192:uniform")}, {"t", full_size("16x1x8192:sign")}}, {"t"});
    // More batches than one resident grid has blocks: the blocks take (chunk, strip) items in turn.
    check_gradients("mean(w * (p - t)^2)", {{"w", "5000x1x64:uniform"}, {"p", "5000x9x64:normal"}, {"t", "5000x9x64:normal"}}, {"w", "p"});
    // Broadcasts whose walked dimensions are not outermost (reordered to be): one weight per channel of
    // an NCHW tensor, one per middle index, one row per middle index.
    check_gradients("mean(w * (p - t)^2)", {{"w", "1x6x1x1:uniform"}, {"p", "4x6x5x32:normal"}, {"t", "4x6x5x32:normal"}}, {"w", "p"});
    check_gradients("mean(w * (p - t)^2)", {{"w", "1x16x1x1:uniform"}, {"p", "8x16x64x257:normal"}, {"t", "8x16x64x257:normal"}}, {"w"});
    check_gradients("mean(w * (p - t)^2)", {{"w", "6x1:uniform"}, {"p", "4x6x32:normal"}, {"t", "4x6x32:normal"}}, {"w"}, 2.0f);
    check_gradients("mean(w * (p - t)^2)", {{"w", "6x1x32:uniform"}, {"p", "4x6x5x32:normal"}, {"t", "4x6x5x32:normal"}}, {"w", "t"});
    // One value for everything: a scalar, a [1, 1], beside full-shape gradients, with grad() alone.
    check_gradients("mean(w * (p - t)^2)", {{"w", "1:uniform"}, {"p", "1000x333:normal"}, {"t", "1000x333:normal"}}, {"w", "p", "t"});
    check_gradients("sum(w * (p - t)^2)", {{"w", "1x1:uniform"}, {"p", "100003:normal"}, {"t", "100003:normal"}}, {"w"}, 0.5f,
                    GradCall::Grad);
    check_gradients("mean(w * (p - t)^2)", {{"w", "1:uniform"}, {"p", full_size("8192x8192:normal")}, {"t", full_size("8192x8192:normal")}},
                    {"w", "p"});
    // Both in one kernel, and the backward of a map.
    check_gradients("mean(s * max(0, 1 - p*t)^2)", {{"s", "1:uniform"}, {"p", "77x3001:uniform"}, {"t", "77x1:sign"}}, {"s", "t", "p"});
    check_gradients("x * s + y", {{"x", "300x257:normal"}, {"s", "1:normal"}, {"y", "300x1:normal"}}, {"s", "y", "x"});

    // The same bits on every run, for both sums.
    auto loss = compile("mean(s * max(0, 1 - p*t)^2)");
    const DeviceTensor s = make("1:uniform", 7), p = make("33x70001:uniform", 8), t = make("33x1:sign", 9);
    const std::vector<TensorView> device{s.device(), p.device(), t.device()};
    DeviceBuffer gs(sizeof(float)), gt(33 * sizeof(float));
    const std::vector<OutputView> grads{OutputView::contiguous(gs.data(), {1}), OutputView::contiguous(gt.data(), {33, 1})};
    const std::vector<std::string> wrt{"s", "t"};
    std::vector<float> first(34), again(34);
    for (int run = 0; run < 5; ++run) {
        loss.grad(device, wrt, grads);
        synchronize();
        auto& into = run == 0 ? first : again;
        gs.download(into.data(), sizeof(float));
        gt.download(into.data() + 1, 33 * sizeof(float));
        if (run > 0) CHECK(std::memcmp(first.data(), again.data(), 34 * sizeof(float)) == 0);
    }
}

TEST_CASE("grad() without the value, and an upstream gradient on the device" * doctest::skip(!have_gpu())) {
    check_gradients(example_text("mse.loss"), {{"p", "1000x333:normal"}, {"t", "1000x333:normal"}}, {"p"}, 1.5f, GradCall::Grad);
    check_gradients(example_text("hinge.loss"), {{"p", "300x200:uniform"}, {"t", "200:sign"}}, {"p", "t"}, 4.0f,
                    GradCall::DeviceUpstream);
}

TEST_CASE("gradients: one Loss across layouts, expanded views, empty batches, narrow rows" * doctest::skip(!have_gpu())) {
    auto loss = compile(example_text("hinge.loss"));
    const std::vector<std::string> wrt{"p", "t"};
    auto check = [&](const std::vector<TensorView>& device, const std::vector<TensorView>& host) {
        const auto grads = loss.grad(device, wrt);
        synchronize();
        const auto reference = loss.reference_grad(host, wrt);
        for (std::size_t k = 0; k < wrt.size(); ++k) {
            CAPTURE(wrt[k]);
            std::vector<float> gpu(reference[k].values.size());
            if (!gpu.empty()) grads[k].buffer.download(gpu.data(), gpu.size() * sizeof(float));
            double scale = 0;
            for (double r : reference[k].values) scale = std::max(scale, std::fabs(r));
            std::size_t bad = 0;
            for (std::size_t i = 0; i < gpu.size(); ++i)
                if (!(std::fabs(gpu[i] - reference[k].values[i]) <= 1e-5 * scale)) ++bad;
            CHECK(bad == 0);
        }
    };
    // Larger, smaller, larger again: the per-column counters must not meet the earlier sums.
    for (const char* rows : {"1000", "100", "3000", "7"}) {
        CAPTURE(rows);
        const DeviceTensor p = make(std::string(rows) + "x512:uniform", 21), t = make("512:sign", 22);
        check({p.device(), t.device()}, {p.host.view(), t.host.view()});
    }
    // Narrow rows: the block shrinks to the columns there are.
    const DeviceTensor p10 = make("3001x10:uniform", 23), t10 = make("10:sign", 24);
    check({p10.device(), t10.device()}, {p10.host.view(), t10.host.view()});
    // An expanded view (torch's t.expand(N, C): shape [N, C], strides [0, 1]) is a full-shape input.
    const DeviceTensor p2 = make("64x32:uniform", 25), t2 = make("32:sign", 26);
    const TensorView expanded_device{t2.device().data, DType::float32, {64, 32}, {0, 1}};
    const TensorView expanded_host{t2.host.bytes.data(), t2.host.dtype, {64, 32}, {0, 1}};
    check({p2.device(), expanded_device}, {p2.host.view(), expanded_host});
    // An empty batch: the broadcast input still has elements, and its gradient is zeros.
    DeviceBuffer none(16);
    const DeviceTensor t3 = make("32:sign", 27);
    std::vector<float> empty;
    check({TensorView::contiguous(none.data(), {0, 32}), t3.device()},
          {TensorView::contiguous(empty.data(), {0, 32}), t3.host.view()});
}

TEST_CASE("grad() can allocate the gradients itself" * doctest::skip(!have_gpu())) {
    auto loss = compile(example_text("hinge.loss"));
    const DeviceTensor p = make("300x200:uniform", 11), t = make("200:sign", 12);
    const std::vector<std::string> wrt{"t", "p"};
    const auto grads = loss.grad(std::vector<TensorView>{p.device(), t.device()}, wrt);
    synchronize();
    const auto reference = loss.reference_grad(std::vector<TensorView>{p.host.view(), t.host.view()}, wrt);
    REQUIRE(grads.size() == 2);
    for (std::size_t k = 0; k < 2; ++k) {
        CAPTURE(wrt[k]);
        CHECK(grads[k].input == wrt[k]);
        CHECK(grads[k].shape == reference[k].shape);
        std::vector<float> gpu(reference[k].values.size());
        grads[k].buffer.download(gpu.data(), gpu.size() * sizeof(float));
        double scale = 0, worst = 0;
        for (double r : reference[k].values) scale = std::max(scale, std::fabs(r));
        for (std::size_t i = 0; i < gpu.size(); ++i) worst = std::max(worst, std::fabs(gpu[i] - reference[k].values[i]));
        CHECK(worst <= 1e-5 * scale);
    }
    const std::vector<std::string> unknown{"q"};
    CHECK_THROWS_AS(loss.grad(std::vector<TensorView>{p.device(), t.device()}, unknown), UsageError);
}

TEST_CASE("the backward of a map: upstream tensor times the derivatives" * doctest::skip(!have_gpu())) {
    check_gradients(example_text("hardsigmoid.loss"), {{"x", "1000x1000:normal"}}, {"x"});
    check_gradients("x * sigmoid(y) + exp(-x)", {{"x", "300x257:normal"}, {"y", "300x257:normal"}}, {"y", "x"});
    check_gradients("x * y", {{"x", "300x256:normal"}, {"y", "256:normal"}}, {"x", "y"});  // y summed over rows
}

TEST_CASE("gradients refuse what they cannot do, clearly" * doctest::skip(!have_gpu())) {
    auto loss = compile(example_text("hinge.loss"));
    const DeviceTensor p = make("30x20:uniform", 1), t = make("20:sign", 2);
    const std::vector<TensorView> device{p.device(), t.device()};
    DeviceBuffer g(30 * 20 * sizeof(float));
    const std::vector<OutputView> grads{OutputView::contiguous(g.data(), {30, 20})};
    const std::vector<std::string> wrt_t{"t"};
    CHECK_THROWS_WITH_AS(loss.value_and_grad(device, wrt_t, grads, nullptr),
                         doctest::Contains("the gradient of 't' must be a contiguous tensor of its shape [20]"), UsageError);
    const std::vector<std::string> wrt_q{"q"};
    CHECK_THROWS_AS(loss.value_and_grad(device, wrt_q, grads, nullptr), UsageError);
    const std::vector<OutputView> wrong{OutputView::contiguous(g.data(), {20, 30})};
    const std::vector<std::string> wrt_p{"p"};
    CHECK_THROWS_WITH_AS(loss.value_and_grad(device, wrt_p, wrong, nullptr), doctest::Contains("contiguous tensor of its shape [30, 20]"), UsageError);
    CHECK_THROWS_AS(compile("x * 2").value_and_grad(std::vector<TensorView>{p.device()}, wrt_p, grads, nullptr), UsageError);
    // Two inputs broadcast along different dimensions ([M, 1] and [N, 1, 1] against [N, M, C]) in one
    // call: the message names the second.
    const DeviceTensor w = make("6x1:uniform", 3), v = make("5x1x1:uniform", 5), q = make("5x6x20:uniform", 4);
    DeviceBuffer gw(6 * sizeof(float)), gv(5 * sizeof(float));
    const std::vector<OutputView> grad_wv{OutputView::contiguous(gw.data(), {6, 1}), OutputView::contiguous(gv.data(), {5, 1, 1})};
    const std::vector<std::string> wrt_wv{"w", "v"};
    CHECK_THROWS_WITH_AS(compile("mean(w * v * p)").grad(std::vector<TensorView>{w.device(), v.device(), q.device()}, wrt_wv, grad_wv),
                         doctest::Contains("the gradient of 'v'"), UnsupportedError);
    // A map's upstream must have the output's shape.
    const std::vector<std::string> wrt_x{"x"};
    CHECK_THROWS_WITH_AS(compile("x * 2").grad(std::vector<TensorView>{p.device()}, wrt_x, grads, t.device()),
                         doctest::Contains("the upstream gradient has shape [20]"), UsageError);
    loss.value_and_grad(device, wrt_p, grads, nullptr);  // still works after the errors
    synchronize();
}

}  // TEST_SUITE

TEST_SUITE("gpu") {

TEST_CASE("misuse on the GPU: host pointers, failed allocations; the loss still works after" * doctest::skip(!have_gpu())) {
    auto loss = compile("mean((p - t)^2)");
    const DeviceTensor p = make("1000:normal", 1), t = make("1000:normal", 2);
    const std::vector<TensorView> good{p.device(), t.device()};
    const float expected = loss(good);

    const std::vector<TensorView> host_p{p.host.view(), t.device()};
    CHECK_THROWS_WITH_AS(loss(host_p), doctest::Contains("'p' is not CUDA device memory"), UsageError);
    DeviceBuffer result(sizeof(float));
    CHECK_THROWS_WITH_AS(loss.evaluate(good, const_cast<float*>(p.host.floats().data())),
                         doctest::Contains("the result pointer is not CUDA device memory"), UsageError);
    CHECK_THROWS_WITH_AS(DeviceBuffer(std::size_t{1} << 50), doctest::Contains("out of GPU memory"), CudaError);
    auto map = compile("x * 2");
    const std::vector<TensorView> x{p.device()};
    CHECK_THROWS_WITH_AS(map.map(x, OutputView::contiguous(const_cast<float*>(p.host.floats().data()), {1000})),
                         doctest::Contains("the output is not CUDA device memory"), UsageError);
    CHECK(loss(good) == expected);  // nothing was launched with a bad pointer; the context is fine
}

TEST_CASE("more than 2^31 elements: 64-bit indices in maps and reductions" * doctest::skip(!have_gpu())) {
    const auto info = device_info(0);
    const long long n = (1ll << 31) + 12;
    if (info.memory_bytes < 24ull << 30) {
        MESSAGE("skipped: needs 24 GiB of GPU memory");
        return;
    }
    const DeviceTensor x = make(std::to_string(n) + ":range", 0);
    DeviceBuffer out(static_cast<std::size_t>(n) * sizeof(float));
    out.fill_bytes(0xFF);
    const std::vector<TensorView> inputs{x.device()};
    compile("x * 2").map(inputs, OutputView::contiguous(out.data(), {n}));
    synchronize();
    for (long long i : {0ll, (1ll << 31) - 1, 1ll << 31, n - 1}) {
        float v = 0;
        out.download(&v, sizeof v, static_cast<std::size_t>(i) * sizeof(float));
        CHECK(v == 2.0f * x.host.floats()[static_cast<std::size_t>(i)]);
    }
    auto sum = compile("sum(x)");
    const std::vector<TensorView> host{x.host.view()};
    CHECK(rel_error(sum(inputs), sum.reference(host)) < 1e-6);
}

// A stream of its own, not synchronising with the legacy default stream: launches on it overlap
// with other streams' unless lossjit serialises them.
struct OwnStream {
    std::shared_ptr<cuda::Context> context = cuda::Context::for_device(0);
    CUstream stream = nullptr;
    OwnStream() {
        cuda::ScopedContext scope(*context);
        LOSSJIT_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    }
    ~OwnStream() {
        cuda::ScopedContext scope(*context);
        cuda::api().cuStreamDestroy(stream);
    }
    OwnStream(const OwnStream&) = delete;
    OwnStream& operator=(const OwnStream&) = delete;
    void synchronize() const {
        cuda::ScopedContext scope(*context);
        LOSSJIT_CU(cuStreamSynchronize(stream));
    }
};

std::vector<float> download(const DeviceBuffer& buffer, std::size_t count) {
    std::vector<float> values(count);
    buffer.download(values.data(), count * sizeof(float));
    return values;
}

TEST_CASE("two threads on two streams get the single-thread results" * doctest::skip(!have_gpu())) {
    // One Loss, two threads, each on its own stream with its own data; one of them alternates
    // between two layouts, so plans are made and found while the other launches.
    auto loss = compile("param beta = 1; d = abs(p - t); mean(d < beta ? 0.5 * d^2 / beta : d - 0.5 * beta)");
    const std::vector<std::string> wrt{"p", "t"};
    struct Set {
        DeviceTensor p, t;
        std::vector<TensorView> views() const { return {p.device(), t.device()}; }
        std::size_t count() const { return static_cast<std::size_t>(p.host.numel()); }
    };
    const Set sets[] = {{make("512x1024:normal", 1), make("512x1024:normal", 2)},
                        {make("300x77:normal", 3), make("300x77:normal", 4)},
                        {make("1024x256:normal", 5), make("1024x256:normal", 6)}};
    // The results of one thread on the default stream, one call at a time.
    struct Expected {
        float value = 0;
        std::vector<float> dp, dt;
    };
    std::vector<Expected> expected;
    for (const auto& set : sets) {
        Expected e;
        e.value = loss(set.views());
        DeviceBuffer dp(set.count() * sizeof(float)), dt(set.count() * sizeof(float));
        const std::vector<OutputView> grads{OutputView::contiguous(dp.data(), set.p.host.shape),
                                            OutputView::contiguous(dt.data(), set.t.host.shape)};
        loss.grad(set.views(), wrt, grads);
        synchronize();
        e.dp = download(dp, set.count());
        e.dt = download(dt, set.count());
        expected.push_back(std::move(e));
    }

    constexpr int kRounds = 50;
    struct Outcome {
        std::vector<float> values;     // operator() per round
        std::vector<float> evaluated;  // evaluate() into device memory, read after the rounds
        std::vector<std::vector<float>> dp, dt;  // the last gradients of each set
        std::string error;
    };
    Outcome outcomes[2];
    auto work = [&](int thread) {
        Outcome& out = outcomes[thread];
        try {
            OwnStream own;
            DeviceBuffer results(kRounds * sizeof(float));
            std::vector<DeviceBuffer> dp, dt;
            for (const auto& set : sets) {
                dp.emplace_back(set.count() * sizeof(float));
                dt.emplace_back(set.count() * sizeof(float));
            }
            for (int round = 0; round < kRounds; ++round) {
                // Thread 0 stays on set 0; thread 1 alternates between sets 1 and 2.
                const std::size_t s = thread == 0 ? 0 : 1 + static_cast<std::size_t>(round % 2);
                const auto views = sets[s].views();
                out.values.push_back(loss(views, own.stream));
                loss.evaluate(views, static_cast<float*>(results.data()) + round, own.stream);
                const std::vector<OutputView> grads{OutputView::contiguous(dp[s].data(), sets[s].p.host.shape),
                                                    OutputView::contiguous(dt[s].data(), sets[s].t.host.shape)};
                loss.grad(views, wrt, grads, own.stream);
            }
            own.synchronize();
            out.evaluated = download(results, kRounds);
            for (std::size_t s = 0; s < std::size(sets); ++s) {
                out.dp.push_back(download(dp[s], sets[s].count()));
                out.dt.push_back(download(dt[s], sets[s].count()));
            }
        } catch (const std::exception& e) {
            out.error = e.what();
        }
    };
    std::thread other(work, 1);
    work(0);
    other.join();

    for (int thread = 0; thread < 2; ++thread) {
        CAPTURE(thread);
        const Outcome& out = outcomes[thread];
        REQUIRE(out.error == "");
        REQUIRE(out.values.size() == kRounds);
        for (int round = 0; round < kRounds; ++round) {
            CAPTURE(round);
            const std::size_t s = thread == 0 ? 0 : 1 + static_cast<std::size_t>(round % 2);
            CHECK(out.values[static_cast<std::size_t>(round)] == expected[s].value);  // deterministic: the same bits
            CHECK(out.evaluated[static_cast<std::size_t>(round)] == expected[s].value);
        }
        for (std::size_t s = thread == 0 ? 0 : 1; s < (thread == 0 ? 1u : 3u); ++s) {
            CAPTURE(s);
            CHECK(out.dp[s] == expected[s].dp);
            CHECK(out.dt[s] == expected[s].dt);
        }
    }
    REQUIRE(loss.kernel_info());  // the most recent call, on whichever stream
    CHECK(loss.kernel_info()->grid > 0);
}

}  // TEST_SUITE
