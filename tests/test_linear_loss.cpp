// linear_loss: which programs split by rows (and where the others are refused), how the rows are
// chunked, and on the GPU: values and gradients of h, W and bias against the CPU reference of the
// unchunked program on the same logits (rounded to the operands' dtype, as the product stores them).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpu_support.hpp"
#include "lossjit/linear_loss.hpp"
#include "lossjit/lossjit.hpp"
#include "tools/host.hpp"

using namespace lossjit;

namespace {

struct SplitCase {
    const char* program;
    const char* error;  // empty: it splits
    int column;         // of the error
};

const SplitCase kSplitCases[] = {
    {"mean(logsumexp(logits, -1) - logits[y])", "", 0},
    {"sum(logsumexp(logits, -1) - logits[y]) * 0.5", "", 0},
    {"lse = logsumexp(logits, -1); loss = mean(lse - logits[y]); z = mean(lse^2); loss, z", "", 0},
    {"lse = logsumexp(logits, -1); mean(lse - logits[y]) + 1e-4 * mean(lse^2)", "", 0},
    {"batchmean(sum(exp(logits) * logits, -1)) * 4", "", 0},
    {"-(sum(logits) / 3)", "", 0},
    // examples/linear_loss.py's
    {"l = logsumexp(logits, -1) - logits[y]; sum(where(y != -100, l, 0)) / sum(y != -100)", "", 0},
    {"sum(where(y != -100, logsumexp(logits, -1) - logits[y], 0))", "", 0},
    {"c = 30 * tanh(logits / 30); lse = logsumexp(c, -1); mean(where(y != -100, lse - c[y], 0)) + 1e-4 * mean(lse^2)", "", 0},
    {"param eps = 0.1; lp = logits - logsumexp(logits, -1); loss = mean(where(y != -100, -(1 - eps) * lp[y] - eps * "
     "mean(lp, -1), 0)); acc = mean(argmax(logits, -1) == y); loss, acc", "", 0},
    {"param T = 2; q = t / T - logsumexp(t / T, -1); p = logits / T - logsumexp(logits / T, -1); "
     "batchmean(sum(exp(q) * (q - p), -1)) * T^2", "", 0},
    // Not sums of their reductions: run by the reductions, combined after (split_totals).
    {"sum(logits) / sum(y != -100)", "", 0},
    {"log(mean(logits))", "", 0},
    {"mean(logits) + 1", "", 0},
    {"l = logsumexp(logits, -1) - logits[y]; loss = sum(where(y != 3, l, 0)) / sum(y != 3); "
     "acc = mean(argmax(logits, -1) == y); n = sum(y != 3); loss, acc, n", "", 0},
    // ... unless the first result combines two reductions of the logits otherwise than linearly.
    {"mean(logits) + sum(logits)", "their factors in its gradient", 16},
    {"sum(logits) * mean(logits)", "their factors in its gradient", 15},
    {"exp(logits) * 2", "a map of one value per element", 1},
    {"logsumexp(logits, -1) - logits[y]", "", 0},  // reduction='none'
    {"mean(logits - mean(logits))", "is used per element", 15},
    {"sum(logsumexp(logits, 0))", "first dimension", 1},
};

}  // namespace

