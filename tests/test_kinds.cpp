// The kernel kinds' shared facts: the defaults table (kinds/defaults.cpp), the GPU classes it is
// keyed by, and the dispatcher's choice of kind.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "codegen/kernel_spec.hpp"
#include "codegen/kinds/defaults.hpp"
#include "codegen/kinds/kinds.hpp"
#include "jit/compile.hpp"
#include "jit/resources.hpp"
#include "pipeline.hpp"

using namespace lossjit;

namespace {

// A program (differentiated with respect to `wrt`, where any) planned for inputs of `shape` (index
// inputs of `index_shape`) and its kernel spec for `knobs` on `gpu`.
struct Planned {
    ir::Program program;
    Layout layout;
    KernelSpec spec;
};
// `shape_of`: inputs of another shape than `shape` (an index's is `index_shape`), by name; `order`:
// the caller's order of the inputs (empty: as they appear).
Planned plan(const char* text, const std::vector<std::string>& wrt_names, const Shape& shape, const Shape& index_shape,
             const Knobs& knobs, DType dtype, const GpuFacts& gpu, const std::map<std::string, Shape>& shape_of = {},
             const std::vector<std::string>& order = {}) {
    Planned p{check(parse(text, "expr"), {order, {}}), {}, {}};
    std::vector<int> wrt;
    for (const auto& name : wrt_names)
        wrt.push_back(static_cast<int>(std::find(p.program.inputs.begin(), p.program.inputs.end(), name) - p.program.inputs.begin()));
    if (!wrt.empty()) p.program = differentiate(p.program, wrt, {});
    std::vector<OperandShape> shapes;
    for (std::size_t k = 0; k < p.program.inputs.size(); ++k)
        shapes.push_back({p.program.inputs[k],
                          shape_of.count(p.program.inputs[k]) ? shape_of.at(p.program.inputs[k])
                          : p.program.index_inputs()[k]     ? index_shape
                                                            : shape,
                          {}});
    const OperandShape gradients{"gradients", shape, {}};
    p.layout = plan_program_layout(p.program, shapes, wrt.empty() ? nullptr : &gradients);
    p.spec = KernelSpec::choose(p.program, p.layout, KernelOperands::unplaced(p.program, dtype), knobs, false, gpu);
    return p;
}

// An H100 as the driver describes it (the shared memory a block may opt in to, threads an SM).
const GpuFacts kH100{.arch = 90, .multiprocessors = 132, .memory_bytes_per_second = 3.35e12,
                     .shared_bytes_per_block = 227 * 1024, .threads_per_sm = 2048};

// An H200: an H100's SMs with HBM3e (GpuClass::HopperHbm3e, whose defaults differ in places).
const GpuFacts kH200{.arch = 90, .multiprocessors = 132, .memory_bytes = 141LL << 30, .memory_bytes_per_second = 4.8e12,
                     .shared_bytes_per_block = 227 * 1024, .threads_per_sm = 2048};

// Row programs several cases plan.
constexpr const char* kCrossEntropy = "mean(logsumexp(x, -1) - x[y])";
constexpr const char* kCosine = "mean(1 - sum(x * z, -1) / sqrt(sum(x * x, -1) * sum(z * z, -1)))";
constexpr const char* kSoftmax = "exp(x - logsumexp(x, -1))";

// The launch gives the row cache the columns kept of each input for each of the block's teams (rows).
void check_cache_bytes(const KernelSpec& spec, long long columns, int inputs) {
    CHECK(spec.row_cache_columns == columns);
    CHECK(spec.row_cache_inputs == inputs);
    CHECK(spec.dynamic_shared_bytes() == static_cast<std::size_t>(columns * inputs) * size_of(spec.compute) *
                                             static_cast<std::size_t>(spec.block_threads / spec.team));
}

// A spec's register bound as the kernel's source and signature give it: __launch_bounds__(block,
// min_blocks) and "registers for N blocks per SM", or the block alone and no such words.
void check_register_bound(const std::string& source, const KernelSpec& spec, int min_blocks) {
    CHECK(spec.min_blocks_per_sm == min_blocks);
    CHECK((spec.signature().find("registers for") != std::string::npos) == (min_blocks > 1));
    const std::string bound = min_blocks > 1 ? fmt::format("__launch_bounds__({}, {})", spec.block_threads, min_blocks)
                                             : fmt::format("__launch_bounds__({})", spec.block_threads);
    CHECK(source.find(bound) != std::string::npos);
}

}  // namespace

