// GPU tests of the knobs, sweeps and tuning: every accumulator and knob gives the reference's value
// within its bound, kernel_info() reports the kernel, a sweep returns a sorted table of correct
// variants, and a tune's choice is used by a later process. Skipped, visibly, without a device.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <sys/wait.h>
#include <unistd.h>

#include "tools/host.hpp"
#include "lossjit/lossjit.hpp"
#include "paths.hpp"
#include "support.hpp"
#include "tools/sweep.hpp"

using namespace lossjit;
namespace fs = std::filesystem;

namespace {

bool have_gpu() {
    static const bool available = cuda_available();
    return available;
}

struct Inputs {
    std::vector<HostTensor> host;
    std::vector<DeviceBuffer> buffers;
    std::vector<TensorView> device, host_views;
    Inputs(const std::vector<std::string>& specs, std::uint64_t seed, std::size_t misalign = 0) {
        for (std::size_t k = 0; k < specs.size(); ++k) host.push_back(generate(parse_generator(specs[k]), seed + k));
        for (const auto& h : host) {
            // misalign is in elements of the input's dtype.
            const std::size_t element = size_of(h.dtype);
            buffers.emplace_back(h.bytes.size() + 4 * element);
            buffers.back().upload(h.bytes.data(), h.bytes.size(), misalign * element);
            device.push_back(TensorView::contiguous(static_cast<unsigned char*>(buffers.back().data()) + misalign * element,
                                                    h.shape, h.dtype));
            host_views.push_back(h.view());
        }
    }
};

double rel_error(double a, double b) { return a == b ? 0.0 : std::fabs(a - b) / std::fabs(b); }

using lossjit_test::Result;
using lossjit_test::run_cli;

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("every accumulator and fast math give the reference's value within their bound" * doctest::skip(!have_gpu())) {
    const Inputs in({"4096x4096:normal", "4096x4096:normal"}, 77);
    struct Row {
        Accumulator acc;
        bool fast;
        double bound;
    };
    const Row table[] = {
        {Accumulator::Float64, false, 1e-7},
        {Accumulator::CompensatedFloat32, false, 1e-7},
        {Accumulator::Float32, false, 1e-4},  // no promise: ~elements per thread x 6e-8
        {Accumulator::Float64, true, 1e-6},
    };
    for (const char* program : {"mean((p - t)^2)", "param beta = 1; d = abs(p - t); mean(d < beta ? 0.5*d^2/beta : d - 0.5*beta)"}) {
        for (const auto& row : table) {
            CAPTURE(program);
            CAPTURE(to_string(row.acc));
            CAPTURE(row.fast);
            Options options;
            options.inputs = {"p", "t"};
            options.knobs.accumulator = row.acc;
            options.knobs.fast_math = row.fast;
            options.use_tuning = false;
            auto loss = compile(program, options);
            const double gpu = loss(in.device);
            CHECK(rel_error(gpu, loss.reference(in.host_views)) <= row.bound);
            const auto info = loss.kernel_info();
            REQUIRE(info);
            CHECK(info->knobs.accumulator == row.acc);
            CHECK(info->knobs.fast_math == row.fast);
            // The fused gradient kernel takes the accumulator too; its gradients do not depend on it.
            std::vector<DeviceBuffer> grad(1, DeviceBuffer(static_cast<std::size_t>(in.host[0].numel()) * sizeof(float)));
            DeviceBuffer value(sizeof(float));
            const std::vector<OutputView> grads{OutputView::contiguous(grad[0].data(), in.host[0].shape)};
            loss.value_and_grad(in.device, std::vector<std::string>{"p"}, grads, static_cast<float*>(value.data()));
            synchronize();
            float v = 0;
            value.download(&v, sizeof v);
            CHECK(rel_error(v, loss.reference(in.host_views)) <= row.bound);
        }
    }
}

TEST_CASE("knobs at their extremes give the right value; kernel_info() reports them" * doctest::skip(!have_gpu())) {
    const Inputs in({"1000x1000:uniform", "1000x1000:uniform"}, 5);
    const std::pair<const char*, std::function<void(Options&)>> table[] = {
        {"block 32", [](Options& o) { o.knobs.block_threads = 32; }},
        {"block 1024, items 64", [](Options& o) { o.knobs.block_threads = 1024, o.knobs.items_per_thread = 64; }},
        {"items 3 (scalar)", [](Options& o) { o.knobs.items_per_thread = 3; }},
        {"vector 1, unroll 64", [](Options& o) { o.knobs.vector_width = 1, o.knobs.unroll = 64; }},
        {"1 block per SM", [](Options& o) { o.knobs.max_blocks_per_sm = 1; }},
        {"32 blocks per SM of 64 threads", [](Options& o) { o.knobs.block_threads = 64, o.knobs.max_blocks_per_sm = 32; }},
        {"at most 32 registers, unroll 16", [](Options& o) { o.knobs.max_registers = 32, o.knobs.unroll = 16; }},  // spills
        {"no register bound", [](Options& o) { o.knobs.max_registers = kMaxRegisters; }},
    };
    for (const auto& [what, change] : table) {
        CAPTURE(what);
        Options options;
        options.inputs = {"p", "t"};
        options.use_tuning = false;
        change(options);
        auto loss = compile("mean((p - t)^2)", options);
        CHECK(rel_error(loss(in.device), loss.reference(in.host_views)) <= 1e-7);
        const auto info = loss.kernel_info();
        REQUIRE(info);
        CHECK(info->registers > 0);
        CHECK(info->resident_blocks_per_sm > 0);
        CHECK(info->blocks_per_sm > 0);
        CHECK((info->occupancy > 0 && info->occupancy <= 1.0));
        CHECK(info->grid > 0);
        CHECK(info->target.rfind("sm_", 0) == 0);
        CHECK(info->knobs.items_per_thread == info->knobs.unroll * info->knobs.vector_width);
        CHECK(loss.cuda_source(in.device).find("// Kernel variant: " + info->signature + ".\n") != std::string::npos);
        if (options.knobs.max_blocks_per_sm) CHECK(info->blocks_per_sm <= options.knobs.max_blocks_per_sm);
        if (options.knobs.block_threads) CHECK(info->knobs.block_threads == options.knobs.block_threads);
        if (options.knobs.items_per_thread) CHECK(info->knobs.items_per_thread == options.knobs.items_per_thread);
        // The bound the launch ran with, and ptxas kept to it.
        if (options.knobs.max_registers) CHECK(info->knobs.max_registers == options.knobs.max_registers);
        CHECK(info->registers <= info->knobs.max_registers);
    }
    // Vector width 4 on data that is not 16-byte aligned: scalar, and the note says why.
    const Inputs shifted({"1000x1000:uniform", "1000x1000:uniform"}, 5, 1);
    Options options;
    options.inputs = {"p", "t"};
    options.knobs.vector_width = 4;
    auto loss = compile("mean((p - t)^2)", options);
    CHECK(rel_error(loss(shifted.device), loss.reference(shifted.host_views)) <= 1e-7);
    REQUIRE(loss.kernel_info());
    CHECK(loss.kernel_info()->knobs.vector_width == 1);
    REQUIRE(loss.kernel_info()->notes.size() == 1);
    CHECK(loss.kernel_info()->notes[0].find("the rows of 'p' do not all start 16-byte aligned") != std::string::npos);
}

TEST_CASE("a sweep: every variant timed and correct, fastest first" * doctest::skip(!have_gpu())) {
    SweepRequest request;
    request.program = "mean((p - t)^2)";
    request.base.inputs = {"p", "t"};
    for (std::uint64_t s = 0; s < 2; ++s)
        request.input_sets.push_back({generate(parse_generator("1024x1024:uniform"), 10 + s), generate(parse_generator("1024x1024:uniform"), 20 + s)});
    request.axes = {parse_sweep_axis("block=128,256"), parse_sweep_axis("items=4,8"), parse_sweep_axis("vector=1,4")};
    request.reps = 10;
    int progress = 0;
    request.progress = [&](const SweepProgress&) { ++progress; };
    const SweepResult r = run_sweep(request);
    CHECK(progress > 8);
    REQUIRE(r.rows.size() == 9);  // 8 variants and the defaults
    CHECK(r.roofline_gbps > 0);
    CHECK(r.references.size() == 2);
    int defaults = 0;
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
        const auto& row = r.rows[i];
        CAPTURE(row.label);
        CHECK(row.failure == "");
        CHECK(row.ms > 0);
        CHECK(row.error <= 1e-7);
        CHECK(row.kernel.registers > 0);
        if (i > 0) CHECK(r.rows[i - 1].ms <= row.ms);
        defaults += row.is_default ? 1 : 0;
    }
    CHECK(defaults >= 1);
    CHECK(format_sweep_table(r).find("default") != std::string::npos);
}