TEST_SUITE("linear") {

TEST_CASE("linear_loss: programs whose results add up over parts of the rows, and the others refused") {
    for (const auto& c : kSplitCases) {
        CAPTURE(c.program);
        if (std::string(c.error).empty()) {
            CHECK_NOTHROW(LinearLoss(compile(c.program)));
            continue;
        }
        try {
            LinearLoss head(compile(c.program));
            FAIL("accepted");
        } catch (const SourceError& e) {
            CHECK(e.message().find(c.error) != std::string::npos);
            CHECK(e.where().column == c.column);
        }
    }
    CHECK_THROWS_WITH_AS(LinearLoss(compile("mean(x^2)")), doctest::Contains("never reads 'logits'"), UsageError);
    LinearLossOptions named;
    named.logits = "z";
    CHECK_NOTHROW(LinearLoss(compile("mean(logsumexp(z, -1))"), named));
    const LinearLoss head(compile("mean(w[y] * (logsumexp(logits, -1) - logits[y]))"));
    CHECK(head.others() == std::vector<std::string>{"w", "y"});
}

// A ratio runs as two programs (its reductions a chunk at a time, their combination): both compile
// with NVRTC, value and gradient, without a GPU.
TEST_CASE("linear_loss: the programs a ratio runs as compile, value and gradient") {
    const LinearLoss head(compile("l = logsumexp(logits, -1) - logits[y]; loss = sum(where(y != 3, l, 0)) / sum(y != 3); "
                                  "acc = mean(argmax(logits, -1) == y); loss, acc"));
    const auto programs = head.programs();
    REQUIRE(programs.size() == 2);
    const Loss& per_chunk = *programs[0];
    const Loss& combine = *programs[1];
    // The reductions, the one the gradient flows through first; the combination of their sums.
    CHECK(per_chunk.result_count() == 3);
    CHECK(per_chunk.inputs() == std::vector<std::string>{"logits", "y"});
    CHECK(combine.inputs() == std::vector<std::string>{"t0", "t1", "t2"});
    CHECK(combine.results() == std::vector<std::string>{"loss", "acc"});
    const TensorView chunk[] = {TensorView{nullptr, DType::bfloat16, {64, 1000}, {}}, TensorView{nullptr, DType::int64, {64}, {}}};
    const std::string logits[] = {"logits"};
    CHECK(per_chunk.compile_kernel(chunk, logits, "compute_90").image_bytes > 0);
    const TensorView sums[] = {TensorView{nullptr, DType::float64, {1}, {}}, TensorView{nullptr, DType::float64, {1}, {}},
                               TensorView{nullptr, DType::float64, {1}, {}}};
    const std::string t0[] = {"t0"};
    CHECK(combine.compile_kernel(sums, "compute_90").image_bytes > 0);
    CHECK(combine.compile_kernel(sums, t0, "compute_90").image_bytes > 0);
    // The program's knobs reach the program of its reductions.
    Options options;
    options.knobs.block_threads = 128;
    const LinearLoss knobbed(compile("l = logsumexp(logits, -1) - logits[y]; sum(where(y != 3, l, 0)) / sum(y != 3)",
                                     options));
    CHECK(knobbed.programs()[0]->cuda_source(chunk, logits).find("128 threads/block") != std::string::npos);
    // A program of sums of reductions runs as itself.
    const LinearLoss plain(compile("mean(logsumexp(logits, -1) - logits[y])"));
    REQUIRE(plain.programs().size() == 1);
    CHECK(plain.programs()[0] == &plain.loss());
}

TEST_CASE("linear_loss: chunks of equal rows within the chunk budget") {
    const LinearLoss head(compile("mean(logsumexp(logits, -1) - logits[y])"));
    auto plan = [&](std::int64_t n, std::int64_t v, DType dtype) {
        return head.plan(TensorView{nullptr, dtype, {n, 4096}, {}}, TensorView{nullptr, dtype, {v, 4096}, {}});
    };
    // 16384 rows of 128256 bf16 logits (their gradient overwrites them): 1 GiB holds 4186 rows; 4096 a chunk.
    auto p = plan(16384, 128256, DType::bfloat16);
    CHECK(p.chunk_rows == 4096);
    CHECK(p.chunks == 4);
    CHECK(p.workspace_bytes < (std::size_t{3} << 29));  // the 1.5 GiB
    CHECK(p.workspace_bytes >= std::size_t{4096} * 128256 * 2);
    // 10000 rows go in equal chunks: 3 of 3334, rounded up to whole tiles within the budget.
    p = plan(10000, 128256, DType::bfloat16);
    CHECK(p.chunks == 3);
    CHECK(p.chunk_rows == 3392);
    CHECK(plan(100, 50, DType::float32).chunks == 1);
    LinearLossOptions fixed;
    fixed.chunk_rows = 3000;
    const LinearLoss chunked(compile("sum(logits)"), fixed);
    const auto q = chunked.plan(TensorView{nullptr, DType::float32, {10000, 8}, {}},
                                TensorView{nullptr, DType::float32, {16, 8}, {}});
    CHECK(q.chunks == 4);
    CHECK(q.chunk_rows == 2500);
    CHECK_THROWS_WITH_AS(head.plan(TensorView{nullptr, DType::float32, {4, 8}, {}},
                                   TensorView{nullptr, DType::bfloat16, {16, 8}, {}}),
                         doctest::Contains("both float32, bfloat16 or float16"), UsageError);
    CHECK_THROWS_WITH_AS(head.plan(TensorView{nullptr, DType::float32, {4, 8}, {}},
                                   TensorView{nullptr, DType::float32, {16, 9}, {}}),
                         doctest::Contains("last dimensions (H) differ"), UsageError);
}

}  // TEST_SUITE

