// bench, tune and --knob on the command line, as separate processes: without a GPU bench and tune
// fail cleanly (exit 2, "no CUDA device") after checking everything typed; knobs reach the kernel.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "paths.hpp"
#include "support.hpp"

namespace fs = std::filesystem;

namespace {

using lossjit_test::Result;
Result run(const std::string& args, const std::string& env = "") { return lossjit_test::run_cli(args, env); }

std::string example(const char* name) { return source_dir() + "/examples/" + name; }

// No driver at all, on any machine: the library loads this path instead of libcuda.so.1.
const std::string kNoDriver = "LOSSJIT_LIBCUDA=/nonexistent/libcuda.so.1";

}  // namespace

TEST_SUITE("cli") {

TEST_CASE("bench and tune without a GPU: exit 2, 'no CUDA device', no crash") {
    const std::string mse = example("mse.loss") + " -i p=8192x8192 -i t=8192x8192";
    for (const char* command : {"bench", "tune"}) {
        CAPTURE(command);
        const auto r = run(std::string(command) + " " + mse + " --sweep block=128,256,512 --sweep items=4,8,16,32", kNoDriver);
        CHECK(r.status == 2);
        CHECK(r.output.find("lossjit: error: no CUDA device: no CUDA driver (") != std::string::npos);
        CHECK(r.output.find(std::string(command) + " times kernels on a GPU") != std::string::npos);
    }
    if (fs::exists(LOSSJIT_CUDA_STUB)) {  // a driver that loads but has no device
        const auto r = run("bench " + mse, std::string("LOSSJIT_LIBCUDA=") + LOSSJIT_CUDA_STUB);
        CHECK(r.status == 2);
        CHECK(r.output.find("no CUDA device: the CUDA driver did not initialise") != std::string::npos);
    }
    // run keeps falling back to the CPU reference.
    const auto cpu = run("run 'mean(p)' -i p=4:const[2]", kNoDriver);
    CHECK(cpu.status == 0);
    CHECK(cpu.output.find("evaluating on the CPU reference") != std::string::npos);
}

TEST_CASE("bench and tune check what was typed before asking for a GPU") {
    const std::string mse = example("mse.loss") + " -i p=64 -i t=64";
    const std::pair<std::string, const char*> table[] = {
        {"bench " + mse + " --sweep warps=1,2", "unknown knob 'warps'"},
        {"bench " + mse + " --sweep block=100", "threads per block must be a multiple of 32 in [32, 1024], not 100"},
        {"bench " + mse + " --sweep block=64 --sweep threads=128", "two --sweep axes set the knob block"},
        {"bench " + mse + " --knob acc=half", "'half' is not an accumulator"},
        {"bench " + mse + " --sets 0", "--sets 0: between 1 and 8 input sets"},
        {"tune 'mean((p - t)^^2)' -i p=64 -i t=64", "expr:1:"},
        {"tune " + example("mse.loss") + " -i p=64 -i t=65", "do not broadcast"},
        {"tune " + example("mse.loss"), "give each with --input"},
    };
    for (const auto& [args, message] : table) {
        CAPTURE(args);
        const auto r = run(args, kNoDriver);
        CHECK(r.status == 2);
        CHECK(r.output.find(message) != std::string::npos);
        CHECK(r.output.find("no CUDA device") == std::string::npos);
    }
}

TEST_CASE("--knob reaches the kernel; bad knobs are usage errors; run --cpu ignores them") {
    const std::string mse = example("mse.loss") + " -i p=4096x1024 -i t=4096x1024";
    const auto emitted = run("emit " + mse + " --knob block=512 --knob items=8 --knob acc=compensated --knob fast_math=on");
    CHECK(emitted.status == 0);
    CHECK(emitted.output.find("// Kernel variant: rows, rank 1, inner strides [1 1], vector 4, unroll 2, 512 threads/block, "
                              "compensated float32 accumulator, fast math.") != std::string::npos);
    CHECK(emitted.output.find("lj::Accumulating<lj::AccCompensated, lj::SumSink> sum;") != std::string::npos);

    const auto plain = run("emit " + mse);
    CHECK(plain.output.find("vector 4, unroll 8, 256 threads/block.\n") != std::string::npos);
    CHECK(run("emit " + mse + " --knob vector=1").output.find("vector 1, unroll 8, 256 threads/block.") != std::string::npos);

    CHECK(run("run " + mse + " --cpu --knob block=1000").output.find("not 1000") != std::string::npos);
    CHECK(run("run " + mse + " --cpu --knob block=1000").status == 2);
    CHECK(run("run " + mse + " --cpu --knob nonsense").output.find("expected KNOB=VALUE") != std::string::npos);
    const auto cpu = run("run " + mse + " --cpu --knob acc=float32 --no-tuning");
    CHECK(cpu.status == 0);

    // Fast math is part of the key: two different kernels.
    const std::string dir = (fs::temp_directory_path() / ("lossjit-knobs-" + std::to_string(::getpid()))).string();
    const std::string env = "LOSSJIT_CACHE_DIR=" + dir;
    const auto off = run("compile " + mse + " --knob fast_math=off", env);
    const auto on = run("compile " + mse + " --knob fast_math=on", env);
    CHECK(off.status == 0);
    CHECK(on.output.find("(compiled") != std::string::npos);
    CHECK(off.output.substr(off.output.find("key ")) != on.output.substr(on.output.find("key ")));
    fs::remove_all(dir);
}

#ifdef LOSSJIT_BENCH
TEST_CASE("lossjit_bench names a missing example program and exits non-zero, before asking for a GPU") {
    const std::string bench = env_or("LOSSJIT_BENCH", LOSSJIT_BENCH);
    if (!fs::exists(bench)) {
        MESSAGE("skipped: no lossjit_bench at " << bench);
        return;
    }
    lossjit_test::TempDir empty("lossjit-bench-examples");
    const auto missing = lossjit_test::run_shell(kNoDriver + " " + bench + " --examples " + empty.path.string() + " --only mse");
    CHECK(missing.status == 1);
    CHECK(missing.output.find("lossjit_bench: cannot read the example program " + (empty.path / "mse.loss").string()) !=
          std::string::npos);
    CHECK(missing.output.find("expected an expression") == std::string::npos);
    CHECK(missing.output.find("needs a GPU") == std::string::npos);

    // An empty file is no program either.
    std::ofstream(empty.path / "mse.loss").flush();
    const auto blank = lossjit_test::run_shell(kNoDriver + " " + bench + " --examples " + empty.path.string() + " --only mse");
    CHECK(blank.status == 1);
    CHECK(blank.output.find("cannot read the example program " + (empty.path / "mse.loss").string()) != std::string::npos);

    // With the examples found (beside the build folder, or the source tree), the next stop is the GPU.
    const auto found = lossjit_test::run_shell(kNoDriver + " " + bench + " --only mse");
    CHECK(found.status == 2);
    CHECK(found.output.find("lossjit_bench needs a GPU") != std::string::npos);
}
#endif

}  // TEST_SUITE
