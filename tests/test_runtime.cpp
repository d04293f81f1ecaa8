// runtime: the parts of a launch that need no GPU. Plans are found by layout (shapes, strides,
// alignment) among a bounded few; a stream's kernel arguments follow the kernels' parameter order;
// and, without a GPU, calls from many threads on many streams each fail on their own, while
// set_param and the read-only calls go on beside them.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "lossjit/lossjit.hpp"
#include "jit/compile.hpp"
#include "runtime/kernels.hpp"
#include "runtime/plans.hpp"
#include "runtime/scratch.hpp"

using namespace lossjit;

namespace {

// A plan for these shapes (contiguous) as make_plan records them: null data counts as aligned.
std::shared_ptr<const Plan> plan_for(std::vector<Shape> shapes) {
    auto plan = std::make_shared<Plan>();
    for (auto& shape : shapes) {
        plan->alignment |= std::uint64_t{1} << plan->inputs.shapes.size();
        plan->alignment8 |= std::uint64_t{1} << plan->inputs.shapes.size();
        plan->dtypes.push_back(DType::float32);
        plan->inputs.shapes.push_back(std::move(shape));
        plan->inputs.strides.emplace_back();
    }
    plan->dtypes.push_back(DType::float32);  // the result
    return plan;
}

std::shared_ptr<const Plan> find(const PlanCache& cache, const std::vector<TensorView>& inputs,
                                 const OutputView* output = nullptr) {
    return cache.find(CallViews{inputs, output, DType::float32, {}});
}

std::vector<TensorView> views(const std::vector<Shape>& shapes, const void* data = nullptr) {
    std::vector<TensorView> out;
    for (const auto& shape : shapes) out.push_back(TensorView::contiguous(data, shape));
    return out;
}

}  // namespace