namespace {

// The reference: logits = h W^T + bias in float64 from the operands' values, rounded to their dtype
// (the product stores them so), the program's reference values and d first result / d logits, and
// from those dh = G W, dW = G^T h, dbias = the column sums of G.
struct Expected {
    std::vector<double> values, dh, dW, dbias;
};

Expected expected(const Loss& loss, const HostTensor& h, const HostTensor& W, const HostTensor* bias,
                  const std::vector<const HostTensor*>& others, const std::string& logits_name,
                  const HostTensor* upstream = nullptr) {
    const std::int64_t n = h.shape[0], features = h.shape[1], classes = W.shape[0];
    HostTensor logits({n, classes}, h.dtype);
    for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t v = 0; v < classes; ++v) {
            double sum = bias ? bias->at(v) : 0.0;
            for (std::int64_t k = 0; k < features; ++k) sum += h.at(r * features + k) * W.at(v * features + k);
            logits.set(r * classes + v, sum);
        }
    std::vector<TensorView> views;
    std::size_t o = 0;
    for (const auto& name : loss.inputs()) views.push_back(name == logits_name ? logits.view() : others[o++]->view());
    Expected e;
    const std::vector<std::string> wrt{logits_name};
    std::vector<double> g;
    if (loss.kind() == Kind::Map) {  // one value per row, and the vector-Jacobian product with `upstream`
        HostTensor out({n}, DType::float64);
        loss.reference_map(views, out.output());
        for (std::int64_t r = 0; r < n; ++r) e.values.push_back(out.at(r));
        g = loss.reference_grad(views, wrt, upstream->view())[0].values;
    } else {
        e.values = loss.reference_values(views);
        g = loss.reference_grad(views, wrt)[0].values;
    }
    e.dh.assign(static_cast<std::size_t>(n * features), 0.0);
    e.dW.assign(static_cast<std::size_t>(classes * features), 0.0);
    e.dbias.assign(static_cast<std::size_t>(classes), 0.0);
    for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t v = 0; v < classes; ++v) {
            const double gv = g[static_cast<std::size_t>(r * classes + v)];
            e.dbias[static_cast<std::size_t>(v)] += gv;
            for (std::int64_t k = 0; k < features; ++k) {
                e.dh[static_cast<std::size_t>(r * features + k)] += gv * W.at(v * features + k);
                e.dW[static_cast<std::size_t>(v * features + k)] += gv * h.at(r * features + k);
            }
        }
    return e;
}

// The largest difference of `got` (a device buffer of `dtype`) from `want`, over want's largest magnitude.
double error_of_largest(const DeviceBuffer& got, DType dtype, const std::vector<double>& want) {
    HostTensor host({static_cast<std::int64_t>(want.size())}, dtype);
    got.download(host.bytes.data(), host.bytes.size());
    const lossjit_test::Spread s = lossjit_test::spread(host, want);
    return s.largest == 0 ? s.worst : s.worst / s.largest;
}

struct GpuCase {
    const char* program;
    bool bias;
    std::int64_t chunk_rows;
};