TEST_SUITE("kinds") {

TEST_CASE("every default has a row for any GPU, one row per class, and cites a measurement that exists") {
    std::set<std::pair<Default, GpuClass>> seen;
    std::set<Default> for_any;
    for (const DefaultRow& row : default_table()) {
        CAPTURE(to_string(row.what));
        CHECK(seen.insert({row.what, row.gpu}).second);
        if (row.gpu == GpuClass::Any) for_any.insert(row.what);
        if (is_switch(row.what)) CHECK((row.value == 0 || row.value == 1));
        else CHECK(row.value > 0);
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

TEST_CASE("the GPUs known by name: their class, the facts the tables here plan with; an unknown name refused") {
    const GpuFacts h100 = named_gpu_facts("h100"), h200 = named_gpu_facts("h200");
    CHECK(gpu_class(h100) == GpuClass::HopperHbm3);
    CHECK(gpu_class(h200) == GpuClass::HopperHbm3e);
    for (const GpuFacts* named : {&h100, &h200}) {
        const GpuFacts& as_here = named == &h100 ? kH100 : kH200;
        CHECK(named->arch == as_here.arch);
        CHECK(named->multiprocessors == as_here.multiprocessors);
        CHECK(named->shared_bytes_per_block == as_here.shared_bytes_per_block);
        CHECK(named->threads_per_sm == as_here.threads_per_sm);
        CHECK(gpu_class(*named) == gpu_class(as_here));
    }
    CHECK(gpu_class(named_gpu_facts("")) == GpuClass::Any);
    CHECK_THROWS_WITH_AS(named_gpu_facts("a100"), doctest::Contains("unknown GPU 'a100'"), UsageError);
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

TEST_CASE("the row cache: the inputs a later walk reads again, as much of the row as the GPU's shared memory holds") {
    const GpuFacts h100{.arch = 90, .multiprocessors = 132, .memory_bytes_per_second = 3.35e12,
                        .shared_bytes_per_block = 227 * 1024};
    // The same SM's numbers on a GPU without clusters (the A100's are much the same).
    const GpuFacts h100_no_clusters{.arch = 80, .multiprocessors = 132, .shared_bytes_per_block = 227 * 1024};
    struct Row {
        const char* program;
        std::vector<std::string> wrt;  // differentiated: the fused value and gradient kernel
        long long columns;
        GpuFacts gpu;
        std::optional<bool> knob;
        long long cached_columns;      // 0: no cache
        int cached_inputs;
        const char* note;              // a note the spec must carry, or ""
        int team = 0, unroll = 0;      // threads per row and unroll, where they matter (0: any)
        DType dtype = DType::float32;
        int cluster = 1;               // blocks of a cluster a row (KernelSpec::row_cluster)
        int cluster_knob = 0;          // Knobs::row_cluster
        RowTeam team_knob = RowTeam::Auto;
        int block_knob = 0;
        int block = 0;                 // threads a block, where it matters (0: any)
    };
    const Row rows[] = {
        // Cross-entropy's value and gradient: logits read by the value's walk and the gradient's.
        // One block an SM: its own threads keep 64 KB of loads in flight (ByRowCachedBytesInFlight),
        // 1024 of them (the block alone on its SM, exp at each element: ByRowAloneGradientThreads).
        {"mean(logsumexp(x, -1) - x[y])", {"x"}, 32768, h100, std::nullopt, 32768, 1, "", 1024, 4},
        // Asked for, two blocks of a cluster take each row, 64 KB each, so that two fit an SM, each of
        // 512 threads keeping 32 KB of loads in flight (ByRowCachedBytesInFlight / 2).
        {"mean(logsumexp(x, -1) - x[y])", {"x"}, 32768, h100, std::nullopt, 16384, 1, "", 512, 4, DType::float32, 2, 2},
        {"mean(logsumexp(x, -1) - x[y])", {"x"}, 32768, h100_no_clusters, std::nullopt, 32768, 1,
         "a row cluster of 2 blocks was asked for", 1024, 4, DType::float32, 1, 2},
        {"mean(logsumexp(x, -1) - x[y])", {"x"}, 32768, h100, false, 0, 0, ""},
        // Any GPU: 40 KB of the portable 48, a quarter of a 128 KB row at least.
        {"mean(logsumexp(x, -1) - x[y])", {"x"}, 32768, {}, std::nullopt, 10240, 1, ""},
        {"mean(logsumexp(x, -1) - x[y])", {"x"}, 65536, {}, std::nullopt, 0, 0, ""},
        {"mean(logsumexp(x, -1) - x[y])", {"x"}, 65536, {}, true, 10240, 1, ""},
        // The value alone walks the row once: nothing to keep.
        {"mean(logsumexp(x, -1) - x[y])", {}, 32768, h100, true, 0, 0, "no input is read by more than one walk"},
        // Softmax: the statistic's walk, then the elements'. Warp teams: 16 a block of 512 threads,
        // each its share (219 KB / 16 / 4 bytes, whole vectors of 4).
        {"exp(x - logsumexp(x, -1))", {}, 4096, h100, std::nullopt, 3504, 1, "", 32, 8},
        // A row not a multiple of 4 is walked in vectors from its first aligned column (KernelSpec::
        // row_shift) and kept as one of 4096 is (before: an element at a time, no cache unless asked for).
        {"exp(x - logsumexp(x, -1))", {}, 4095, h100, std::nullopt, 3504, 1, "", 32, 8},
        {"exp(x - logsumexp(x, -1))", {}, 4095, h100, true, 3504, 1, "", 32, 8},
        // GPT-2's vocabulary: cross-entropy's value and gradient keep the whole row (in whole vectors
        // of 4), as at 32768.
        {"mean(logsumexp(x, -1) - x[y])", {"x"}, 50257, h100, std::nullopt, 50260, 1, "", 1024, 4},
        // Where the warps would keep less than half their rows (3504 of 8192), the block takes each
        // row and keeps all of it, with the fewest threads (from 128, ByRowBlockTeamMinThreads) whose
        // blocks keep 64 KB in flight an SM: 128 x unroll 8 x 16 bytes, 6 blocks of 32 KB an SM.
        {"exp(x - logsumexp(x, -1))", {}, 8192, h100, std::nullopt, 8192, 1, "", 128, 8},
        // A block size set by hand decides the team as before (512: the block), and is kept.
        {"exp(x - logsumexp(x, -1))", {}, 8192, h100, std::nullopt, 8192, 1, "", 512, 4, DType::float32, 1, 0,
         RowTeam::Auto, 512, 512},
        // Layer norm's gradient over 4096: x and the upstream kept (32 KB a row); the warps would keep
        // 1752 columns, the block takes the row with 128 threads (unroll 4: 32 values a thread).
        {"m = mean(x, -1); sum(y * (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5))", {"x"}, 4096, h100, std::nullopt, 4096,
         2, "", 128, 4, DType::float32, 1, 0, RowTeam::Auto, 0, 128},
        // row_team: the warps, each its share, or the block (of automatic size: 128 threads) though the
        // warps would keep enough.
        {"m = mean(x, -1); sum(y * (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5))", {"x"}, 4096, h100, std::nullopt, 1752,
         2, "", 32, 0, DType::float32, 1, 0, RowTeam::Warp, 0, 512},
        {"exp(x - logsumexp(x, -1))", {}, 2048, h100, std::nullopt, 2048, 1, "", 128, 0, DType::float32, 1, 0,
         RowTeam::Block, 0, 128},
        // Rows of 32768 keep 128 KB each: one block an SM, which needs 512 threads for 64 KB in flight.
        {"exp(x - logsumexp(x, -1))", {}, 32768, h100, std::nullopt, 32768, 1, "", 512, 8},
        // A block team, a row not a multiple of 4: whole vectors.
        {"exp(x - logsumexp(x, -1))", {}, 10001, h100, true, 10004, 1, ""},
        // bfloat16: half the bytes a load, and the registers' limit (32 values a thread) holds unroll
        // at 8: one block an SM keeps 32 KB in flight, short of 64: not automatic.
        {"exp(x - logsumexp(x, -1))", {}, 32768, h100, std::nullopt, 0, 0, "", 0, 0, DType::bfloat16},
        {"exp(x - logsumexp(x, -1))", {}, 32768, h100, true, 32768, 1, "", 512, 8, DType::bfloat16},
        // Two inputs read again (cosine's value and gradients), float64 arithmetic: 8 bytes a column.
        {"mean(1 - sum(x * y, -1) / sqrt(sum(x * x, -1) * sum(y * y, -1)))", {"x", "y"}, 16384, h100, std::nullopt,
         16384, 2, "", 512, 4},
        // (float64 inputs: a block of 256 threads keeps 64 KB in flight.)
        {"mean(1 - sum(x * y, -1) / sqrt(sum(x * x, -1) * sum(y * y, -1)))", {"x", "y"}, 8192, h100, true, 8192, 2, "",
         256, 0, DType::float64},
        {"mean(1 - sum(x * y, -1) / sqrt(sum(x * x, -1) * sum(y * y, -1)))", {"x", "y"}, 16384, h100, std::nullopt,
         8192, 2, "", 512, 2, DType::float32, 2, 2},
        // Triplet's three inputs of 8192: 96 KB a row; in clusters of 4, 24 KB a block.
        {"mean(max(sqrt(sum((x - y)^2, -1)) - sqrt(sum((x - z)^2, -1)) + 1, 0))", {"x", "y", "z"}, 8192, h100,
         std::nullopt, 2048, 3, "", 512, 0, DType::float32, 4, 4},
        // A cluster asked for where a block would hold the row alone; and where warps take the rows.
        {"exp(x - logsumexp(x, -1))", {}, 8192, h100, std::nullopt, 4096, 1, "", 512, 0, DType::float32, 2, 2},
        {"exp(x - logsumexp(x, -1))", {}, 4096, h100, std::nullopt, 3504, 1, "a row cluster of 2 blocks was asked for", 32,
         0, DType::float32, 1, 2},
        // Rows longer than shared memory holds, a block a row (row_cluster=1): the leading columns, where
        // they are a quarter of the row.
        {"exp(x - logsumexp(x, -1))", {}, 131072, h100, std::nullopt, (219 * 1024) / 4 / 4 * 4, 1, "", 0, 0,
         DType::float32, 1, 1},
        {"exp(x - logsumexp(x, -1))", {}, 262144, h100, std::nullopt, 0, 0, "", 0, 0, DType::float32, 1, 1},
        {"exp(x - logsumexp(x, -1))", {}, 262144, h100, true, (219 * 1024) / 4 / 4 * 4, 1, "", 0, 0, DType::float32, 1, 1},
        // Automatic on sm_90 (a block would keep less than half the row, ByRowClusterLongRowShare): the
        // smallest cluster whose blocks keep half their shares at two an SM (105.5 KB each). 131072: 2
        // would keep 41% of theirs, 4 keep 82%; 262144 and KernelBench's softmax rows of 393216: 8.
        {"exp(x - logsumexp(x, -1))", {}, 131072, h100, std::nullopt, (227 * 1024 / 2 - 8 * 1024) / 4 / 4 * 4, 1, "", 512,
         0, DType::float32, 4},
        {"exp(x - logsumexp(x, -1))", {}, 262144, h100, std::nullopt, (227 * 1024 / 2 - 8 * 1024) / 4 / 4 * 4, 1, "", 512,
         0, DType::float32, 8},
        {"exp(x - logsumexp(x, -1))", {}, 393216, h100, std::nullopt, (227 * 1024 / 2 - 8 * 1024) / 4 / 4 * 4, 1, "", 512,
         0, DType::float32, 8},
        {"mean(logsumexp(x, -1) - x[y])", {"x"}, 131072, h100, std::nullopt, (227 * 1024 / 2 - 8 * 1024) / 4 / 4 * 4, 1, "",
         512, 0, DType::float32, 4},
        // Rows past what 8 blocks keep half of (4M columns): 8 still keep more than one block.
        {"exp(x - logsumexp(x, -1))", {}, 1 << 22, h100, true, (227 * 1024 / 2 - 8 * 1024) / 4 / 4 * 4, 1, "", 512, 0,
         DType::float32, 8},
        // Not where a block keeps half its row (L1 norm's rows of 65535: 86%), nor without clusters.
        {"x / sum(abs(x), -1)", {}, 65535, h100, std::nullopt, (219 * 1024) / 4 / 4 * 4, 1, "", 0, 0, DType::float32, 1},
        {"exp(x - logsumexp(x, -1))", {}, 131072, h100_no_clusters, std::nullopt, (219 * 1024) / 4 / 4 * 4, 1, "", 0, 0,
         DType::float32, 1},
        // In clusters of 8: 64 KB a block (131072 columns); past what 8 blocks hold at two an SM, each
        // keeps its leading 105.5 KB (262144 columns: 84% of the row, automatic again).
        {"exp(x - logsumexp(x, -1))", {}, 131072, h100, std::nullopt, 16384, 1, "", 512, 0, DType::float32, 8, 8},
        {"exp(x - logsumexp(x, -1))", {}, 262144, h100, std::nullopt, (227 * 1024 / 2 - 8 * 1024) / 4 / 4 * 4, 1, "", 512, 0,
         DType::float32, 8, 8},
    };
    for (const Row& row : rows) {
        CAPTURE(std::string(row.program));
        CAPTURE(row.columns);
        CAPTURE(row.knob.value_or(false));
        Knobs knobs;
        knobs.row_cache = row.knob;
        knobs.row_cluster = row.cluster_knob;
        knobs.row_team = row.team_knob;
        knobs.block_threads = row.block_knob;
        const auto [program, layout, spec] = plan(row.program, row.wrt, {512, row.columns}, {512}, knobs, row.dtype, row.gpu);
        if (row.block) CHECK(spec.block_threads == row.block);
        CHECK(spec.row_cluster == row.cluster);
        check_cache_bytes(spec, row.cached_columns, row.cached_inputs);
        if (*row.note) {
            REQUIRE(spec.notes.size() == 1);
            CHECK(spec.notes[0].find(row.note) != std::string::npos);
        }
        if (row.team) CHECK(spec.team == row.team);
        if (row.unroll) CHECK(spec.unroll == row.unroll);
        CHECK((spec.row_cache_columns > 0) == (spec.signature().find("row cache") != std::string::npos));
        if (spec.row_cache_columns > 0) {  // the source reads the cache's size itself: one source for every length
            const std::string source = emit_cuda(program, spec);
            // (With the row prefetch, automatic for layer norm, the copies fill the cache instead.)
            CHECK(source.find(spec.row_prefetch ? "lj::cache_prefetch<VW>" : "lj::cache_store<VW>") != std::string::npos);
            CHECK(source.find("lj::cache_load<VW>") != std::string::npos);
            CHECK((source.find("__cluster_dims__") != std::string::npos) == (row.cluster > 1));
            CHECK(compile_cuda(source, "sm_90").is_cubin());
        }
    }
}

TEST_CASE("a fused value-and-gradient kernel whose block keeps a row alone on its SM, exp or log at each element, takes 1024 threads") {
    const GpuFacts& h100 = kH100;
    const char* cross_entropy = kCrossEntropy;
    const char* cosine = kCosine;
    const char* triplet = "mean(max(sqrt(sum((x - s)^2, -1)) - sqrt(sum((x - z)^2, -1)) + 1, 0))";
    const char* distill = "q = z / 2 - logsumexp(z / 2, -1); p = x / 2 - logsumexp(x / 2, -1); "
                          "batchmean(sum(exp(q) * (q - p), -1)) * 4";
    const char* z_loss = "lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); "
                         "acc = mean(argmax(x, -1) == y); loss, z, acc";
    const char* softmax = kSoftmax;
    struct Row {
        const char* program;
        std::vector<std::string> wrt;
        long long columns;
        int threads;
        int unroll;
        std::optional<int> block_knob = std::nullopt;
    };
    const Row table[] = {
        // 125-128 KB of the row: one block an SM.
        {cross_entropy, {"x"}, 32768, 1024, 4},
        {cross_entropy, {"x"}, 32000, 1024, 4},
        {z_loss, {"x"}, 32000, 1024, 4},
        {distill, {"x"}, 16384, 1024, 2},
        {"lp = x - logsumexp(x, -1); mean(-(1 - 0.1) * lp[y] - 0.1 * mean(lp, -1))", {"x"}, 32000, 1024, 4},
        {"lp = (x - logsumexp(x, -1))[y]; mean(-(1 - exp(lp))^2 * lp)", {"x"}, 32000, 1024, 4},
        // Light element work (no exp or log), a centered accumulator (layer norm's backward).
        {cosine, {"x", "z"}, 16384, 512, 4},
        {"x / sqrt(mean(x^2, -1) + 1e-6)", {"x"}, 32768, 512, 4},
        {"m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)", {"x"}, 32768, 512, 4},
        // Two blocks an SM (triplet's 96 KB, 64 KB), warps, a cluster's blocks, no gradients, asked for.
        {triplet, {"x", "s", "z"}, 8192, 512, 2},
        {cross_entropy, {"x"}, 16384, 256, 8},
        {cross_entropy, {"x"}, 4096, 512, 8},
        {cross_entropy, {"x"}, 131072, 512, 4},
        {cross_entropy, {}, 32768, 256, 2},
        // A map's backward is the gradient of the sum of upstream x its output, a reduction's: the
        // same rule (x and the upstream gradient kept).
        {softmax, {"x"}, 32768, 1024, 2},
        {cross_entropy, {"x"}, 32768, 512, 8, 512},
    };
    for (const Row& row : table) {
        CAPTURE(std::string(row.program));
        CAPTURE(row.columns);
        Knobs knobs;
        if (row.block_knob) knobs.block_threads = *row.block_knob;
        const auto [program, layout, spec] = plan(row.program, row.wrt, {512, row.columns}, {512}, knobs, DType::float32, h100);
        CAPTURE(program.nodes.size());
        CAPTURE(spec.signature());
        CHECK(spec.block_threads == row.threads);
        CHECK(spec.unroll == row.unroll);
        if (row.threads == 1024) CHECK(compile_cuda(emit_cuda(program, spec), "sm_90").is_cubin());
    }
}

TEST_CASE("three walks with exp or log over two cached inputs: 16 values a thread, the cache kept short of 64 KB") {
    // Distillation's value and gradient walks each row three times (two logsumexps; their row sums;
    // the gradient) over s and t: at ByRowCachedValuesPerThread (32) its 128-thread blocks took 159
    // registers (H100, 32768 x 4096: 1.485 ms against 1.042 at 16: ByRowCachedValuesManyWalks), and
    // its warps kept the cache short of ByRowCachedBytesInFlight (8192 x 1000: 0.127 ms with it
    // against 0.210 without). Soft-target cross-entropy (two walks) and bfloat16 keep the rules before.
    const char* distill = "q = z / 2 - logsumexp(z / 2, -1); p = x / 2 - logsumexp(x / 2, -1); "
                          "batchmean(sum(exp(q) * (q - p), -1)) * 4";
    const char* soft_target = "mean(sum(-z * (x - logsumexp(x, -1)), -1))";
    struct Row {
        const char* program;
        long long columns;
        DType dtype;
        int threads;
        int unroll;
        bool cached;
    };
    const Row table[] = {
        {distill, 4096, DType::float32, 256, 2, true},  // was 128 x 4
        {distill, 8192, DType::float32, 512, 2, true},  // was 256 x 4
        {distill, 1000, DType::float32, 512, 2, true},  // warps; was 512 x 4 (cached, 40 B of local memory)
        {distill, 2048, DType::float32, 512, 2, true},  // warps
        {distill, 32000, DType::float32, 1024, 2, true},  // the block alone on its SM: as before
        {distill, 32768, DType::bfloat16, 256, 4, false},  // 16-bit: no cache short of its bytes in flight
        {soft_target, 4096, DType::float32, 128, 4, true},  // two walks: as before
    };
    for (const Row& row : table) {
        CAPTURE(std::string(row.program));
        CAPTURE(row.columns);
        const auto [program, layout, spec] =
            plan(row.program, {"x"}, {16384, row.columns}, {16384}, Knobs{}, row.dtype, kH100);
        CAPTURE(spec.signature());
        CHECK(spec.block_threads == row.threads);
        CHECK(spec.unroll == row.unroll);
        CHECK((spec.row_cache_columns > 0) == row.cached);
    }
}

TEST_CASE("the row prefetch: where a team keeps its row as the inputs hold it, on sm_80 or later") {
    const GpuFacts& h100 = kH100;
    const GpuFacts a100{.arch = 80, .multiprocessors = 108, .shared_bytes_per_block = 163 * 1024, .threads_per_sm = 2048};
    const GpuFacts volta{.arch = 70, .multiprocessors = 80, .shared_bytes_per_block = 96 * 1024, .threads_per_sm = 2048};
    const char* cross_entropy = kCrossEntropy;
    const char* cosine = kCosine;
    const char* softmax = kSoftmax;
    const char* layer_norm = "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)";
    struct Row {
        const char* program;
        std::vector<std::string> wrt;
        long long columns;
        GpuFacts gpu;
        std::optional<bool> knob;
        bool prefetch;
        const char* note = "";
        DType dtype = DType::float32;
        int cluster = 0;  // 0: any
        std::optional<bool> cache = std::nullopt;
    };
    const Row table[] = {
        // Asked for: a block a row (32768 columns), warps (4096), clusters (131072), two inputs, a map.
        {cross_entropy, {"x"}, 32768, h100, true, true},
        {cross_entropy, {"x"}, 4096, h100, true, true},
        {cross_entropy, {"x"}, 131072, h100, true, false, "blocks of a cluster take each row together", DType::float32, 4},
        {cosine, {"x", "z"}, 8192, h100, true, true},
        {softmax, {}, 32768, a100, true, true},
        {cross_entropy, {"x"}, 32768, {}, true, false, "no GPU is known"},
        {cross_entropy, {"x"}, 32768, volta, true, false, "need sm_80 or later (this GPU is sm_70)"},
        // float64 inputs are kept as they are; bfloat16 ones as float32 (a copy cannot convert).
        {cross_entropy, {"x"}, 8192, h100, true, true, "", DType::float64},
        {cross_entropy, {"x"}, 32768, h100, true, false, "keeps 'x' (bfloat16) as float32", DType::bfloat16, 0, true},
        // Rows that do not start on a vector boundary; no row kept.
        {cross_entropy, {"x"}, 32766, h100, true, false, "do not start on a vector boundary"},
        {cross_entropy, {}, 32768, h100, true, false, "no row is kept"},
        {cross_entropy, {"x"}, 32768, h100, false, false},
        // Three walks (the mean of log_softmax's row after logsumexp); two inputs kept, the walk that
        // refills them reading one (distillation's KL); three inputs (triplet); a first walk that
        // reads no kept input (s walked once), the second the first to read the cache.
        {"lp = x - logsumexp(x, -1); mean(-0.9 * lp[y] - 0.1 * mean(lp, -1))", {"x"}, 8192, h100, true, true},
        {"q = s / 2 - logsumexp(s / 2, -1); p = x / 2 - logsumexp(x / 2, -1); batchmean(sum(exp(q) * (q - p), -1) * 4)",
         {"x"}, 8192, h100, true, true},
        {"mean(max(sqrt(sum((x - s)^2, -1)) - sqrt(sum((x - z)^2, -1)) + 1, 0))", {"x", "s", "z"}, 8192, h100, true, true},
        {"a = amax(s, -1); b = mean(x - a, -1); mean(sum((x - b)^2, -1))", {}, 8192, h100, true, true},
        {"a = amax(s, -1); b = mean(x - a, -1); mean(sum((x - b)^2, -1))", {"x", "s"}, 8192, h100, true, true},
        // Automatic where a block takes each row and a walk merges a centered accumulator
        // (ByRowPrefetchCentered): layer norm; not where warps take them (4096 columns), not
        // cross-entropy or softmax (ByRowPrefetch), nor without a GPU known.
        {layer_norm, {}, 16384, h100, std::nullopt, true},
        {layer_norm, {"x"}, 16384, h100, std::nullopt, true},
        {layer_norm, {}, 16384, a100, std::nullopt, true},
        {layer_norm, {}, 4096, h100, std::nullopt, false},
        {layer_norm, {}, 16384, {}, std::nullopt, false},
        {cross_entropy, {"x"}, 32768, h100, std::nullopt, false},
        {softmax, {}, 32768, h100, std::nullopt, false},
        // On an H200 also where a block alone on its SM keeps its whole row (ByRowPrefetchAlone):
        // cross-entropy's value and gradient at 32768 and 49152 columns, cosine's over 16384, softmax
        // over 32768 (its forward walks twice too); not softmax over 16384 (three blocks an SM),
        // triplet (three inputs of 8192: two blocks), distillation over 32000 (two inputs: 250 KB of a
        // row, kept in part), warps' rows (4096), cross-entropy's forward (one walk: no cache).
        {cross_entropy, {"x"}, 32768, kH200, std::nullopt, true},
        {cross_entropy, {"x"}, 49152, kH200, std::nullopt, true},
        {cosine, {"x", "z"}, 16384, kH200, std::nullopt, true},
        {softmax, {}, 32768, kH200, std::nullopt, true},
        {softmax, {}, 16384, kH200, std::nullopt, false},
        {"mean(max(sqrt(sum((x - s)^2, -1)) - sqrt(sum((x - z)^2, -1)) + 1, 0))", {"x", "s", "z"}, 8192, kH200, std::nullopt, false},
        {"q = s / 2 - logsumexp(s / 2, -1); p = x / 2 - logsumexp(x / 2, -1); batchmean(sum(exp(q) * (q - p), -1) * 4)",
         {"x"}, 32000, kH200, std::nullopt, false},
        {cross_entropy, {"x"}, 4096, kH200, std::nullopt, false},
        {cross_entropy, {}, 32768, kH200, std::nullopt, false},
        // And where such a block keeps one input's row in part for a fused value and gradient
        // (ByRowPrefetchAlonePart): the cross-entropy family over 65536 columns (86% kept); not a map
        // (softmax), nor on the H100.
        {cross_entropy, {"x"}, 65536, kH200, std::nullopt, true},
        {"lp = (x - logsumexp(x, -1))[y]; mean(-(1 - exp(lp))^2 * lp)", {"x"}, 65536, kH200, std::nullopt, true},
        {softmax, {}, 65536, kH200, std::nullopt, false},
        {cross_entropy, {"x"}, 65536, h100, std::nullopt, false},
    };
    for (const Row& row : table) {
        CAPTURE(std::string(row.program));
        CAPTURE(row.columns);
        CAPTURE(to_string(row.dtype));
        Knobs knobs;
        knobs.row_prefetch = row.knob;
        knobs.row_cache = row.cache;
        const auto [program, layout, spec] = plan(row.program, row.wrt, {512, row.columns}, {512}, knobs, row.dtype, row.gpu);
        CHECK(spec.row_prefetch == row.prefetch);
        if (*row.note) {
            REQUIRE(spec.notes.size() == 1);
            CHECK(spec.notes[0].find(row.note) != std::string::npos);
        } else {
            CHECK(spec.notes.empty());
        }
        if (row.cluster) CHECK(spec.row_cluster == row.cluster);
        CHECK((spec.signature().find(spec.row_walk_ahead ? "next row walked ahead" : "next row prefetched") !=
               std::string::npos) == row.prefetch);
        if (!row.prefetch || spec.row_walk_ahead) continue;  // (walked ahead: the next test case)
        // Every walk reads the cache (none keeps it: the copies do), and one pass copies the next row in.
        const std::string source = emit_cuda(program, spec);
        CHECK(source.find("lj::cache_store<VW>") == std::string::npos);
        CHECK(source.find("lj::cache_load<VW>") != std::string::npos);
        CHECK(source.find("lj::prefetch_row<Team, VW>") != std::string::npos);
        CHECK(source.find("lj::cache_prefetch<VW>") != std::string::npos);
        CHECK(source.find("lj::cache_prefetch_wait();") != std::string::npos);
        // The next row's index (x[y]'s y), loaded at that row's start, is asked of L2 beforehand.
        CHECK((source.find("lj::prefetch_l2(dtype(") != std::string::npos) ==
              (std::string_view(row.program).find("[y]") != std::string_view::npos));
        CHECK(compile_cuda(source, row.gpu.arch >= 90 ? "sm_90" : "sm_80").is_cubin());
        // Teams take rows in turn: a resident grid, not a block a row.
        const Occupancy occupancy{.fits_per_sm = 1, .multiprocessors = 132};
        CHECK(kinds::by_rows_grid(program, spec, layout, occupancy).blocks <= 132u);
    }
}

TEST_CASE("a warp's rows of one input, values alone: unroll 8 on Hopper, on an H200 at most 64 registers") {
    // ByRowWarpUnrollOneInput, ByRowWarpOneInputMaxRegisters (docs/results/issue-31/stop66): the bound
    // keeps a heavier program (loss, z-loss and accuracy: 78 registers unbounded) at two blocks of
    // 512; it is not where the row cache or a block takes the row, nor for gradients or two inputs.
    const char* z_acc = "lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc";
    struct Row {
        const char* program;
        std::vector<std::string> wrt;
        long long columns;
        GpuFacts gpu;
        int block = 0;  // a knob's, where set
        int unroll;
        int min_blocks;
    };
    const std::vector<Row> table{
        {kCrossEntropy, {}, 4096, kH200, 0, 8, 2},
        {z_acc, {}, 4096, kH200, 0, 8, 2},
        {"mean(logsumexp(x, -1))", {}, 8192, kH200, 0, 8, 2},
        {"amax(x, -1)", {}, 2048, kH200, 0, 8, 2},  // a map of one value a row writes no element
        {kCrossEntropy, {}, 4096, kH200, 256, 8, 4},  // a knob's block: still 64 registers
        {kCrossEntropy, {}, 4096, kH200, 1024, 8, 1},
        {kCrossEntropy, {}, 4096, kH100, 0, 8, 1},
        {kCrossEntropy, {}, 4096, {}, 0, 4, 1},
        {kCrossEntropy, {"x"}, 4096, kH200, 0, 8, 1},   // the fused gradient keeps the row: the cache's numbers
        {kSoftmax, {}, 4096, kH200, 0, 8, 1},           // walks twice: the cache
        {"mean(sum(x * z, -1))", {}, 4096, kH200, 0, 4, 1},  // two inputs
        {kCrossEntropy, {}, 32768, kH200, 0, 2, 1},     // a block a row
    };
    for (const Row& row : table) {
        CAPTURE(std::string(row.program));
        CAPTURE(row.columns);
        CAPTURE(row.block);
        Knobs knobs;
        knobs.block_threads = row.block;
        const auto [program, layout, spec] = plan(row.program, row.wrt, {512, row.columns}, {512}, knobs, DType::float32, row.gpu);
        CHECK(spec.unroll == row.unroll);
        check_register_bound(emit_cuda(program, spec), spec, row.min_blocks);
    }
}

TEST_CASE("a block's row of several inputs, reduced alone: on an H200 registers for four blocks of 256") {
    // ByRowBlockSeveralInputsMaxRegisters (docs/results/issue-31/stop72): cosine's forward over 16384
    // columns took 73 registers unbounded (three blocks an SM). Not where a warp takes the row, the row
    // cache keeps it, the kernel writes elements (gradients, maps), one input is read along the row,
    // the walks are several or call exp or log at each element (bfloat16 distillation spilled), or the
    // loads in flight would not leave room under the bound (float64, unroll 8: those spill).
    const char* triplet = "mean(max(sqrt(sum((x - z)^2, -1)) - sqrt(sum((x - w)^2, -1)) + 1, 0))";
    struct Row {
        const char* program;
        std::vector<std::string> wrt;
        long long columns;
        GpuFacts gpu;
        Knobs knobs;
        DType dtype;
        int min_blocks;
    };
    const Knobs defaults;
    Knobs block512, unroll8, unroll2;
    block512.block_threads = 512;
    unroll8.unroll = 8;
    unroll2.unroll = 2;
    const std::vector<Row> table{
        {kCosine, {}, 16384, kH200, defaults, DType::float32, 4},
        {kCosine, {}, 65536, kH200, defaults, DType::float32, 4},
        {triplet, {}, 32768, kH200, defaults, DType::float32, 4},  // three inputs: 48 registers of loads
        {kCosine, {}, 16384, kH200, defaults, DType::bfloat16, 4},
        {kCosine, {}, 16384, kH200, block512, DType::float32, 2},  // a knob's block: still 64 registers
        {kCosine, {}, 16384, kH200, unroll2, DType::float32, 4},
        {kCosine, {}, 16384, kH200, unroll8, DType::float32, 1},   // 64 registers of loads
        {triplet, {}, 32768, kH200, defaults, DType::float64, 1},  // 96 registers of loads
        {kCosine, {}, 16384, kH100, defaults, DType::float32, 1},
        {kCosine, {}, 16384, {}, defaults, DType::float32, 1},
        {kCosine, {}, 4096, kH200, defaults, DType::float32, 1},     // a warp's row
        {kCosine, {"x"}, 16384, kH200, defaults, DType::float32, 1}, // the gradient: the row cache
        {"mean(logsumexp(x, -1))", {}, 16384, kH200, defaults, DType::float32, 1},  // one input
        {"x * z / sum(x * z, -1)", {}, 16384, kH200, defaults, DType::float32, 1},  // a map writes elements
        {"mean(sum(exp(x) * z, -1))", {}, 16384, kH200, defaults, DType::float32, 1},  // exp at each element
        {"mean(sum((x - mean(x, -1)) * z, -1))", {}, 16384, kH200, defaults, DType::float32, 1},  // two walks
    };
    for (const Row& row : table) {
        CAPTURE(std::string(row.program));
        CAPTURE(row.columns);
        CAPTURE(to_string(row.dtype));
        CAPTURE(row.gpu.memory_bytes);
        const auto [program, layout, spec] = plan(row.program, row.wrt, {512, row.columns}, {512}, row.knobs, row.dtype, row.gpu);
        const std::string source = emit_cuda(program, spec);
        check_register_bound(source, spec, row.min_blocks);
        if (row.min_blocks > 1) {
            // ptxas keeps the kernel in those registers without local memory.
            const KernelImage image = compile_cuda(source, "sm_90");
            REQUIRE(image.is_cubin());
            const auto resources = read_resources(image);
            REQUIRE(resources.has_value());
            CHECK(resources->registers <= 64);
            CHECK(resources->local_bytes == 0);
        }
    }
}

TEST_CASE("the registers knob bounds any kind's kernel, replacing the defaults' bound") {
    struct Row {
        const char* program;
        std::vector<std::string> wrt;
        Shape shape;
        GpuFacts gpu;
        int block;      // a knob's, where set
        int registers;  // the knob
        int min_blocks;
        int bound;      // KernelSpec::register_bound
    };
    const std::vector<Row> table{
        {kCosine, {}, {512, 16384}, kH100, 0, 64, 4, 64},        // no bound by default there
        {kCosine, {}, {512, 16384}, kH200, 0, 255, 1, 255},      // the H200's default bound dropped
        {kCosine, {}, {512, 16384}, kH200, 0, 48, 5, 51},        // 65536 / (5 x 256)
        {kCrossEntropy, {"x"}, {512, 32768}, kH200, 1024, 32, 2, 32},
        {"mean((x - z)^2)", {}, {4096, 4096}, kH100, 0, 64, 4, 64},      // the rows loop
        {"mean((x - z)^2)", {"x"}, {4096, 4096}, {}, 512, 64, 2, 64},    // the fused gradient, no GPU named
        {"x * z", {}, {4096, 4096}, kH100, 128, 32, 16, 32},             // a map: 2048 threads an SM
        {"x * z", {}, {4096, 4096}, kH100, 128, 255, 1, 255},            // no bound at 128 threads either
    };
    for (const Row& row : table) {
        CAPTURE(std::string(row.program));
        CAPTURE(row.registers);
        Knobs knobs;
        knobs.block_threads = row.block;
        knobs.max_registers = row.registers;
        const auto [program, layout, spec] = plan(row.program, row.wrt, row.shape, {row.shape[0]}, knobs, DType::float32, row.gpu);
        CHECK(spec.register_bound() == row.bound);
        const std::string source = emit_cuda(program, spec);
        check_register_bound(source, spec, row.min_blocks);
        CHECK(compile_cuda(source, "sm_90").is_cubin());
    }
    // A launch reports register_bound() (KernelInfo::knobs.max_registers); a tuning record replays it
    // as the knob, which must give the same bound back at every block size and blocks an SM the
    // hardware holds (a bound of 255 registers or more, e.g. 2 blocks of 128, is none: replayed so).
    for (int block : {32, 64, 128, 256, 384, 512, 1024}) {
        for (int blocks = 1; blocks * block <= 2048 && blocks <= kMaxBlocksPerSm; ++blocks) {
            CAPTURE(block);
            CAPTURE(blocks);
            KernelSpec ran;
            ran.block_threads = block;
            ran.min_blocks_per_sm = blocks;
            if (ran.register_bound() < kMinRegisterBound) continue;  // more blocks than the knob can ask for
            Knobs replayed;
            replayed.block_threads = block;
            replayed.max_registers = ran.register_bound();
            const auto [program, layout, spec] = plan("x * z", {}, {4096, 4096}, {4096}, replayed, DType::float32, kH100);
            CHECK(spec.min_blocks_per_sm == (ran.register_bound() == kMaxRegisters ? 1 : blocks));
        }
    }
}

TEST_CASE("an input only taken at a column of a warp's row is not one the walks load: class weights plan as cross-entropy") {
    // w[y] with w of [C] is laid out along the row but read at one column of it: where a warp takes
    // the row the walks load x alone, so the loads a thread keeps in flight and the values it holds
    // for the row cache are cross-entropy's; where a block takes it (32768 columns) they stay those of
    // two inputs along the row (docs/results/issue-31/stop67: one input's were slower there).
    const char* weighted = "l = logsumexp(x, -1) - x[y]; sum(w[y] * l) / sum(w[y])";
    for (const GpuFacts& gpu : {kH200, kH100, GpuFacts{}})
        for (long long columns : {2048LL, 4096LL, 8192LL})
            for (const std::vector<std::string>& wrt : {std::vector<std::string>{}, std::vector<std::string>{"x"}}) {
                CAPTURE(gpu.memory_bytes);
                CAPTURE(columns);
                CAPTURE(wrt.size());
                const Shape rows{16384, columns};
                const auto like = plan(kCrossEntropy, wrt, rows, {16384}, {}, DType::float32, gpu);
                const auto cw = plan(weighted, wrt, rows, {16384}, {}, DType::float32, gpu, {{"w", {columns}}});
                CHECK(cw.spec.inner_strides == std::vector<int>{1, 0, 1});  // w is along the row
                CHECK(cw.spec.unroll == like.spec.unroll);
                CHECK(cw.spec.block_threads == like.spec.block_threads);
                CHECK(cw.spec.team == like.spec.team);
                CHECK(cw.spec.row_cache_columns == like.spec.row_cache_columns);
                CHECK(cw.spec.min_blocks_per_sm == like.spec.min_blocks_per_sm);
            }
    // A warp's row of x and w (both walked) is two inputs'; a block's row of class weights too: its
    // forward unrolls 4 (cross-entropy's 2), its value and gradient keeps half the cached values (2).
    CHECK(plan("mean(logsumexp(x * w, -1) - x[y])", {}, {16384, 4096}, {16384}, {}, DType::float32, kH200,
               {{"w", {4096}}}).spec.unroll == 4);
    const Shape block_rows{16384, 32768};
    for (const GpuFacts& gpu : {kH200, kH100}) {
        CHECK(plan(kCrossEntropy, {}, block_rows, {16384}, {}, DType::float32, gpu).spec.unroll == 2);
        CHECK(plan(weighted, {}, block_rows, {16384}, {}, DType::float32, gpu, {{"w", {32768}}}).spec.unroll == 4);
        CHECK(plan(kCrossEntropy, {"x"}, block_rows, {16384}, {}, DType::float32, gpu).spec.unroll == 4);
        const auto fused = plan(weighted, {"x"}, block_rows, {16384}, {}, DType::float32, gpu, {{"w", {32768}}});
        CHECK(fused.spec.unroll == 2);
        CHECK(fused.spec.block_threads == 1024);
        CHECK(fused.spec.row_cache_columns > 0);
    }
    // Nor is w loaded in vectors: a w that starts off a 16-byte boundary leaves the kernel's vectors
    // (an x that does not, the kernel scalar).
    alignas(16) static float buffer[8];
    for (const std::vector<std::string>& wrt : {std::vector<std::string>{}, std::vector<std::string>{"x"}}) {
        const auto cw = plan(weighted, wrt, {16384, 4096}, {16384}, {}, DType::float32, kH200, {{"w", {4096}}});
        KernelOperands operands = KernelOperands::unplaced(cw.program);
        const auto slot = [&](const char* name) {
            return static_cast<std::size_t>(std::find(cw.program.inputs.begin(), cw.program.inputs.end(), name) -
                                            cw.program.inputs.begin());
        };
        operands.input_data[slot("w")] = buffer + 1;
        CHECK(KernelSpec::choose(cw.program, cw.layout, operands, {}, false, kH200).vector_width == 4);
        operands.input_data[slot("x")] = buffer + 1;
        CHECK(KernelSpec::choose(cw.program, cw.layout, operands, {}, false, kH200).vector_width == 1);
        // Rows of x that start at other columns of a vector (4099 columns): each row's first vector
        // is found from x's start, the row the walks load, never from w's, whose start is the same in
        // every row (w first among the inputs, the kernel's vectors of x's odd rows were misaligned:
        // the GPU differential's seed 222, program 116, where a [C] vector no walk reads came first).
        const auto shifted =
            plan(weighted, wrt, {16384, 4099}, {16384}, {}, DType::float32, kH200, {{"w", {4099}}}, {"w", "x", "y"});
        REQUIRE(shifted.spec.row_shift);
        CHECK(shifted.spec.inner_strides == std::vector<int>{1, 1, 0});  // w, x, y
        const std::string source = emit_cuda(shifted.program, shifted.spec);
        CHECK(source.find("lj::row_shift(base[1], C)") != std::string::npos);
        CHECK(compile_cuda(source, "sm_90").is_cubin());
    }
}

TEST_CASE("a warp's rows that 16 warps keep in part: on an H200 fewer warps, in fours, keep them whole") {
    // ByRowWarpWholeRows: 12 warps keeping rows of 4096 whole ran 5-8% faster than 16 keeping 89%
    // (docs/results/issue-31/stop68), though their loads keep 48 KB in flight, not 64: the cache stays.
    struct Row {
        const char* program;
        std::vector<std::string> wrt;
        long long columns;
        const GpuFacts* gpu;
        int block;               // threads a block
        bool warps;              // a warp a row
        bool whole;              // the row cache keeps whole rows
    };
    const Row table[] = {
        {kCrossEntropy, {"x"}, 4096, &kH200, 384, true, true},  // 12 x 16 KB
        {kCrossEntropy, {"x"}, 5120, &kH200, 256, true, true},  // 12 x 20 KB does not fit: 8
        {kCrossEntropy, {"x"}, 6144, &kH200, 256, true, true},
        {kSoftmax, {}, 4096, &kH200, 384, true, true},          // a map's forward walks twice too
        {kCrossEntropy, {"x"}, 2048, &kH200, 512, true, true},  // 16 already keep them whole
        {kCrossEntropy, {"x"}, 8192, &kH200, 128, false, true}, // 8 x 32 KB does not fit: a block a row, as before
        {kCrossEntropy, {"x"}, 4096, &kH100, 512, true, false}, // not measured on an H100: 16 warps, 89% kept
    };
    for (const Row& row : table) {
        CAPTURE(row.program);
        CAPTURE(row.columns);
        CAPTURE(row.gpu->memory_bytes);
        const auto p = plan(row.program, row.wrt, {16384, row.columns}, {16384}, {}, DType::float32, *row.gpu);
        CHECK(p.spec.block_threads == row.block);
        CHECK((p.spec.team == kWarpThreads) == row.warps);
        CHECK(p.spec.row_cache_inputs == 1);
        CHECK((p.spec.row_cache_columns == row.columns) == row.whole);
    }
    // Not where 16 warps keep no cache: bfloat16 logits, whose loads keep half the bytes in flight.
    const auto bf16 = plan(kCrossEntropy, {"x"}, {16384, 4096}, {16384}, {}, DType::bfloat16, kH200);
    CHECK(bf16.spec.block_threads == 512);
    CHECK(bf16.spec.row_cache_columns == 0);
    // A block size asked for is kept (and with it main's 16 warps keeping part of each row).
    Knobs threads512;
    threads512.block_threads = 512;
    const auto asked = plan(kCrossEntropy, {"x"}, {16384, 4096}, {16384}, threads512, DType::float32, kH200);
    CHECK(asked.spec.block_threads == 512);
    CHECK(asked.spec.row_cache_columns > 0);
    CHECK(asked.spec.row_cache_columns < 4096);
}

TEST_CASE("the row prefetch walks the next row ahead where the first walk only reduces the kept inputs") {
    // KernelSpec::row_walk_ahead: the last walk reads the next row itself, does the first walk's work on
    // it and keeps it in the cache, instead of copying it in; its first tile is loaded before the merges.
    const GpuFacts& h100 = kH100;
    const char* layer_norm = "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)";
    struct Row {
        const char* program;
        std::vector<std::string> wrt;
        long long columns;
        GpuFacts gpu;
        std::optional<bool> knob;
        bool ahead;
    };
    const Row table[] = {
        // Automatic on an H200 where the prefetch is (a block alone on its SM keeping its whole row)
        // for a fused value and gradient of at most 512 threads (ByRowWalkAheadMaxThreads): cosine.
        {kCosine, {"x", "z"}, 16384, kH200, std::nullopt, true},
        // At 1024 threads where the walk ahead picks every take of the row out of the walk
        // (ByRowWalkAheadPickedMaxThreads): cross-entropy's x[y]. Not where a take's owner reads it
        // at the row's start (class weights' w[y]; label smoothing's and focal's (x - lse)[y]), nor
        // a map (softmax): copied.
        {kCrossEntropy, {"x"}, 32768, kH200, std::nullopt, true},
        {"mean(w[y] * (logsumexp(x, -1) - x[y]))", {"x"}, 32768, kH200, std::nullopt, false},
        {"lp = x - logsumexp(x, -1); mean(-0.9 * lp[y] - 0.1 * mean(lp, -1))", {"x"}, 32768, kH200, std::nullopt, false},
        {"lp = (x - logsumexp(x, -1))[y]; mean(-(1 - exp(lp))^2 * lp)", {"x"}, 32768, kH200, std::nullopt, false},
        {kSoftmax, {}, 32768, kH200, std::nullopt, false},
        // Asked for: warps' rows, two kept inputs (distillation), cosine on an H100, label smoothing (the
        // sum of its take's adjoint in closed form, no walk).
        {kCrossEntropy, {"x"}, 4096, h100, true, true},
        {"lp = x - logsumexp(x, -1); mean(-0.9 * lp[y] - 0.1 * mean(lp, -1))", {"x"}, 8192, h100, true, true},
        {"q = s / 2 - logsumexp(s / 2, -1); p = x / 2 - logsumexp(x / 2, -1); batchmean(sum(exp(q) * (q - p), -1) * 4)",
         {"x"}, 8192, h100, true, true},
        {kCosine, {"x", "z"}, 8192, h100, true, true},
        {kCrossEntropy, {"x"}, 32768, h100, true, false},  // (1024 threads)
        // Copied instead: a first walk that needs a value of its row (x[y]) or compares its columns with
        // the row's index (a take of log_softmax under a where of each element: its adjoint, summed
        // for the logsumexp's, is guarded column by column), one that reads an input
        // the cache does not keep (amax(s) walks s once), a mean and its squared deviations in one
        // accumulator (layer norm: the accumulator is not the first walk's alone).
        {"mean(logsumexp(x - x[y], -1))", {"x"}, 8192, h100, true, false},
        {"mean(where(x > 0, x - logsumexp(x, -1), 0)[y])", {"x"}, 8192, h100, true, false},
        {"a = amax(s, -1); mean(sum((x - a)^2, -1))", {"x"}, 8192, h100, true, false},
        {layer_norm, {"x"}, 16384, h100, std::nullopt, false},
        // No prefetch, no walk ahead: the H100's defaults.
        {kCosine, {"x", "z"}, 16384, h100, std::nullopt, false},
    };
    for (const Row& row : table) {
        CAPTURE(std::string(row.program));
        CAPTURE(row.columns);
        Knobs knobs;
        knobs.row_prefetch = row.knob;
        const auto [program, layout, spec] = plan(row.program, row.wrt, {512, row.columns}, {512}, knobs, DType::float32, row.gpu);
        CHECK(spec.row_walk_ahead == row.ahead);
        if (!spec.row_prefetch) continue;
        CHECK(spec.signature().find(row.ahead ? "next row walked ahead" : "next row prefetched") != std::string::npos);
        const std::string source = emit_cuda(program, spec);
        // Walked ahead: no copies; the team's first row keeps its row as without the prefetch, the
        // last walk loads the next row into the carried registers and adds its first walk there.
        CHECK((source.find("lj::cache_prefetch<VW>") == std::string::npos) == row.ahead);
        CHECK((source.find("ahead.w[u]") != std::string::npos) == row.ahead);
        CHECK((source.find("lj::add_tile_group(ahead.a") != std::string::npos) == row.ahead);
        CHECK((source.find("after_next_base_") != std::string::npos) == row.ahead);
        // A take walked ahead (x[y]) is read from the cache by the lane whose columns hold it and
        // passed to the others through shared memory (takes_by_owner), not read from memory by each.
        // (lp[y] of label smoothing waits for the row's logsumexp: read after the first walk.)
        const bool takes = std::string(row.program).find("x[y]") != std::string::npos;
        CHECK((source.find("takes_[Team::team_in_block()][take_parity_]") != std::string::npos) == (row.ahead && takes));
        // x[y] itself is picked out of the walk ahead by the lane whose tile holds the next row's
        // column y (and by the team's first walk); walked ahead, a row's index is loaded a row
        // ahead (row_values_ahead), so that a row's start loads nothing (picked_take).
        const bool picked = std::string(row.program).find(" x[y]") != std::string::npos;
        CHECK((source.find("take_slots<Team>()[Team::team_in_block()][ahead.take_parity]") != std::string::npos) ==
              (row.ahead && picked));
        const bool indexed = std::string(row.program).find("[y]") != std::string::npos;
        CHECK((source.find("ahead.index") != std::string::npos) == (row.ahead && indexed));
        // Its slot's parity is carried from row to row, not divided out of the row (a 64-bit
        // division's call made every lane wait at each row's start for the loads in flight).
        CHECK((source.find("ahead.take_parity ^= 1") != std::string::npos) == (row.ahead && takes));
        CHECK(source.find("/ Team::row_step()") == std::string::npos);
        CHECK(source.find("lj::cache_load<VW>") != std::string::npos);
        CHECK(compile_cuda(source, "sm_90").is_cubin());
    }
}

TEST_CASE("the row cache of rows side by side: whole rows where the SM still holds threads enough") {
    const GpuFacts& h100 = kH100;
    const char* rms = "x / sqrt(mean(x^2, 1) + 1e-5)";
    const char* cross_entropy = "mean(logsumexp(x, 1) - x[y])";  // K-dimensional: classes along dimension 1
    const char* cosine = "mean(1 - sum(x * z, 1) / sqrt(sum(x * x, 1) * sum(z * z, 1)))";
    struct Row {
        const char* program;
        std::vector<std::string> wrt;
        Shape shape;  // x's (and z's); y is x's without dimension 1
        GpuFacts gpu;
        std::optional<bool> knob;
        long long cached_columns;  // 0: no cache
        int cached_inputs;
        int block, team, unroll, min_blocks;  // where cached (0: any)
        DType dtype = DType::float32;
        const char* note = "";
    };
    const Row table[] = {
        // A thread a row, 64 threads a block (ByRowSideCachedThreads), 256 bytes a thread: 13 blocks
        // an SM (227 KB + 1 KB the driver keeps a block), registers for 13, unroll 8.
        {rms, {}, {64, 64, 4096}, h100, std::nullopt, 64, 1, 64, 1, 8, 13},
        {rms, {}, {64, 64, 4096}, h100, false, 0, 0, 0, 0, 0, 0},
        // 128 features: 6 blocks, 384 threads (ByRowSideCachedMinThreadsPerSm); 256: 192, not automatic.
        {rms, {}, {64, 128, 4096}, h100, std::nullopt, 128, 1, 64, 1, 8, 6},
        {rms, {}, {64, 256, 4096}, h100, std::nullopt, 0, 0, 0, 0, 0, 0},
        {rms, {}, {64, 256, 4096}, h100, true, 256, 1, 64, 1, 8, 3},
        // float64 arithmetic: 8 bytes a column.
        {rms, {}, {64, 64, 4096}, h100, std::nullopt, 64, 1, 64, 1, 8, 6, DType::float64},
        // Fewer rows: 8 x 4096 rows take two threads each (ByRowSideTeamBlocksPerSm blocks an SM), 32
        // rows a block of 64, and lj::SideTeam merges their halves through shared memory (1 KB).
        {rms, {}, {8, 128, 4096}, h100, std::nullopt, 128, 1, 64, 2, 8, 12},
        // Rows longer than a block holds: its leading columns where asked for (227 - 8 - 1 KB for 32
        // rows of 4 bytes).
        {rms, {}, {8, 3000, 4096}, h100, std::nullopt, 0, 0, 0, 0, 0, 0},
        {rms, {}, {8, 3000, 4096}, h100, true, (218 * 1024) / (4 * 32) / 4 * 4, 1, 64, 2, 0, 0},
        // No GPU known (lossjit emit): 48 KB a block, 2 blocks of 64: not automatic; asked for, whole.
        {rms, {}, {64, 64, 4096}, {}, std::nullopt, 0, 0, 0, 0, 0, 0},
        {rms, {}, {64, 64, 4096}, {}, true, 64, 1, 64, 1, 8, 2},
        // K-dimensional cross-entropy's value and gradient: the logits walked by both (100 classes).
        {cross_entropy, {"x"}, {512, 100, 1024}, h100, std::nullopt, 100, 1, 64, 1, 8, 8},
        // 21 classes: 32 blocks of 64 fit the shared memory, registers for 16 (ByRowSideCachedMinRegisters).
        {cross_entropy, {"x"}, {512, 21, 1024}, h100, std::nullopt, 24, 1, 64, 1, 8, 16},
        {cross_entropy, {}, {512, 100, 1024}, h100, true, 0, 0, 0, 0, 0, 0, DType::float32,
         "no input is read by more than one walk"},
        // Cosine along dimension 1, value and gradients: two inputs kept.
        {cosine, {"x", "z"}, {512, 64, 1024}, h100, std::nullopt, 64, 2, 64, 1, 8, 6},
        // A reduction that walks once.
        {"mean(sum(x, 1))", {}, {64, 64, 4096}, h100, true, 0, 0, 0, 0, 0, 0, DType::float32,
         "no input is read by more than one walk"},
    };
    for (const Row& row : table) {
        CAPTURE(std::string(row.program));
        CAPTURE(row.shape);
        CAPTURE(row.knob.value_or(false));
        Knobs knobs;
        knobs.row_cache = row.knob;
        const auto [program, layout, spec] =
            plan(row.program, row.wrt, row.shape, {row.shape[0], row.shape[2]}, knobs, row.dtype, row.gpu);
        REQUIRE(spec.side_by_side);
        check_cache_bytes(spec, row.cached_columns, row.cached_inputs);
        if (*row.note) {
            REQUIRE(spec.notes.size() == 1);
            CHECK(spec.notes[0].find(row.note) != std::string::npos);
        }
        if (spec.row_cache_columns == 0) continue;
        if (row.block) CHECK(spec.block_threads == row.block);
        if (row.team) CHECK(spec.team == row.team);
        if (row.unroll) CHECK(spec.unroll == row.unroll);
        if (row.min_blocks) CHECK(spec.min_blocks_per_sm == row.min_blocks);
        const std::string source = emit_cuda(program, spec);
        CHECK(source.find("Team::template team_cache<" + std::to_string(row.cached_inputs) + ">") != std::string::npos);
        CHECK(source.find("lj::cache_store<VW>(Team::cache_at(") != std::string::npos);
        CHECK(compile_cuda(source, "sm_90").is_cubin());
    }
}

TEST_CASE("a thread alone on its row keeps 8 loads in flight, 4 where it compares, 8 where it writes every element") {
    // KernelBench 47-53's reductions over dimension 1 (defaults ByRowSideAloneUnroll,
    // ByRowSideAloneCompareUnroll, ByRowSideTeamUnroll; docs/results/issue-29/stop52/round125/).
    const GpuFacts h100{.arch = 90, .multiprocessors = 132, .memory_bytes_per_second = 3.35e12};
    const std::pair<const char*, int> table[] = {
        {"sum(x, 1)", 8},    {"mean(x, 1)", 8},   {"amax(x, 1)", 4},
        {"amin(x, 1)", 4},   {"argmax(x, 1)", 4}, {"argmin(x, 1)", 4},
        {"amax(x, 1) - amin(x, 1)", 4},                // compares
        {"x / sqrt(mean(x^2, 1) + 1e-5)", 8},           // writes every element (ByRowSideTeamUnroll)
    };
    for (const auto& [text, unroll] : table) {
        CAPTURE(std::string(text));
        const auto [program, layout, spec] = plan(text, {}, {128, 4096, 4095}, {}, {}, DType::float32, h100);
        REQUIRE(spec.side_by_side);
        CHECK(spec.unroll == unroll);
    }
}

TEST_CASE("row clusters: few long rows take a cluster's blocks each, with or without a row cache") {
    const GpuFacts& h100 = kH100;
    const GpuFacts h100_no_clusters{.arch = 80, .multiprocessors = 132, .shared_bytes_per_block = 227 * 1024};
    const char* layer_norm = "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)";
    const char* cross_entropy = "mean(logsumexp(x, -1) - x[y])";
    struct Row {
        const char* program;
        std::vector<std::string> wrt;
        long long rows, columns;
        GpuFacts gpu;
        int knob;     // Knobs::row_cluster (0: automatic)
        int cluster;  // KernelSpec::row_cluster
        const char* note = "";
    };
    const Row table[] = {
        // KernelBench's layer norm: 16 rows of 4M; 16 x 8 blocks is as close to 132 SMs as 8 comes.
        {layer_norm, {}, 16, 1LL << 22, h100, 0, 8},
        {layer_norm, {}, 40, 1LL << 22, h100, 0, 4},   // 160 blocks
        {layer_norm, {}, 66, 1LL << 22, h100, 0, 2},   // 132
        {layer_norm, {}, 67, 1LL << 22, h100, 0, 1},   // more than half the SMs a row each
        {layer_norm, {}, 16, 1LL << 22, h100, 1, 1},   // asked for a block a row
        {layer_norm, {}, 16, 1LL << 22, h100, 2, 2},
        {layer_norm, {}, 512, 1LL << 22, h100, 4, 4},  // asked for, many rows
        {layer_norm, {}, 16, 1LL << 22, h100_no_clusters, 0, 1},
        {layer_norm, {}, 16, 1LL << 22, h100_no_clusters, 4, 1, "a row cluster of 4 blocks was asked for"},
        // Rows a warp takes: no cluster.
        {layer_norm, {}, 16, 4096, h100, 0, 1},
        // Block teams whose rows are too short for each block of a larger cluster to walk
        // ByRowClusterMinTiles tiles (a value alone: no row cache): 20000 columns take 2, 10000 none.
        {"mean(logsumexp(x, -1))", {}, 8, 20000, h100, 0, 2},
        {"mean(logsumexp(x, -1))", {}, 8, 10000, h100, 0, 1},
        // Rows a row cache holds whole: a block a row keeps them.
        {layer_norm, {}, 16, 8192, h100, 0, 1},
        // Cross-entropy's value and gradient over rows no cache holds a quarter of; its value alone.
        {cross_entropy, {"x"}, 16, 1LL << 20, h100, 0, 8},
        {cross_entropy, {}, 8, 1LL << 20, h100, 0, 8},
        {cross_entropy, {}, 100, 1LL << 20, h100, 0, 1},
    };
    for (const Row& row : table) {
        CAPTURE(std::string(row.program));
        CAPTURE(row.rows);
        CAPTURE(row.columns);
        CAPTURE(row.knob);
        Knobs knobs;
        knobs.row_cluster = row.knob;
        const auto [program, layout, spec] =
            plan(row.program, row.wrt, {row.rows, row.columns}, {row.rows}, knobs, DType::float32, row.gpu);
        CHECK(spec.row_cluster == row.cluster);
        if (row.columns > 8192) CHECK(spec.row_cache_columns == 0);
        if (*row.note) {
            REQUIRE(spec.notes.size() == 1);
            CHECK(spec.notes[0].find(row.note) != std::string::npos);
        }
        // Every block of every cluster runs: whole clusters, one for each row.
        if (spec.row_cluster > 1) {
            CHECK(KernelSpec::blocks(spec, layout) == row.rows * spec.row_cluster);
            const std::string source = emit_cuda(program, spec);
            CHECK(source.find("__cluster_dims__(" + std::to_string(spec.row_cluster) + ", 1, 1)") != std::string::npos);
            CHECK(source.find("lj::cache_load") == std::string::npos);
            CHECK(compile_cuda(source, "sm_90").is_cubin());
        }
    }
}

TEST_CASE("a block's rows beyond the partial sums' slots: on an H200 a resident grid takes them in turn") {
    // ByRowBlockTeamResidentGrid (docs/results/issue-31/stop79): where a reduction's rows outnumber
    // its slots (132 SMs x 32 / totals), each block takes several rows; an H200 then launches the
    // resident grid, other GPUs a block a slot. Rows within the slots keep a block a row; clusters
    // and warps are left as they were, the row prefetch's teams take rows in turn anyway; the
    // blocks_per_sm knob caps as before.
    const Occupancy four{.fits_per_sm = 4, .multiprocessors = 132};
    const Occupancy one{.fits_per_sm = 1, .multiprocessors = 132};
    const Occupancy capped{.fits_per_sm = 4, .max_blocks_per_sm = 2, .multiprocessors = 132};
    const char* two_totals = "mean(logsumexp(x, -1) - x[y]) + mean(logsumexp(x, -1)^2)";
    struct Row {
        const char* program;
        std::vector<std::string> wrt;
        long long rows, columns;
        const GpuFacts& gpu;
        const Occupancy& occupancy;
        bool resident;  // KernelSpec::resident_grid
        unsigned blocks;
        DType dtype = DType::float32;
    };
    const Row rows[] = {
        {kCosine, {}, 16384, 16384, kH200, four, true, 528},            // 3.9 rows a slot: resident
        {kCosine, {}, 16384, 16384, kH100, four, false, 4224},          // a block a slot
        {kCrossEntropy, {}, 16384, 32768, kH200, four, true, 528},
        {kCrossEntropy, {}, 16384, 32768, kH100, four, false, 4224},
        {kCrossEntropy, {}, 4096, 32768, kH200, four, true, 4096},      // within the slots: a block a row
        {two_totals, {}, 4096, 32768, kH200, four, true, 528},          // two totals: 2112 slots
        {two_totals, {}, 4096, 32768, kH100, four, false, 2112},
        {kCosine, {}, 16384, 16384, kH100, capped, false, 264},         // the knob's cap, as before
        {kCrossEntropy, {"x"}, 4096, 131072, kH200, four, false, 4224}, // clusters of 4: a block a slot
        {kCrossEntropy, {"x"}, 16384, 32768, kH200, one, true, 132, DType::bfloat16},   // a fused gradient, no prefetch
        {kCrossEntropy, {"x"}, 16384, 32768, kH100, one, false, 4224, DType::bfloat16},
        {kCrossEntropy, {"x"}, 16384, 32768, kH200, one, false, 132},   // the prefetch's teams: in turn anyway
        {kCrossEntropy, {}, 32768, 4096, kH200, four, false, 528},      // warps: resident, as before
    };
    for (const auto& row : rows) {
        CAPTURE(row.program);
        CAPTURE(row.rows);
        CAPTURE(row.columns);
        CAPTURE(to_string(gpu_class(row.gpu)));
        CAPTURE(to_string(row.dtype));
        const auto [program, layout, spec] = plan(row.program, row.wrt, {row.rows, row.columns}, {row.rows}, Knobs{},
                                                  row.dtype, row.gpu);
        CHECK(spec.resident_grid == row.resident);
        CHECK(kinds::by_rows_grid(program, spec, layout, row.occupancy).blocks == row.blocks);
    }
}

TEST_CASE("a row team asked for where no team takes a row is noted, not silently dropped") {
    const GpuFacts& h100 = kH100;
    struct Row {
        const char* program;
        Shape shape;
        const char* note;
    };
    const Row rows[] = {
        {"mean((x - 1)^2)", {64, 4096}, "a row team was asked for, but the program does not reduce along rows"},
        {"x / sqrt(mean(x^2, 1) + 1e-5)", {64, 64, 4096}, "a row team was asked for, but rows side by side"},
    };
    for (const Row& row : rows) {
        CAPTURE(row.program);
        for (RowTeam team : {RowTeam::Warp, RowTeam::Block}) {
            Knobs knobs;
            knobs.row_team = team;
            const auto planned = plan(row.program, {}, row.shape, {}, knobs, DType::float32, h100);
            REQUIRE(planned.spec.notes.size() == 1);
            CHECK(planned.spec.notes[0].find(row.note) != std::string::npos);
        }
    }
}

TEST_CASE("the row cache: one source for every row length; a tuning record's knobs replay the kernel it timed") {
    const auto softmax = check(parse("exp(x - logsumexp(x, -1))", "expr"), {});
    const GpuFacts& h100 = kH100;
    auto spec_for = [&](long long columns, const Knobs& knobs) {
        const OperandShape x{"x", {4096, columns}, {}};
        return KernelSpec::choose(softmax, plan_program_layout(softmax, std::vector{x}, nullptr),
                                  KernelOperands::unplaced(softmax), knobs, false, h100);
    };
    // Rows of 10240 and 12288: the same source (a block of 128 threads a row), other launch sizes.
    const KernelSpec a = spec_for(10240, {}), b = spec_for(12288, {});
    REQUIRE(a.row_cache_columns == 10240);
    REQUIRE(b.row_cache_columns == 12288);
    CHECK(a.dynamic_shared_bytes() != b.dynamic_shared_bytes());
    CHECK(emit_cuda(softmax, a) == emit_cuda(softmax, b));
    // Rows of 8192 go to the block (the warps would keep 43% of theirs), of 128 threads, and so they
    // do with the threads, items, vector width and team a tuning record holds (a block of 128 set by
    // hand alone takes warps: 4 of them keep their rows).
    const KernelSpec automatic = spec_for(8192, {});
    CHECK(automatic.block_threads == 128);
    Knobs recorded;
    recorded.block_threads = automatic.block_threads;
    recorded.items_per_thread = automatic.unroll * automatic.vector_width;
    recorded.vector_width = automatic.vector_width;
    recorded.row_cache = true;
    CHECK(spec_for(8192, recorded).team == kWarpThreads);
    recorded.row_team = RowTeam::Block;
    const KernelSpec replayed = spec_for(8192, recorded);
    CHECK(automatic.team == automatic.block_threads);
    CHECK(replayed.team == automatic.team);
    CHECK(emit_cuda(softmax, replayed) == emit_cuda(softmax, automatic));
}

}  // TEST_SUITE