TEST_SUITE("runtime") {

TEST_CASE("plans are found by shapes, strides, dtypes and alignment, most recent first, a few of them") {
    PlanCache cache;
    CHECK_FALSE(find(cache, views({{4, 4}})));
    const auto square = plan_for({{4, 4}});
    cache.add(square);
    CHECK(find(cache, views({{4, 4}})) == square);
    CHECK_FALSE(find(cache, views({{4, 5}})));  // another shape
    CHECK_FALSE(find(cache, views({{4, 4}, {4}})));  // another number of inputs
    TensorView transposed{nullptr, DType::float32, {4, 4}, {1, 4}};
    CHECK_FALSE(find(cache, std::vector<TensorView>{transposed}));  // other strides
    const TensorView bf16{nullptr, DType::bfloat16, {4, 4}, {}};
    CHECK_FALSE(find(cache, std::vector<TensorView>{bf16}));  // another dtype: another kernel
    CHECK_FALSE(cache.find(CallViews{views({{4, 4}}), nullptr, DType::float64, {}}));  // another result dtype
    alignas(16) static float data[8];
    CHECK(find(cache, views({{4, 4}}, data)) == square);
    CHECK_FALSE(find(cache, views({{4, 4}}, data + 1)));  // not 16-byte aligned: maybe another variant
    // bfloat16 aligned for 4 elements (8 bytes) but not for 8 (16 bytes): another plan than for 16-byte aligned data.
    const TensorView bf16_at_16{data, DType::bfloat16, {4, 4}, {}};
    const TensorView bf16_at_8{data + 2, DType::bfloat16, {4, 4}, {}};
    PlanCache typed;
    auto wide = plan_for({{4, 4}});
    std::const_pointer_cast<Plan>(wide)->dtypes.front() = DType::bfloat16;
    typed.add(wide);
    CHECK(find(typed, std::vector<TensorView>{bf16_at_16}) == wide);
    CHECK_FALSE(find(typed, std::vector<TensorView>{bf16_at_8}));
    const OutputView output = OutputView::contiguous(nullptr, {4, 4});
    CHECK_FALSE(find(cache, views({{4, 4}}), &output));  // a map's plan records its output too

    // Alternating layouts stay planned; past a few, the oldest is dropped.
    std::vector<std::shared_ptr<const Plan>> plans;
    for (std::int64_t n = 1; n <= 9; ++n) {
        plans.push_back(plan_for({{n}}));
        cache.add(plans.back());
    }
    CHECK_FALSE(find(cache, views({{4, 4}})));
    CHECK_FALSE(find(cache, views({{1}})));
    for (std::int64_t n = 2; n <= 9; ++n) CHECK(find(cache, views({{n}})) == plans[static_cast<std::size_t>(n - 1)]);
}

TEST_CASE("the kernel's parameters: one list for the emitted signature and the bound arguments") {
    // The list for each kind of kernel, and the signature printed from it.
    const auto checked = [](const std::string& text) { return check(parse(text, "expr"), {}); };
    using P = Parameter;
    KernelSpec rows;
    const auto reduction = checked("param k = 2; mean(k * x)");
    CHECK(kernel_parameters(reduction, rows) == std::vector<P>{P::Extents, P::Inputs, P::Param, P::ReduceOut});
    CHECK(parameter_list(kernel_parameters(reduction, rows), reduction, "Element") ==
          "const lj::Extents extents, const lj::Inputs<Element::kInputs> in,\n    const double param_k,\n"
          "    const lj::ReduceOut out");
    const auto map = checked("x * 2");
    CHECK(kernel_parameters(map, rows) == std::vector<P>{P::Extents, P::Inputs, P::Output});
    const auto gradients = differentiate(checked("mean(x * y)"), std::vector<int>{0, 1}, {});
    KernelSpec summed;
    summed.summed = {KernelSpec::NotSummed, KernelSpec::OverAll};
    CHECK(kernel_parameters(gradients, summed) == std::vector<P>{P::Extents, P::Inputs, P::ReduceOut, P::Grads, P::SumScratch});
    KernelSpec by_row;
    by_row.loop = KernelSpec::Loop::ByRow;
    const auto rows_program = checked("sum(logsumexp(x, -1))");
    CHECK(kernel_parameters(rows_program, by_row) == std::vector<P>{P::Extents, P::Inputs, P::RowsOut});
    CHECK(kernel_parameters(checked("x - logsumexp(x, -1)"), by_row) == std::vector<P>{P::Extents, P::Inputs, P::Output});
}

TEST_CASE("a stream's kernel arguments follow the kernels' parameters") {
    auto reduction = std::make_shared<Plan>();
    reduction->layout.count = 12;
    reduction->layout.dims = {3, 4};
    reduction->layout.inputs.resize(2);
    reduction->slots = {1};  // the program reads only its second input
    reduction->params = 2;
    reduction->divisor = 12;
    using P = Parameter;
    reduction->parameters = {P::Extents, P::Inputs, P::Param, P::Param, P::ReduceOut};
    LaunchArgs args;
    args.bind(reduction);
    // extents, inputs, one per parameter, the reduction's output
    void** list = args.data();
    const auto* extents = static_cast<const abi::Extents*>(list[0]);
    CHECK(extents->count == 12);
    CHECK((extents->dims[0] == 3 && extents->dims[1] == 4));
    CHECK(list[2] == &args.params[0]);
    CHECK(list[3] == &args.params[1]);
    CHECK(list[4] == &args.reduce);
    CHECK(args.reduce.scale == doctest::Approx(1.0 / 12));

    auto gradients = std::make_shared<Plan>(*reduction);
    gradients->derivatives = 2;
    gradients->spec.loop = KernelSpec::Loop::Columns;
    gradients->spec.summed = {KernelSpec::NotSummed, KernelSpec::OverRows};
    gradients->grid.chunks = 3;
    gradients->grid.chunk_rows = 5;
    gradients->grid.strip_blocks = 2;
    gradients->parameters = {P::Extents, P::Inputs, P::Param, P::Param, P::ReduceOut, P::Grads, P::SumScratch};
    args.bind(gradients);  // rebinding another plan: everything follows it
    list = args.data();
    CHECK(list[4] == &args.reduce);
    CHECK(list[5] == args.grads.data());
    CHECK(args.grads.size() == 2 + kMaxRank + 2 + kMaxTotals);  // pointers, strides, upstream and factor pointers, scales
    CHECK(list[6] == &args.sums);
    CHECK((args.sums.chunks == 3 && args.sums.chunk_rows == 5 && args.sums.strip_blocks == 2));

    auto row_sums = std::make_shared<Plan>(*gradients);  // the rows loop with a sum takes the scratch too
    row_sums->spec.loop = KernelSpec::Loop::Rows;
    row_sums->spec.summed = {KernelSpec::OverAll, KernelSpec::NotSummed};
    args.bind(row_sums);
    CHECK(args.data()[6] == &args.sums);
    auto no_sums = std::make_shared<Plan>(*row_sums);
    no_sums->spec.summed.clear();
    no_sums->parameters.pop_back();
    args.bind(no_sums);
    CHECK(args.data()[5] == args.grads.data());  // and nothing after the gradients

    auto map = std::make_shared<Plan>(*reduction);
    map->map_forward = true;
    map->parameters.back() = P::Output;
    args.bind(map);
    CHECK(args.data()[4] == &args.output);
}

TEST_CASE("without a GPU, many threads on many streams each fail on their own; nothing waits for them") {
    std::string why;
    if (cuda_available(&why)) return;  // on a GPU the gpu suite launches from several streams at once
    Options options;
    options.inputs = {"p", "t"};
    Loss loss = compile("param beta = 1; mean(beta * (p - t)^2)", options);
    alignas(16) static float p[64], t[64];
    const std::vector<TensorView> good{TensorView::contiguous(p, {8, 8}), TensorView::contiguous(t, {8, 8})};
    const std::vector<TensorView> wrong{TensorView::contiguous(p, {8, 8})};

    constexpr int kThreads = 8;
    std::atomic<int> cuda_errors{0}, usage_errors{0}, other{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
        threads.emplace_back([&, i] {
            const auto stream = reinterpret_cast<Stream>(static_cast<std::uintptr_t>(0x1000 * (i + 1)));
            for (int round = 0; round < 20; ++round) {
                try {
                    if (i % 2 == 0) (void)loss(good, stream);
                    else loss.evaluate(wrong, reinterpret_cast<float*>(p), stream);
                    ++other;
                } catch (const CudaError&) {
                    ++cuda_errors;
                } catch (const UsageError&) {
                    ++usage_errors;
                }
                loss.set_param("beta", static_cast<double>(round));
                (void)loss.params();
                (void)loss.timings();
                CHECK_FALSE(loss.kernel_info());
            }
        });
    }
    for (auto& thread : threads) thread.join();
    CHECK(cuda_errors == kThreads / 2 * 20);   // the views are fine; there is no device
    CHECK(usage_errors == kThreads / 2 * 20);  // one input for two: caught before the device is asked
    CHECK(other == 0);
    CHECK(loss.cuda_source(good).find("lossjit_kernel") != std::string::npos);  // still usable
}

TEST_CASE("kernels chosen for a GPU known by name are built for its architecture only") {
    CHECK_NOTHROW(require_target_of("h200", "sm_90"));
    CHECK_NOTHROW(require_target_of("h200", "compute_90"));
    CHECK_NOTHROW(require_target_of("", "sm_80"));
    CHECK_THROWS_WITH_AS(require_target_of("h100", "sm_80"), doctest::Contains("chosen for h100 (sm_90)"), UsageError);
    CHECK_THROWS_WITH_AS(require_target_of("h100", "compute_80"), doctest::Contains("not compute_80"), UsageError);
    CHECK(target_arch("sm_90") == 90);
    CHECK(target_arch("compute_80") == 80);
}

TEST_CASE("lent scratch: a ScratchScope lends its buffer to this thread's calls, scopes nest, other threads see none") {
    CHECK_FALSE(lent_scratch().has_value());
    alignas(16) unsigned char a[64], b[32];
    {
        ScratchScope outer(a, sizeof a);
        REQUIRE(lent_scratch().has_value());
        CHECK(lent_scratch()->data == a);
        {
            ScratchScope inner(b, sizeof b);
            CHECK(lent_scratch()->data == b);
            CHECK(lent_scratch()->bytes == sizeof b);
            bool other_thread_sees = true;
            std::thread([&] { other_thread_sees = lent_scratch().has_value(); }).join();
            CHECK_FALSE(other_thread_sees);
        }
        CHECK(lent_scratch()->data == a);
        ScratchScope none(nullptr, 100);  // no buffer lends nothing: 0 bytes, so any call needing scratch says so
        CHECK(lent_scratch()->bytes == 0);
    }
    CHECK_FALSE(lent_scratch().has_value());
    // The layout of lent scratch: the reduction's area rounded to 256 bytes, then the summed gradients'.
    CHECK(reduce_scratch_bytes(1) == 256);
    CHECK(reduce_scratch_bytes(132 * 32) == (8 * 132 * 32 + 32 + 255) / 256 * 256);
    CHECK(sum_scratch_bytes(3, 10) == 8 * (2 + 10));
    CHECK(sum_arrival_doubles(3) == 2);
}

}  // TEST_SUITE