const GpuCase kGpuCases[] = {
    {"mean(logsumexp(logits, -1) - logits[y])", false, 128},  // 301 rows: chunks of 101, 101, 99
    {"mean(logsumexp(logits, -1) - logits[y])", true, 0},     // one chunk
    {"lse = logsumexp(logits, -1); loss = mean(lse - logits[y]) + 1e-4 * mean(lse^2); "
     "z = mean(lse^2); acc = mean(argmax(logits, -1) == y); loss, z, acc",
     true, 100},
    {"c = 30 * tanh(logits / 30); lse = logsumexp(c, -1); sum(lse - c[y]) / 300 + 1e-4 * sum(lse^2) / 300", false, 64},
    {"param eps = 0.1; lp = logits - logsumexp(logits, -1); mean(-(1 - eps) * lp[y] - eps * mean(lp, -1))", true, 97},
    {"sum(where(y != 3, logsumexp(logits, -1) - logits[y], 0))", false, 128},
    {"sum(logits * logits) * 0.5", true, 100},  // the elementwise kind: no rows
    // Run by their reductions, combined after: cross-entropy over the rows whose class is not 3 (a
    // ratio), a log of a mean, and three results of which the first is the ratio.
    {"l = logsumexp(logits, -1) - logits[y]; sum(where(y != 3, l, 0)) / sum(y != 3)", true, 100},
    {"log(mean(exp(logsumexp(logits, -1) - logits[y])))", false, 64},
    {"l = logsumexp(logits, -1) - logits[y]; loss = sum(where(y != 3, l, 0)) / sum(y != 3); "
     "acc = mean(argmax(logits, -1) == y); z = mean(logsumexp(logits, -1)^2); loss, acc, z",
     false, 128},
};

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("linear_loss: values and gradients of h, W and bias match the reference, chunked or not" *
          doctest::skip(!lossjit_test::have_typed_gpu())) {
    const std::int64_t n = 301, features = 64, classes = 1000;
    for (DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
        lossjit_test::Typed h("301x64:normal[0,0.5]", dtype, 11), W("1000x64:normal[0,0.5]", dtype, 12);
        lossjit_test::Typed bias("1000:normal", dtype, 13), y("301:integers[0,1000]:i64", DType::int64, 14);
        for (const auto& c : kGpuCases) {
            CAPTURE(c.program);
            CAPTURE(to_string(dtype));
            CAPTURE(c.chunk_rows);
            LinearLossOptions options;
            options.chunk_rows = c.chunk_rows;
            LinearLoss head(compile(c.program), options);
            const Expected want = expected(head.loss(), h.host, W.host, c.bias ? &bias.host : nullptr,
                                           head.loss().uses("y") ? std::vector<const HostTensor*>{&y.host}
                                                                 : std::vector<const HostTensor*>{},
                                           "logits");
            const auto results = static_cast<std::int64_t>(head.loss().result_count());
            DeviceBuffer values(static_cast<std::size_t>(results) * 8), dh(static_cast<std::size_t>(n * features) * 4),
                dW(static_cast<std::size_t>(classes * features) * 4), dbias(static_cast<std::size_t>(classes) * 4);
            for (auto* b : {&values, &dh, &dW, &dbias}) b->fill_bytes(0xFF);
            // dh in the operands' dtype, dW and dbias summed in float32.
            LinearGrads grads{OutputView::contiguous(dh.data(), {n, features}, dtype),
                              OutputView::contiguous(dW.data(), {classes, features}, DType::float32),
                              c.bias ? OutputView::contiguous(dbias.data(), {classes}, DType::float32) : OutputView{}};
            const TensorView bias_view = bias.view();
            const bool reads_y = head.loss().uses("y");
            const std::vector<TensorView> others = reads_y ? std::vector<TensorView>{y.view()} : std::vector<TensorView>{};
            head.run(h.view(), W.view(), c.bias ? &bias_view : nullptr, others,
                     OutputView::contiguous(values.data(), {results}, DType::float64), &grads);
            synchronize();
            const double value_tolerance = dtype == DType::float32 ? 1e-5 : 1e-3;  // float16: 1e-3 too
            std::vector<double> got(static_cast<std::size_t>(results));
            values.download(got.data(), got.size() * 8);
            for (std::size_t r = 0; r < got.size(); ++r) {
                CAPTURE(r);
                CHECK(std::fabs(got[r] - want.values[r]) <= value_tolerance * std::max(1.0, std::fabs(want.values[r])));
            }
            // 16-bit: the gradient of the logits is stored in the operands' dtype before the products, as
            // torch's is.
            const double grad_tolerance = dtype == DType::float32 ? 1e-5 : 2e-2;
            CHECK(error_of_largest(dh, dtype, want.dh) <= grad_tolerance);
            CHECK(error_of_largest(dW, DType::float32, want.dW) <= grad_tolerance);
            if (c.bias) CHECK(error_of_largest(dbias, DType::float32, want.dbias) <= grad_tolerance);

            // Values alone (no gradient buffer), into a float32 result, with a lent workspace.
            const auto plan = head.plan(h.view(), W.view());
            DeviceBuffer workspace(plan.workspace_bytes);
            head.run(h.view(), W.view(), c.bias ? &bias_view : nullptr, others,
                     OutputView::contiguous(values.data(), {results}, DType::float32), nullptr, nullptr,
                     workspace.data());
            synchronize();
            std::vector<float> alone(static_cast<std::size_t>(results));
            values.download(alone.data(), alone.size() * 4);
            for (std::size_t r = 0; r < alone.size(); ++r)
                CHECK(std::fabs(alone[r] - want.values[r]) <= std::max(value_tolerance, 1e-6) * std::max(1.0, std::fabs(want.values[r])));
        }
    }
}

