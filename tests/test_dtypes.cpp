// dtypes: what every element type means, without a GPU: the promotion rules, the exact conversions,
// the CPU reference widening inputs and rounding outputs as the kernels do, the vector accesses a
// dtype's alignment allows, and the errors for what lossjit cannot take.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "lossjit/lossjit.hpp"
#include "pipeline.hpp"
#include "tools/host.hpp"

using namespace lossjit;

namespace {

HostTensor typed(Shape shape, DType dtype, const std::vector<double>& values) {
    HostTensor t(std::move(shape), dtype);
    REQUIRE(static_cast<std::size_t>(t.numel()) == values.size());
    for (std::size_t i = 0; i < values.size(); ++i) t.set(static_cast<std::int64_t>(i), values[i]);
    return t;
}

double reduce(const std::string& text, const std::vector<const HostTensor*>& inputs) {
    std::vector<TensorView> views;
    for (const auto* t : inputs) views.push_back(t->view());
    return compile(text).reference(views);
}

constexpr double kTwo24 = 16777216.0;

}  // namespace

TEST_SUITE("dtypes") {

TEST_CASE("names, sizes and the promotion rules") {
    const struct {
        DType dtype;
        const char* name;
        const char* short_name;
        std::size_t size;
        bool floating;
    } table[] = {
        {DType::float32, "float32", "f32", 4, true},  {DType::float64, "float64", "f64", 8, true},
        {DType::bfloat16, "bfloat16", "bf16", 2, true}, {DType::float16, "float16", "f16", 2, true},
        {DType::int32, "int32", "i32", 4, false},     {DType::int64, "int64", "i64", 8, false},
        {DType::uint8, "uint8", "u8", 1, false},      {DType::boolean, "bool", "b1", 1, false},
    };
    CHECK(all_dtypes().size() == std::size(table));
    for (const auto& row : table) {
        CAPTURE(row.name);
        CHECK(to_string(row.dtype) == row.name);
        CHECK(short_name(row.dtype) == row.short_name);
        CHECK(size_of(row.dtype) == row.size);
        CHECK(is_floating(row.dtype) == row.floating);
        // The float types' precision and range, as std::numeric_limits gives the host ones.
        if (row.dtype == DType::float32) CHECK(significand_bits(row.dtype) == std::numeric_limits<float>::digits);
        if (row.dtype == DType::float64) CHECK(significand_bits(row.dtype) == std::numeric_limits<double>::digits);
        if (row.floating) CHECK(std::ldexp(1.0, min_exponent(row.dtype)) > 0.0);
        CHECK(parse_dtype(row.name) == row.dtype);
        CHECK(parse_dtype(row.short_name) == row.dtype);
    }
    CHECK_FALSE(parse_dtype("float8"));
    CHECK_FALSE(parse_dtype(""));

    using D = DType;
    const struct {
        std::vector<DType> inputs;
        DType compute, result;
    } promotion[] = {
        {{D::float32, D::float32}, D::float32, D::float32},
        {{D::bfloat16, D::bfloat16}, D::float32, D::bfloat16},
        {{D::bfloat16, D::int64}, D::float32, D::bfloat16},  // class indices do not promote logits
        {{D::bfloat16, D::float16}, D::float32, D::float32},  // torch.result_type(bf16, f16) is float32
        {{D::bfloat16, D::float32}, D::float32, D::float32},
        {{D::float16, D::boolean}, D::float32, D::float16},
        {{D::int32, D::uint8}, D::float32, D::float32},      // integers only: a float32 result
        {{D::float64, D::bfloat16}, D::float64, D::float64},
        {{}, D::float32, D::float32},
    };
    for (const auto& row : promotion) {
        CHECK(compute_dtype(row.inputs) == row.compute);
        CHECK(result_dtype(row.inputs) == row.result);
    }
}

TEST_CASE("bfloat16 and float16 round to nearest even and keep inf, nan and signed zeros") {
    const struct {
        float value;
        std::uint16_t bf16, f16;
    } table[] = {
        {1.0f, 0x3f80, 0x3c00},
        {-2.0f, 0xc000, 0xc000},
        {0.0f, 0x0000, 0x0000},
        {-0.0f, 0x8000, 0x8000},
        {1.0f + 0x1p-8f, 0x3f80, 0x3c04},               // a bf16 tie, rounds to even (down)
        {1.0f + 3 * 0x1p-8f, 0x3f82, 0x3c0c},           // a bf16 tie, rounds to even (up)
        {1.0f + 0x1p-11f, 0x3f80, 0x3c00},              // a f16 tie: to even (down)
        {65504.0f, 0x4780, 0x7bff},                     // the largest float16 (bfloat16 rounds it up)
        {65520.0f, 0x4780, 0x7c00},                     // halfway to the next: inf in float16
        {0x1p-24f, 0x3380, 0x0001},                     // the smallest float16 subnormal
        {0x1p-25f, 0x3300, 0x0000},                     // half of it: a tie, to even (zero)
        {std::numeric_limits<float>::infinity(), 0x7f80, 0x7c00},
        {-std::numeric_limits<float>::infinity(), 0xff80, 0xfc00},
        {3.0e38f, 0x7f62, 0x7c00},
    };
    for (const auto& row : table) {
        CAPTURE(row.value);
        CHECK(float_to_bfloat16(row.value) == row.bf16);
        CHECK(float_to_float16(row.value) == row.f16);
    }
    CHECK(std::isnan(bfloat16_to_float(float_to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
    CHECK(std::isnan(float16_to_float(float_to_float16(std::numeric_limits<float>::quiet_NaN()))));
    // A NaN whose payload lives only in the low bits must not truncate to inf.
    CHECK(std::isnan(bfloat16_to_float(float_to_bfloat16(std::bit_cast<float>(0x7f800001u)))));
}

TEST_CASE("the reference widens every dtype as a kernel loads it") {
    const auto f32 = typed({4}, DType::float32, {1.5, -2, 0.25, 3});
    SUBCASE("bfloat16 and float16 inputs are exact in float32") {
        const auto bf16 = typed({4}, DType::bfloat16, {1.0 / 3, -2, 0.1, 1e30});
        const auto f16 = typed({4}, DType::float16, {1.0 / 3, -2, 0.1, 60000});
        double expected_bf16 = 0, expected_f16 = 0;
        for (std::int64_t i = 0; i < 4; ++i) {
            expected_bf16 += bf16.at(i) * f32.at(i);
            expected_f16 += f16.at(i) * f32.at(i);
        }
        CHECK(bf16.at(0) == bfloat16_to_float(float_to_bfloat16(1.0f / 3)));
        CHECK(reduce("sum(p * t)", {&bf16, &f32}) == doctest::Approx(expected_bf16).epsilon(1e-15));
        CHECK(reduce("sum(p * t)", {&f16, &f32}) == doctest::Approx(expected_f16).epsilon(1e-15));
    }
    SUBCASE("integers are rounded to float32 in a float32 program, kept in a float64 one") {
        const auto big = typed({2}, DType::int64, {kTwo24 + 1, -(kTwo24 + 3)});
        const auto i32 = typed({2}, DType::int32, {kTwo24 + 1, 7});
        const auto zero64 = typed({2}, DType::float64, {0, 0});
        CHECK(reduce("sum(y)", {&big}) == kTwo24 - (kTwo24 + 4));  // 2^24 + 1 -> 2^24, -(2^24 + 3) -> -(2^24 + 4)
        CHECK(reduce("sum(y + z)", {&big, &zero64}) == -2.0);        // float64 arithmetic: exact
        CHECK(reduce("sum(y)", {&i32}) == kTwo24 + 7);
    }
    SUBCASE("bools and uint8 are 0/1 and their value") {
        HostTensor mask({3}, DType::boolean);
        mask.bytes = {1, 0, 2};  // any nonzero byte is true, as torch reads a bool tensor
        const auto u8 = typed({3}, DType::uint8, {0, 200, 255});
        const auto x = typed({3}, DType::float32, {10, 20, 30});
        CHECK(reduce("sum(m * x)", {&mask, &x}) == 40.0);
        CHECK(reduce("sum(where(m, x, 0))", {&mask, &x}) == 40.0);
        CHECK(reduce("sum(u)", {&u8}) == 455.0);
    }
    SUBCASE("a float64 program keeps its inputs, constants and parameters unrounded") {
        const auto x = typed({1}, DType::float64, {1.0 + 0x1p-40});
        CHECK(reduce("sum(x - 1)", {&x}) == 0x1p-40);
        CHECK(reduce("sum(x * 0 + 0.1)", {&x}) == 0.1);
        const auto x32 = typed({1}, DType::float32, {1.0});
        CHECK(reduce("sum(x * 0 + 0.1)", {&x32}) == static_cast<double>(0.1f));
    }
}

TEST_CASE("a map's output is rounded once, into its dtype") {
    auto loss = compile("x / 3");
    const auto x = typed({4}, DType::float32, {1, 2, 100, -7});
    const std::vector<TensorView> inputs{x.view()};
    CHECK(loss.output_dtype(inputs) == DType::float32);
    for (DType out_dtype : {DType::bfloat16, DType::float16, DType::float64, DType::float32}) {
        CAPTURE(to_string(out_dtype));
        HostTensor out({4}, out_dtype);
        loss.reference_map(inputs, out.output());
        for (std::int64_t i = 0; i < 4; ++i) {
            HostTensor expected({1}, out_dtype);
            expected.set(0, x.at(i) / 3);  // float64 value, through float32 to a 16-bit type
            CHECK(out.at(i) == expected.at(0));
        }
    }
    const auto bf16 = typed({4}, DType::bfloat16, {1, 2, 3, 4});
    CHECK(loss.output_dtype(std::vector<TensorView>{bf16.view()}) == DType::bfloat16);
    HostTensor ints({4}, DType::int32);
    CHECK_THROWS_WITH_AS(loss.reference_map(inputs, ints.output()),
                         doctest::Contains("'output' is int32; lossjit writes float32, float64, bfloat16 or float16"),
                         UsageError);
}

TEST_CASE("gradients: of a bfloat16 input as of its float32 values; none for integers") {
    auto loss = compile("mean((p - t)^2)");
    const auto p16 = typed({3}, DType::bfloat16, {0.5, 1.25, -3});
    const auto p32 = typed({3}, DType::float32, {0.5, 1.25, -3});
    const auto t = typed({3}, DType::int64, {1, 1, 0});
    const std::vector<std::string> wrt{"p"};
    const auto g16 = loss.reference_grad(std::vector<TensorView>{p16.view(), t.view()}, wrt);
    const auto g32 = loss.reference_grad(std::vector<TensorView>{p32.view(), t.view()}, wrt);
    CHECK(g16[0].values == g32[0].values);
    const std::vector<std::string> wrt_t{"t"};
    CHECK_THROWS_WITH_AS(loss.reference_grad(std::vector<TensorView>{p16.view(), t.view()}, wrt_t),
                         doctest::Contains("'t' is int64: an integer or bool input has no gradient"), UsageError);
}

TEST_CASE("vector accesses need each dtype's own alignment") {
    const std::vector<OperandShape> shapes{{"x", {1024}, {}}};
    const Layout layout = plan_layout(shapes, nullptr);
    const ir::Program program = [] {
        return check(parse("mean(x * 2)", "expr"), {});
    }();
    alignas(16) static unsigned char data[64];
    const struct {
        DType dtype;
        std::size_t offset;
        int vector_width;
    } table[] = {
        {DType::float32, 0, 4}, {DType::float32, 4, 1},   // 16 bytes for 4 floats
        {DType::bfloat16, 16, 8}, {DType::bfloat16, 8, 4}, {DType::bfloat16, 2, 1}, // 16 bytes for 8 bfloat16, 8 for 4
        {DType::float16, 0, 8}, {DType::float16, 24, 4},
        {DType::uint8, 8, 8},   {DType::uint8, 4, 4},   {DType::uint8, 1, 1},  // 8 bytes for 8 uint8, 4 for 4
        {DType::float64, 16, 4}, {DType::float64, 8, 1},  // two 16-byte halves
        {DType::int64, 32, 4},  {DType::int64, 24, 1},
    };
    for (const auto& row : table) {
        CAPTURE(to_string(row.dtype));
        CAPTURE(row.offset);
        KernelOperands operands = KernelOperands::unplaced(program, row.dtype);
        operands.input_data[0] = data + row.offset;
        const KernelSpec spec = KernelSpec::choose(program, layout, operands);
        CHECK(spec.vector_width == row.vector_width);
        if (row.dtype != DType::float32) CHECK(spec.signature().find(std::string(short_name(row.dtype))) != std::string::npos);
    }
    CHECK(vector_alignment(DType::boolean) == 4);
    CHECK(vector_alignment(DType::float64) == 16);
    CHECK(vector_alignment(DType::bfloat16, 8) == 16);
    CHECK(vector_alignment(DType::boolean, 8) == 8);
    CHECK(vector_alignment(DType::float32, 8) == 16);
}

TEST_CASE("vector width 8 where every operand is of 16 bits or fewer") {
    const std::vector<OperandShape> shapes{{"p", {16, 32768}, {}}, {"t", {32768}, {}}};
    const OperandShape out{"out", {16, 32768}, {}};
    const ir::Program reduction = check(parse("mean(max(0, 1 - p * t))", "expr"), {});
    const ir::Program map = check(parse("p * t", "expr"), {});
    // All bfloat16: 8 elements (16 bytes) per access, unrolled 4 / inputs read.
    KernelSpec spec = KernelSpec::choose(reduction, plan_layout(shapes, nullptr), KernelOperands::unplaced(reduction, DType::bfloat16));
    CHECK(spec.vector_width == 8);
    CHECK(spec.unroll == 2);
    // A float32 operand among them: 4, as for float32 alone.
    KernelOperands mixed = KernelOperands::unplaced(reduction, DType::bfloat16);
    mixed.input_dtypes[1] = DType::float32;
    CHECK(KernelSpec::choose(reduction, plan_layout(shapes, nullptr), mixed).vector_width == 4);
    // A map's output counts: bfloat16 in, float32 out is 4; bfloat16 out is 8.
    KernelOperands to_f32 = KernelOperands::unplaced(map, DType::bfloat16);
    to_f32.result_dtype = DType::float32;
    CHECK(KernelSpec::choose(map, plan_layout(shapes, &out), to_f32).vector_width == 4);
    CHECK(KernelSpec::choose(map, plan_layout(shapes, &out), KernelOperands::unplaced(map, DType::bfloat16)).vector_width == 8);
    // float32 asks for 8 explicitly: two 16-byte accesses per vector.
    CHECK(KernelSpec::choose(reduction, plan_layout(shapes, nullptr), KernelOperands::unplaced(reduction), Knobs{.vector_width = 8})
              .vector_width == 8);
    // Items per thread that 8 lanes cannot make up: 4 lanes.
    spec = KernelSpec::choose(reduction, plan_layout(shapes, nullptr), KernelOperands::unplaced(reduction, DType::bfloat16),
                              Knobs{.items_per_thread = 12});
    CHECK(spec.vector_width == 4);
    CHECK(spec.unroll == 3);
    // Rows of 32772: a multiple of 4, not of 8.
    const std::vector<OperandShape> odd{{"p", {16, 32772}, {}}, {"t", {32772}, {}}};
    spec = KernelSpec::choose(reduction, plan_layout(odd, nullptr), KernelOperands::unplaced(reduction, DType::bfloat16),
                              Knobs{.vector_width = 8});
    CHECK(spec.vector_width == 4);
    REQUIRE(spec.notes.size() == 1);
    CHECK(spec.notes[0] == "vector width 8 was asked for, but the last dimension (32772) is not a multiple of 8: vector width 4 is used");
    // A bfloat16 row starting 8 bytes past 16-byte alignment: 4.
    alignas(16) static unsigned short data[16];
    KernelOperands shifted = KernelOperands::unplaced(reduction, DType::bfloat16);
    shifted.input_data[0] = data + 4;
    spec = KernelSpec::choose(reduction, plan_layout(shapes, nullptr), shifted, Knobs{.vector_width = 8});
    CHECK(spec.vector_width == 4);
    REQUIRE(spec.notes.size() == 1);
    CHECK(spec.notes[0] == "vector width 8 was asked for, but the rows of 'p' do not all start 16-byte aligned: vector width 4 is used");
}

TEST_CASE("misuse: unknown dtypes, misaligned elements, integer outputs and gradients") {
    auto loss = compile("mean(x)");
    alignas(16) static unsigned char data[64];
    const auto view = [&](DType dtype, std::size_t offset) {
        return std::vector<TensorView>{TensorView::contiguous(data + offset, {2}, dtype)};
    };
    CHECK_NOTHROW(loss.reference(view(DType::bfloat16, 2)));
    CHECK_THROWS_WITH_AS(loss.reference(view(DType::bfloat16, 1)), doctest::Contains("'x' is not aligned to 2 bytes"),
                         UsageError);
    CHECK_THROWS_WITH_AS(loss.reference(view(DType::int64, 4)), doctest::Contains("'x' is not aligned to 8 bytes"),
                         UsageError);
    CHECK_THROWS_WITH_AS(loss.reference(view(static_cast<DType>(200), 0)),
                         doctest::Contains("'x' has an unknown dtype (200)"), UsageError);
}

}  // TEST_SUITE
