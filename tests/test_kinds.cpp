// The kernel kinds' shared facts: the defaults table (kinds/defaults.cpp), the GPU classes it is
// keyed by, and the dispatcher's choice of kind.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <utility>

#include "codegen/kernel_spec.hpp"
#include "codegen/kinds/defaults.hpp"
#include "codegen/kinds/kinds.hpp"
#include "pipeline.hpp"

using namespace lossjit;

TEST_SUITE("kinds") {

TEST_CASE("every default has a row for any GPU, one row per class, and cites a measurement that exists") {
    std::set<std::pair<Default, GpuClass>> seen;
    std::set<Default> for_any;
    for (const DefaultRow& row : default_table()) {
        CAPTURE(to_string(row.what));
        CHECK(seen.insert({row.what, row.gpu}).second);
        if (row.gpu == GpuClass::Any) for_any.insert(row.what);
        CHECK(row.value > 0);
        CHECK(!row.measured.empty());
        CHECK(row.evidence.starts_with("docs/results/"));
        CHECK(std::filesystem::is_regular_file(std::filesystem::path(LOSSJIT_SOURCE_DIR) / row.evidence));
    }
    for (int d = 0; d < static_cast<int>(Default::Count_); ++d) {
        CAPTURE(to_string(static_cast<Default>(d)));
        CHECK(for_any.count(static_cast<Default>(d)) == 1);
    }
}

TEST_CASE("a GPU's class: Hopper by its memory bandwidth, or its memory size where the driver gives none") {
    struct Row {
        GpuFacts gpu;
        GpuClass expected;
    };
    const Row rows[] = {
        {{}, GpuClass::Any},  // no GPU: code emitted for none in particular
        {{.arch = 90, .multiprocessors = 132, .memory_bytes = 80LL << 30, .memory_bytes_per_second = 3.35e12}, GpuClass::HopperHbm3},
        {{.arch = 90, .multiprocessors = 132, .memory_bytes = 94LL << 30, .memory_bytes_per_second = 3.9e12}, GpuClass::HopperHbm3},  // H100 NVL
        {{.arch = 90, .multiprocessors = 132, .memory_bytes = 141LL << 30, .memory_bytes_per_second = 4.8e12}, GpuClass::HopperHbm3e},
        {{.arch = 90, .memory_bytes = 80LL << 30}, GpuClass::HopperHbm3},    // no bandwidth reported
        {{.arch = 90, .memory_bytes = 141LL << 30}, GpuClass::HopperHbm3e},
        {{.arch = 80, .multiprocessors = 108, .memory_bytes_per_second = 2.0e12}, GpuClass::Any},  // A100: never measured
    };
    for (const Row& row : rows) {
        CAPTURE(row.gpu.arch);
        CAPTURE(row.gpu.memory_bytes_per_second);
        CHECK(gpu_class(row.gpu) == row.expected);
    }
}

TEST_CASE("a class without a row of its own gets the row for any GPU") {
    const GpuFacts h100{.arch = 90, .memory_bytes_per_second = 3.35e12};
    const GpuFacts h200{.arch = 90, .memory_bytes_per_second = 4.8e12};
    CHECK(default_value(Default::AlongRowsSmallGradientThreads, {}) == 512);
    CHECK(default_value(Default::AlongRowsSmallGradientThreads, h100) == 1024);
    CHECK(default_value(Default::AlongRowsSmallGradientThreads, h200) == 512);
    CHECK(default_value(Default::MapThreads, h100) == default_value(Default::MapThreads, {}));
}

TEST_CASE("the dispatcher: the kind follows the program and the layout") {
    const auto checked = [](const std::string& text) { return check(parse(text, "expr"), {}); };
    const auto kind_of = [](const ir::Program& program, const Layout& layout) {
        return KernelSpec::choose(program, layout, KernelOperands::unplaced(program)).loop;
    };
    const OperandShape x{"x", {64, 256}, {}};
    const OperandShape y{"y", {64, 256}, {}};
    const OperandShape row{"t", {256}, {}};
    const auto reduction = checked("mean((x - y)^2)");
    CHECK(kind_of(reduction, plan_program_layout(reduction, std::vector{x, y}, nullptr)) == KernelSpec::Loop::Rows);
    // A transposed input: the strided loop of the same kind.
    const OperandShape transposed{"y", {64, 256}, {1, 64}};
    CHECK(kind_of(reduction, plan_program_layout(reduction, std::vector{x, transposed}, nullptr)) == KernelSpec::Loop::Strided);
    // The gradient of an input of one row broadcast over the others: the columns loop.
    const auto hinge = differentiate(checked("mean(max(0, 1 - x * t))"), std::vector<int>{1}, {});
    const OperandShape gradients{"gradients", {64, 256}, {}};
    CHECK(kind_of(hinge, plan_program_layout(hinge, std::vector{x, row}, &gradients)) == KernelSpec::Loop::Columns);
    // A reduction along rows: the by-rows kind.
    const auto lse = checked("mean(logsumexp(x, -1))");
    CHECK(kind_of(lse, plan_program_layout(lse, std::vector{x}, nullptr)) == KernelSpec::Loop::ByRow);
}

TEST_CASE("an index beyond 2^24 columns is refused in float32, not rounded") {
    const auto accuracy = check(parse("mean(argmax(x, -1) == y)", "expr"), {});
    const auto spec_for = [&](long long columns, DType dtype) {
        const OperandShape x{"x", {2, columns}, {}};
        const OperandShape y{"y", {2, 1}, {}};
        KernelOperands operands = KernelOperands::unplaced(accuracy, dtype);
        return KernelSpec::choose(accuracy, plan_program_layout(accuracy, std::vector{x, y}, nullptr), operands);
    };
    CHECK(spec_for(1LL << 24, DType::float32).loop == KernelSpec::Loop::ByRow);
    CHECK_THROWS_WITH_AS(spec_for((1LL << 24) + 1, DType::float32),
                         doctest::Contains("argmax over rows of 16777217 columns: a column index above 2^24 is not exact"),
                         UnsupportedError);
    CHECK(spec_for((1LL << 24) + 1, DType::float64).loop == KernelSpec::Loop::ByRow);
    const auto lse = check(parse("mean(logsumexp(x, -1))", "expr"), {});  // not an index: any length
    const OperandShape long_rows{"x", {2, (1LL << 24) + 1}, {}};
    CHECK(KernelSpec::choose(lse, plan_program_layout(lse, std::vector{long_rows}, nullptr), KernelOperands::unplaced(lse)).loop ==
          KernelSpec::Loop::ByRow);
}

}  // TEST_SUITE