// The gradient overwrites the logits in every kernel of the row kinds: few long rows taken by the
// blocks of a cluster (automatic below half the SMs, and asked for), a block per row with and
// without the row cache, a warp per row.
TEST_CASE("linear_loss: the gradient over its logits in clusters, row caches and warps" *
          doctest::skip(!lossjit_test::have_typed_gpu())) {
    const std::int64_t n = 48, features = 32, classes = 20000;
    lossjit_test::Typed h("48x32:normal", DType::float32, 21), W("20000x32:normal[0,0.3]", DType::float32, 22);
    lossjit_test::Typed y("48:integers[0,20000]:i64", DType::int64, 23);
    const char* program = "lse = logsumexp(logits, -1); mean(lse - logits[y]) + 1e-2 * mean(lse^2)";
    struct Variant {
        const char* name;
        std::int64_t chunk_rows;
        Knobs knobs;
    };
    std::vector<Variant> variants{{"automatic, 16 rows a chunk", 16, {}}, {"automatic, one chunk", 0, {}}};
    Knobs cluster4;
    cluster4.row_cluster = 4;
    variants.push_back({"clusters of 4", 16, cluster4});
    Knobs cached, uncached, warp;
    cached.row_cache = true, cached.block_threads = 1024, cached.row_cluster = 1;
    uncached.row_cache = false, uncached.block_threads = 256;
    warp.block_threads = 32;
    variants.push_back({"a block a row, cached", 16, cached});
    variants.push_back({"a block a row, uncached", 16, uncached});
    variants.push_back({"32 threads a block", 24, warp});
    const TensorView others[] = {y.view()};
    for (const auto& v : variants) {
        CAPTURE(v.name);
        Options options;
        options.knobs = v.knobs;
        LinearLossOptions chunking;
        chunking.chunk_rows = v.chunk_rows;
        LinearLoss head(compile(program, options), chunking);
        const Expected want = expected(head.loss(), h.host, W.host, nullptr, {&y.host}, "logits");
        DeviceBuffer value(8), dh(static_cast<std::size_t>(n * features) * 4), dW(static_cast<std::size_t>(classes * features) * 4);
        LinearGrads grads{OutputView::contiguous(dh.data(), {n, features}, DType::float32),
                          OutputView::contiguous(dW.data(), {classes, features}, DType::float32), OutputView{}};
        head.run(h.view(), W.view(), nullptr, others, OutputView::contiguous(value.data(), {1}, DType::float64), &grads);
        synchronize();
        double got = 0;
        value.download(&got, 8);
        CHECK(std::fabs(got - want.values[0]) <= 1e-5 * std::fabs(want.values[0]));
        CHECK(error_of_largest(dh, DType::float32, want.dh) <= 1e-5);
        CHECK(error_of_largest(dW, DType::float32, want.dW) <= 1e-5);
        const auto info = head.loss().kernel_info();
        REQUIRE(info);
        MESSAGE(v.name, ": ", info->signature);
    }
}