TEST_CASE("a sweep of a bfloat16 map times the bfloat16 output a call writes, and checks it exactly" *
          doctest::skip(!have_gpu())) {
    SweepRequest request;
    request.program = "clamp(x + 3, 0, 6) / 6";
    request.base.inputs = {"x"};
    request.input_sets.push_back({generate(parse_generator("512x1024:normal[0,3]:bf16"), 3)});
    request.axes = {parse_sweep_axis("vector=4,8"), parse_sweep_axis("unroll=2,4")};
    request.reps = 10;
    const SweepResult r = run_sweep(request);
    CHECK(r.bytes_per_call == doctest::Approx(512.0 * 1024 * (2 + 2)));  // read and written in bfloat16
    REQUIRE(r.rows.size() == 5);
    for (const auto& row : r.rows) {
        CAPTURE(row.label);
        CHECK(row.failure == "");
        CHECK(row.error == 0);  // the reference rounds to bfloat16 as the kernel does
    }
}

TEST_CASE("tune stores its choice; a later process uses it, unless told not to" * doctest::skip(!have_gpu())) {
    std::random_device random;
    const fs::path dir = fs::temp_directory_path() / ("lossjit-tune-" + std::to_string(::getpid()) + "-" + std::to_string(random()));
    const std::string env = "LOSSJIT_CACHE_DIR=" + dir.string();
    const std::string mse = source_dir() + "/examples/mse.loss -i p=2048x2048 -i t=2048x2048";

    const auto tuned = run_cli("tune " + mse + " --sweep block=128,512 --sweep items=8,16 --reps 10 -q", env);
    CAPTURE(tuned.output);
    CHECK(tuned.status == 0);
    CHECK(tuned.output.find("stored in " + (dir / "tuning.json").string()) != std::string::npos);
    CHECK(tuned.output.find("check: a new compile with automatic knobs runs") != std::string::npos);
    CHECK(tuned.output.find("NOT from the tuning store") == std::string::npos);

    const auto later = run_cli("run " + mse + " --check --timings --dump cuda", env);
    CAPTURE(later.output);
    CHECK(later.status == 0);
    CHECK(later.output.find(", tuned.\n") != std::string::npos);  // the signature line of --dump cuda
    CHECK(later.output.find("timings: tuned knobs: block ") != std::string::npos);
    CHECK(later.output.find("disk hit") != std::string::npos);  // tune compiled the tuned kernel already

    const auto untuned = run_cli("run " + mse + " --timings --no-tuning", env);
    CHECK(untuned.output.find("tuned knobs") == std::string::npos);
    const auto off = run_cli("run " + mse + " --timings", "LOSSJIT_CACHE=off " + env);
    CHECK(off.output.find("tuned knobs") == std::string::npos);
    // Every knob the tuned record may hold, registers too: a knob left automatic takes the record's (the
    // call is then tuned), and whether the record bounds registers depends on which variant won.
    const auto explicit_knobs = run_cli("run " + mse + " --timings --knob block=256 --knob items=32 --knob vector=4 "
                                        "--knob blocks_per_sm=8 --knob registers=255 --knob acc=float64 "
                                        "--knob fast_math=off", env);
    CHECK(explicit_knobs.output.find("tuned knobs") == std::string::npos);
    CHECK(explicit_knobs.output.find("unroll 8, 256 threads/block;") != std::string::npos);

    // A damaged store: a warning, and the defaults.
    std::ofstream(dir / "tuning.json") << "{ damaged";
    const auto damaged = run_cli("run " + mse + " --timings", env);
    CHECK(damaged.status == 0);
    CHECK(damaged.output.find("lossjit: warning: the tuning store") != std::string::npos);
    CHECK(damaged.output.find("tuned knobs") == std::string::npos);
    fs::remove_all(dir);
}

}  // TEST_SUITE
