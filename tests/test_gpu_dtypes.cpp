// GPU tests of every dtype: the kernels widen inputs and round outputs exactly as the CPU reference
// does (lossjit/dtype.hpp), in every loop (rows with vector and scalar accesses, strided, columns),
// for values, maps and fused gradients. Part of the gpu suite: skipped, visibly, without a device.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "lossjit/lossjit.hpp"
#include "gpu_support.hpp"
#include "tools/host.hpp"

using namespace lossjit;

namespace {

bool have_gpu() { return lossjit_test::have_typed_gpu(); }
using lossjit_test::Typed;

double rel_error(double a, double b) { return a == b ? 0.0 : std::fabs(a - b) / std::max(std::fabs(b), 1e-30); }

// Distance in units of the last place of `dtype` between two values already of that dtype.
double ulps(double a, double b, DType dtype) {
    if (a == b || (std::isnan(a) && std::isnan(b))) return 0;
    const int exponent = std::ilogb(std::max(std::fabs(a), std::fabs(b))) - significand_bits(dtype) + 1;
    const double scale = std::ldexp(1.0, std::max(exponent, min_exponent(dtype)));  // subnormals: the fixed step
    return std::fabs(a - b) / scale;
}

const std::vector<DType> kFloating{DType::float32, DType::bfloat16, DType::float16, DType::float64};

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("every input dtype, every loop: reductions match the reference" * doctest::skip(!have_gpu())) {
    // [rows, cols]: a multiple of 4 (vector accesses), an odd width (scalar), one value per row.
    for (const DType dtype : all_dtypes()) {
        CAPTURE(to_string(dtype));
        const bool integer = !is_floating(dtype);
        const std::string values = integer ? ":uniform[0,50]" : ":normal";  // uint8 and bool: no negatives
        for (const char* shape : {"1000x1024", "999x1023"}) {
            CAPTURE(shape);
            auto loss = compile("mean((p - t)^2 + sin(p) * t)");
            const Typed p(std::string(shape) + values, dtype, 11);
            const Typed t(std::string(shape) + ":normal", DType::float32, 12);
            const std::vector<TensorView> device{p.view(), t.view()}, host{p.host.view(), t.host.view()};
            const double gpu = loss(device);
            const double reference = loss.reference(host);
            CHECK(rel_error(gpu, reference) <= 2e-7);
            const bool named = loss.kernel_info()->signature.find(std::string(short_name(dtype))) != std::string::npos;
            CHECK((named || dtype == DType::float32));
        }
        // A strided view: p read transposed.
        auto loss = compile("sum(p * t)");
        const Typed p("256x384" + values, dtype, 13);
        const Typed t("384x256:normal", DType::float32, 14);
        const TensorView pt{p.device.data(), dtype, {384, 256}, {1, 384}};
        const TensorView pt_host{p.host.bytes.data(), dtype, {384, 256}, {1, 384}};
        const double gpu = loss(std::vector<TensorView>{pt, t.view()});
        CHECK(rel_error(gpu, loss.reference(std::vector<TensorView>{pt_host, t.host.view()})) <= 1e-6);
        CHECK(loss.kernel_info()->strided);
    }
}

TEST_CASE("a float64 program computes in float64 and can return a float64 result" * doctest::skip(!have_gpu())) {
    auto loss = compile("mean((p - t)^2 + 0.1)");
    const Typed p("4096x1024:normal", DType::float64, 21);
    const Typed t("4096x1024:normal", DType::float32, 22);
    const std::vector<TensorView> device{p.view(), t.view()}, host{p.host.view(), t.host.view()};
    DeviceBuffer result(8);
    loss.evaluate(device, OutputView{result.data(), DType::float64, {}, {}});
    double gpu = 0;
    result.download(&gpu, 8);
    CHECK(rel_error(gpu, loss.reference(host)) <= 1e-13);
    CHECK(loss.kernel_info()->signature.find("float64 arithmetic") != std::string::npos);
    // A bfloat16 result: the float64 value rounded once (through float32).
    DeviceBuffer bf16(2);
    loss.evaluate(device, OutputView{bf16.data(), DType::bfloat16, {}, {}});
    std::uint16_t bits = 0;
    bf16.download(&bits, 2);
    CHECK(bits == float_to_bfloat16(static_cast<float>(loss.reference(host))));
}

TEST_CASE("maps write every floating dtype, rounded as the reference rounds" * doctest::skip(!have_gpu())) {
    // Products and quotients only: float32 arithmetic stays within a few ulps of float64 (a sum
    // could cancel, and its float32 rounding show as any number of ulps of a tiny result).
    auto loss = compile("clamp(x + 3, 0, 6) / 6 * y");
    for (const DType in : kFloating) {
        for (const DType out : kFloating) {
            for (const char* shape : {"512x4096", "511x4095"}) {
                CAPTURE(to_string(in));
                CAPTURE(to_string(out));
                CAPTURE(shape);
                const Typed x(std::string(shape) + ":normal[0,3]", in, 31);
                const Typed y(std::string(shape) + ":normal[0,0.01]", in, 32);
                const std::vector<TensorView> device{x.view(), y.view()}, host{x.host.view(), y.host.view()};
                const Shape shape_out = loss.output_shape(device);
                HostTensor gpu(shape_out, out), reference(shape_out, out);
                DeviceBuffer buffer(gpu.bytes.size());
                buffer.fill_bytes(0xFF);  // NaN in every float type: an element never written cannot match
                loss.map(device, OutputView::contiguous(buffer.data(), shape_out, out));
                synchronize();
                buffer.download(gpu.bytes.data(), gpu.bytes.size());
                loss.reference_map(host, reference.output());
                // The GPU computes in float32 (float64 for float64 inputs), the reference in float64.
                // Compared in units of the coarser of the compute and output types: a few units of
                // float32 where the output is at least as wide as the arithmetic; where it is a
                // 16-bit type, the same value but for one unit near a tie.
                const DType compute = in == DType::float64 ? DType::float64 : DType::float32;
                const bool narrow = size_of(out) < size_of(compute);
                const DType unit = narrow ? out : compute;
                std::int64_t exact = 0, far = 0;
                for (std::int64_t i = 0; i < gpu.numel(); ++i) {
                    const double d = ulps(gpu.at(i), reference.at(i), unit);
                    exact += d == 0;
                    far += d > (narrow ? 1 : 8);
                }
                CHECK(far == 0);
                if (narrow) CHECK(exact >= gpu.numel() * 999 / 1000);
            }
        }
    }
}

TEST_CASE("fused gradients into bfloat16, float16 and float64, in the rows and columns loops" *
          doctest::skip(!have_gpu())) {
    // hinge with t [C] broadcast over rows: t's gradient is summed (columns loop); mse: rows loop.
    const struct {
        const char* program;
        const char* p;
        const char* t;
    } table[] = {
        {"mean(max(0, 1 - p*t))", "1024x2048:uniform", "2048:sign"},
        {"mean((p - t)^2)", "1024x2048:normal", "1024x2048:normal"},
    };
    for (const auto& row : table) {
        for (const DType dtype : {DType::bfloat16, DType::float16, DType::float64}) {
            CAPTURE(row.program);
            CAPTURE(to_string(dtype));
            auto loss = compile(row.program);
            const Typed p(row.p, dtype, 41), t(row.t, dtype, 42);
            const std::vector<TensorView> device{p.view(), t.view()}, host{p.host.view(), t.host.view()};
            const std::vector<std::string> wrt{"p", "t"};
            auto grads = loss.grad(device, wrt);
            DeviceBuffer value(8);
            std::vector<OutputView> views{grads[0].view(), grads[1].view()};
            loss.value_and_grad(device, wrt, views, OutputView{value.data(), dtype, {}, {}});
            synchronize();
            const auto reference = loss.reference_grad(host, wrt);
            for (std::size_t k = 0; k < 2; ++k) {
                CAPTURE(wrt[k]);
                CHECK(grads[k].dtype == dtype);
                HostTensor gpu(grads[k].shape, dtype);
                grads[k].buffer.download(gpu.bytes.data(), gpu.bytes.size());
                double largest = 0;
                for (double v : reference[k].values) largest = std::max(largest, std::fabs(v));
                std::int64_t within_ulp = 0;
                double worst = 0;
                for (std::int64_t i = 0; i < gpu.numel(); ++i) {
                    HostTensor rounded({1}, dtype);
                    rounded.set(0, reference[k].values[static_cast<std::size_t>(i)]);
                    // float64: the GPU and the reference scale (and sum) in other orders: a few ulps.
                    within_ulp += ulps(gpu.at(i), rounded.at(0), dtype) <= (dtype == DType::float64 ? 64 : 1);
                    worst = std::max(worst, std::fabs(gpu.at(i) - reference[k].values[static_cast<std::size_t>(i)]));
                }
                CHECK(worst <= largest * (dtype == DType::float64 ? 1e-12 : 1e-2));
                CHECK(within_ulp >= gpu.numel() * 999 / 1000);
            }
            HostTensor v({}, dtype);
            value.download(v.bytes.data(), v.bytes.size());
            HostTensor expected({}, dtype);
            expected.set(0, loss.reference(host));
            CHECK(ulps(v.at(0), expected.at(0), dtype) <= (dtype == DType::float64 ? 1e6 : 1));
        }
    }
}

TEST_CASE("integer inputs have no gradient on the GPU either" * doctest::skip(!have_gpu())) {
    auto loss = compile("mean((p - t)^2)");
    const Typed p("64x64:normal", DType::float32, 51), t("64x64:uniform[0,10]", DType::int64, 52);
    const std::vector<TensorView> device{p.view(), t.view()};
    const std::vector<std::string> wrt{"t"};
    CHECK_THROWS_WITH_AS(loss.grad(device, wrt), doctest::Contains("'t' is int64: an integer or bool input has no gradient"),
                         UsageError);
    const std::vector<std::string> just_p{"p"};
    CHECK_NOTHROW(loss.grad(device, just_p));
}

}  // TEST_SUITE