// reduction='none': a map of one value per row; its values a chunk at a time, its vector-Jacobian
// product with a random upstream gradient computing each chunk's logits again.
TEST_CASE("linear_loss: a map of one value per row, its values and its backward" *
          doctest::skip(!lossjit_test::have_typed_gpu())) {
    const std::int64_t n = 301, features = 64, classes = 1000;
    for (DType dtype : {DType::float32, DType::bfloat16}) {
        CAPTURE(to_string(dtype));
        lossjit_test::Typed h("301x64:normal[0,0.5]", dtype, 31), W("1000x64:normal[0,0.5]", dtype, 32);
        lossjit_test::Typed bias("1000:normal", dtype, 33), y("301:integers[0,1000]:i64", DType::int64, 34);
        lossjit_test::Typed upstream("301:normal", DType::float32, 35);
        LinearLossOptions options;
        options.chunk_rows = 128;
        LinearLoss head(compile("logsumexp(logits, -1) - logits[y]"), options);
        const Expected want = expected(head.loss(), h.host, W.host, &bias.host, {&y.host}, "logits", &upstream.host);
        DeviceBuffer values(static_cast<std::size_t>(n) * 8 * 2), dh(static_cast<std::size_t>(n * features) * 4),
            dW(static_cast<std::size_t>(classes * features) * 4), dbias(static_cast<std::size_t>(classes) * 4);
        for (auto* b : {&values, &dh, &dW, &dbias}) b->fill_bytes(0xFF);
        const TensorView bias_view = bias.view();
        const TensorView others[] = {y.view()};
        // The values every other element (stride 2), in float64.
        head.run(h.view(), W.view(), &bias_view, others, OutputView{values.data(), DType::float64, {n}, {2}}, nullptr);
        LinearGrads grads{OutputView::contiguous(dh.data(), {n, features}, DType::float32),
                          OutputView::contiguous(dW.data(), {classes, features}, DType::float32),
                          OutputView::contiguous(dbias.data(), {classes}, DType::float32)};
        head.backward(h.view(), W.view(), &bias_view, others, upstream.view(), grads);
        synchronize();
        std::vector<double> got(static_cast<std::size_t>(n) * 2);
        values.download(got.data(), got.size() * 8);
        const double value_tolerance = dtype == DType::float32 ? 1e-5 : 1e-3;
        double worst = 0;
        for (std::int64_t r = 0; r < n; ++r)
            worst = std::max(worst, std::fabs(got[static_cast<std::size_t>(2 * r)] - want.values[static_cast<std::size_t>(r)]) /
                                        std::max(1.0, std::fabs(want.values[static_cast<std::size_t>(r)])));
        CHECK(worst <= value_tolerance);
        const double grad_tolerance = dtype == DType::float32 ? 1e-5 : 2e-2;
        CHECK(error_of_largest(dh, DType::float32, want.dh) <= grad_tolerance);
        CHECK(error_of_largest(dW, DType::float32, want.dW) <= grad_tolerance);
        CHECK(error_of_largest(dbias, DType::float32, want.dbias) <= grad_tolerance);
        CHECK_THROWS_WITH_AS(head.run(h.view(), W.view(), &bias_view, others,
                                      OutputView{values.data(), DType::float64, {n}, {}}, &grads),
                             doctest::Contains("backward() the gradients"), UsageError);
    }
    // log_softmax is one value per element: as large as the logits, refused before anything runs.
    lossjit_test::Typed h("8x4:normal", DType::float32, 1), W("5x4:normal", DType::float32, 2);
    LinearLoss log_softmax(compile("logits - logsumexp(logits, -1)"));
    DeviceBuffer out(8 * 5 * 4);
    CHECK_THROWS_WITH_AS(log_softmax.run(h.view(), W.view(), nullptr, {}, OutputView::contiguous(out.data(), {8}), nullptr),
                         doctest::Contains("one value per row"), UsageError);
}

TEST_CASE("linear_loss: misuse is refused before anything runs" * doctest::skip(!lossjit_test::have_typed_gpu())) {
    LinearLoss head(compile("mean(logsumexp(logits, -1) - logits[y])"));
    lossjit_test::Typed h("8x4:normal", DType::float32, 1), W("5x4:normal", DType::float32, 2);
    lossjit_test::Typed y("7:integers[0,5]:i64", DType::int64, 3);
    DeviceBuffer values(8);
    const TensorView others[] = {y.view()};
    CHECK_THROWS_WITH_AS(head.run(h.view(), W.view(), nullptr, others,
                                  OutputView::contiguous(values.data(), {1}, DType::float32), nullptr),
                         doctest::Contains("one value per row of h"), UsageError);
    CHECK_THROWS_WITH_AS(head.run(h.view(), W.view(), nullptr, {}, OutputView::contiguous(values.data(), {1}, DType::float32),
                                  nullptr),
                         doctest::Contains("reads 1 inputs beside 'logits'"), UsageError);
}

}  // TEST_SUITE
