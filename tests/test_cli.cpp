// The command line, run as a separate process: exit codes, diagnostics, caching across processes.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tools/host.hpp"
#include "lossjit/lossjit.hpp"
#include "paths.hpp"
#include "support.hpp"

namespace fs = std::filesystem;

namespace {

using lossjit_test::Result;
Result run(const std::string& args, const std::string& env = "") { return lossjit_test::run_cli(args, env); }

std::string example(const char* name) { return source_dir() + "/examples/" + name; }

struct TempDir : lossjit_test::TempDir {
    TempDir() : lossjit_test::TempDir("lossjit-cli") {}
};

}  // namespace

TEST_SUITE("cli") {

TEST_CASE("a typo gets a caret diagnostic and exit code 2") {
    const auto r = run("run 'mean(max(0, lgo(p)))' --input p=4 --cpu");
    CHECK(r.status == 2);
    CHECK(r.output == "expr:1:13: error: unknown function 'lgo' (did you mean 'log'?)\n"
                      "mean(max(0, lgo(p)))\n"
                      "            ^\n");
}

TEST_CASE("usage errors name the problem") {
    CHECK(run("run 'mean(p - t)' --cpu").output.find("give each with --input") != std::string::npos);
    CHECK(run("run 'mean(p - t)' -i p=3 -i t=4 --cpu").output.find("do not broadcast") != std::string::npos);
    CHECK(run("run 'mean(p)' -i p=3:gaussian --cpu").status == 2);
    CHECK(run("run 'mean(p)' -i p=3 --param beta=1 --cpu").output.find("does not use a parameter 'beta'") != std::string::npos);
    CHECK(run("run 'mean(p)' -i p=3 --param beta=x --cpu").output.find("'x' is not a number") != std::string::npos);
    CHECK(run("run 'mean(p)' -i p=/nonexistent.npy --cpu").status == 2);
    CHECK(run("run missing.loss --cpu").output.find("cannot read program file") != std::string::npos);
    CHECK(run("frobnicate").status != 0);
}

TEST_CASE("usage errors exit 2 and say what to do; --help and --version exit 0") {
    const struct {
        std::string args;
        int status;
        const char* says;
    } cases[] = {
        {"--version", 0, "lossjit 0.1.0"},
        {"run --help", 0, "--output-grad"},
        {"frobnicate", 2, "unknown command 'frobnicate' (commands: run, emit,"},
        {"run --frob 'mean(p)'", 2, "--frob"},
        {"", 2, "A subcommand is required"},
        // A program that starts with '-' reads as a flag; the hint says where it goes.
        {"run '-mean(p)' -i p=3 --cpu", 2, "after '--': lossjit run [OPTIONS] -- '-mean(p)'"},
        {"run -i p=3:const[2] --cpu -- '-mean(p)'", 0, "-2"},
        // Options that would do nothing are refused, not ignored.
        {"run 'mean(p)' -i p=3 -o out.npy --cpu", 2, "-o/--output writes a map's output, and this program is a mean reduction"},
        {"run 'mean(p)' -i p=3 --check --cpu", 2, "--check compares the GPU's result with the CPU reference, and --cpu"},
        {"run 'mean(p)' -i p=3 -i q=3 --cpu", 2, "--input q: the program does not read an input 'q' (it reads p)"},
        {"run 'mean(p)' -i p=3 --param p=1 --cpu", 2, "'p' is listed as an input and cannot also be a parameter"},
        {"run 'param beta = 1; mean(p * beta)' -i p=3 --param betta=1 --cpu", 2, "(did you mean 'beta'?)"},
        // `functions` lists every name the language has, not only the pointwise ones.
        {"functions", 0, "batchmean(e)"},
        {"functions", 0, "\n  pi "},
        {"functions", 0, "param NAME = v;"},
        {"functions", 0, "logsumexp(e, -1)"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.args);
        const auto r = run(c.args);
        CHECK(r.status == c.status);
        CHECK_MESSAGE(r.output.find(c.says) != std::string::npos, r.output);
    }
    if (!lossjit::cuda_available()) {
        const auto r = run("run 'mean(p)' -i p=3 --check");
        CHECK(r.status == 2);
        CHECK(r.output.find("and there is no GPU here") != std::string::npos);
    }
}

TEST_CASE("info shows the versions, NVRTC's architectures and the cache directory") {
    TempDir dir;
    const auto r = run("info", "LOSSJIT_CACHE_DIR=" + (dir.path / "cache").string());
    CHECK(r.status == 0);
    CHECK(r.output.find("lossjit 0.1.0\nNVRTC ") != std::string::npos);
    CHECK(r.output.find(" sm_90") != std::string::npos);
    CHECK(r.output.find("kernel cache: " + (dir.path / "cache").string() + " (readwrite)") != std::string::npos);
    const auto off = run("info", "LOSSJIT_CACHE=off LOSSJIT_CACHE_DIR=" + (dir.path / "cache").string());
    CHECK(off.output.find("(off)") != std::string::npos);
}

TEST_CASE("run evaluates on the CPU reference where asked or where there is no GPU") {
    const auto r = run("run " + example("mse.loss") + " -i p=1000x100:uniform -i t=1000x100:uniform --cpu");
    CHECK(r.status == 0);
    const double value = std::stod(r.output);
    CHECK(value == doctest::Approx(1.0 / 6).epsilon(0.01));  // E[(U - V)^2] for independent uniforms

    const auto hinge = run("run " + example("hinge.loss") + " -i p=300x200:uniform -i t=200:sign --cpu --json");
    CHECK(hinge.status == 0);
    CHECK(hinge.output.find("\"device\": \"cpu-reference\"") != std::string::npos);
    CHECK(hinge.output.find("\"kind\": \"mean\"") != std::string::npos);

    // Parameters change the value without touching the program.
    const auto a = run("run " + example("smooth_l1.loss") + " -i p=100:normal -i t=100:normal --cpu");
    const auto b = run("run " + example("smooth_l1.loss") + " -i p=100:normal -i t=100:normal --cpu -p beta=0.25");
    CHECK(a.output != b.output);

    // A program of several results prints each by name; --json adds "outputs".
    const std::string several = "run " + example("cross_entropy_z_acc.loss") + " -i x=64x10:normal -i y=64:integers[0,9]:i64 --cpu";
    const auto listed = run(several);
    CHECK(listed.status == 0);
    CHECK(listed.output.rfind("loss = ", 0) == 0);
    CHECK(listed.output.find("\nz = ") != std::string::npos);
    CHECK(listed.output.find("\nacc = ") != std::string::npos);
    const auto listed_json = run(several + " --json");
    CHECK(listed_json.output.find("\"outputs\": {") != std::string::npos);
    CHECK(listed_json.output.find("\"acc\": ") != std::string::npos);

    // Options may come before the program; each --input takes exactly one value.
    CHECK(std::stod(run("run -i p=3:const[2] 'mean(p)' --cpu").output) == 2.0);

    // --param declares a parameter the program does not declare itself.
    const auto margin = run("run 'mean(max(0, margin - p))' -i p=3:const[0.5] --param margin=2 --cpu");
    CHECK(margin.status == 0);
    CHECK(std::stod(margin.output) == 1.5);
}

TEST_CASE("--json keeps inf, -inf and nan apart (JSON itself has none of them)") {
    const struct {
        const char* program;
        const char* expected;
    } table[] = {
        {"sum(x / 0)", "\"value\": \"inf\""},
        {"sum(-x / 0)", "\"value\": \"-inf\""},
        {"sum(log(-x))", "\"value\": \"nan\""},
        {"sum(x)", "\"value\": 6.0"},
    };
    for (const auto& row : table) {
        CAPTURE(row.program);
        const auto r = run(std::string("run '") + row.program + "' -i x=3:const[2] --cpu --json");
        CHECK(r.status == 0);
        CHECK(r.output.find(row.expected) != std::string::npos);
        CHECK(r.output.find("null") == std::string::npos);
    }
}

TEST_CASE("a map writes its output as .npy") {
    TempDir dir;
    const std::string out = (dir.path / "y.npy").string();
    const auto r = run("run " + example("hardsigmoid.loss") + " -i x=4x5:normal[0,3] --cpu -o " + out);
    CHECK(r.status == 0);
    const auto y = lossjit::load_npy(out);
    CHECK(y.shape == lossjit::Shape{4, 5});
    CHECK(y.dtype == lossjit::DType::float32);
    for (float v : y.floats()) CHECK((v >= 0.0f && v <= 1.0f));
}

TEST_CASE("inputs from .npy files") {
    TempDir dir;
    const std::string p = (dir.path / "p.npy").string();
    lossjit::save_npy(p, lossjit::HostTensor::from_floats({2, 2}, {1, 2, 3, 4}));
    const auto r = run("run 'sum(p * 2)' -i p=" + p + " --cpu");
    CHECK(r.status == 0);
    CHECK(std::stod(r.output) == 20.0);

    // What the reader refuses is a usage error naming the file.
    const std::string big = (dir.path / "big.npy").string();
    lossjit::save_npy(big, lossjit::HostTensor::from_floats({2}, {1, 2}));
    std::string bytes;
    {
        std::ifstream in(big, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    bytes.replace(bytes.find("'<f4'"), 5, "'>f4'");
    std::ofstream(big, std::ios::binary) << bytes;
    const auto refused = run("run 'sum(p)' -i p=" + big + " --cpu");
    CHECK(refused.status == 2);
    CHECK(refused.output.find(big + ": dtype '>f4' is big-endian") != std::string::npos);
}

TEST_CASE("emit and dumps show every stage") {
    const auto cuda = run("emit " + example("hinge.loss") + " -i p=64x32 -i t=32");
    CHECK(cuda.status == 0);
    CHECK(cuda.output.find("return lj_max(0.0f, 1.0f - (x_p * x_t));") != std::string::npos);
    CHECK(cuda.output.find("lj::for_rows<256, 1, 4, 2>") != std::string::npos);  // rank 2: t repeats per row

    const auto dumps = run("run " + example("hinge.loss") +
                           " -i p=8x4 -i t=4:sign --cpu --dump ast --dump checked --dump cuda --dump ptx");
    CHECK(dumps.status == 0);
    CHECK(dumps.output.find("call mean @4:1") != std::string::npos);
    CHECK(dumps.output.find("body: max(0, 1 - p * t)") != std::string::npos);
    CHECK(dumps.output.find("extern \"C\" __global__") != std::string::npos);
    CHECK(dumps.output.find(".entry lossjit_kernel") != std::string::npos);
}

TEST_CASE("emit, compile and warm show and build a program's statistics' kernels first") {
    TempDir dir;
    const std::string env = "LOSSJIT_CACHE_DIR=" + dir.path.string();
    const auto cuda = run("emit 'x / sqrt(sum(x^2))' -i x=64x32");
    CHECK(cuda.status == 0);
    const auto statistic = cuda.output.find("1 whole-tensor reductions combined");  // sqrt(sum(x^2)), a Composite
    const auto map = cuda.output.find("an elementwise map");
    CHECK(statistic != std::string::npos);
    CHECK(map != std::string::npos);
    CHECK(statistic < map);
    const auto built = run("compile 'x - mean(x)' -i x=64x32 --arch sm_90", env);
    CHECK(built.status == 0);
    CHECK(built.output.find("statistic 0: sm_90:") != std::string::npos);
    const auto json = run("compile 'x - mean(x)' -i x=64x32 --arch sm_90 --json", env);
    CHECK(json.output.find("\"statistics\": [") != std::string::npos);
    const auto file = dir.path / "programs.txt";
    std::ofstream(file) << "x - mean(x)\n";
    const auto warm = run("warm " + file.string() + " --arch sm_90", env);
    CHECK(warm.status == 0);
    CHECK(warm.output.find("statistic 0 sm_90") != std::string::npos);
}

TEST_CASE("compile says a CUBIN's registers and local memory; for PTX neither") {
    TempDir dir;
    const std::string env = "LOSSJIT_CACHE_DIR=" + dir.path.string();
    const auto cubin = run("compile 'mean((p - t)^2)' -i p=64x32 -i t=64x32 --arch sm_90", env);
    CHECK(cubin.status == 0);
    CHECK(cubin.output.find(" registers a thread, no local memory\n") != std::string::npos);
    const auto json = nlohmann::json::parse(run("compile 'mean((p - t)^2)' -i p=64x32 -i t=64x32 --arch sm_90 --json", env).output);
    CHECK(json["registers"].get<int>() > 0);
    CHECK(json["local_bytes"].get<int>() == 0);
    const auto ptx = run("compile 'mean((p - t)^2)' -i p=64x32 -i t=64x32 --arch compute_90 --json", env);
    CHECK(ptx.status == 0);
    const auto ptx_json = nlohmann::json::parse(ptx.output);
    CHECK(ptx_json["registers"].is_null());
    CHECK(ptx_json["local_bytes"].is_null());
    CHECK(run("compile 'mean((p - t)^2)' -i p=64x32 -i t=64x32 --arch compute_90", env).output.find("registers") == std::string::npos);
}

TEST_CASE("emit, compile and warm --gpu choose kernels as that GPU would; other names and architectures are refused") {
    TempDir dir;
    const std::string env = "LOSSJIT_CACHE_DIR=" + dir.path.string();
    // The row prefetch is the H200's default for a block alone on its SM (cross-entropy's: the next
    // row walked ahead, its take picked), not the H100's.
    const std::string ce = "emit " + example("cross_entropy.loss") + " -i x=512x32768 -i y=512:integers[0,9]:i64 --grad x";
    const auto h200 = run(ce + " --gpu h200"), h100 = run(ce + " --gpu h100");
    CHECK(h200.status == 0);
    CHECK(h100.status == 0);
    CHECK(h200.output.find("next row walked ahead") != std::string::npos);
    CHECK(h100.output.find("next row walked ahead") == std::string::npos);
    CHECK(h100.output.find("next row prefetched") == std::string::npos);
    const auto unknown = run(ce + " --gpu a100");
    CHECK(unknown.status == 2);
    CHECK(unknown.output.find("unknown GPU 'a100'") != std::string::npos);
    CHECK(unknown.output.find("h200") != std::string::npos);
    const auto other_arch = run("compile 'mean(x^2)' -i x=64x32 --gpu h100 --arch sm_80", env);
    CHECK(other_arch.status == 2);
    CHECK(other_arch.output.find("chosen for h100 (sm_90)") != std::string::npos);
    const auto file = dir.path / "programs.txt";
    std::ofstream(file) << "mean(x^2)\n";
    CHECK(run("warm " + file.string() + " --arch sm_90 --gpu h200", env).status == 0);
    const auto warm_other = run("warm " + file.string() + " --arch sm_80 --gpu h200", env);
    CHECK(warm_other.status == 2);
    CHECK(warm_other.output.find("compiled") == std::string::npos);  // refused before compiling anything
}

TEST_CASE("two processes compiling the same loss compile once (shared disk cache)") {
    TempDir dir;
    const std::string env = "LOSSJIT_CACHE_DIR=" + dir.path.string();
    const std::string args = "compile " + example("kl.loss") + " -i p=16x16 -i t=16x16 --arch sm_90";
    const auto first = run(args, env);
    const auto second = run(args, env);
    CHECK(first.status == 0);
    CHECK(first.output.find("(compiled, NVRTC") != std::string::npos);
    CHECK(second.output.find("(disk hit)") != std::string::npos);
    CHECK(run(args, "LOSSJIT_CACHE=off " + env).status == 2);  // test_cache_cli.cpp: nothing to fill
    CHECK(run(args, "LOSSJIT_CACHE=bogus " + env).output.find("expected off, read or readwrite") != std::string::npos);
}

TEST_CASE("every driver symbol resolves against the toolkit's stub libcuda") {
    if (!fs::exists(LOSSJIT_CUDA_STUB)) return;
    const auto r = run("info", std::string("LOSSJIT_LIBCUDA=") + LOSSJIT_CUDA_STUB);
    CHECK(r.status == 0);
    // The stub exports every symbol; only its cuInit refuses. A missing symbol would say "lacks".
    CHECK(r.output.find("did not initialise") != std::string::npos);
    CHECK(r.output.find("lacks") == std::string::npos);
}

TEST_CASE("--grad computes gradients on the CPU reference; --output-grad writes them; --dump grad") {
    TempDir dir;
    const std::string file = (dir.path / "gt.npy").string();
    const auto r = run("run " + example("hinge.loss") + " --input p=2x3:uniform[-2,2] --input t=3:sign --cpu --grad p "
                       "--output-grad t=" + file + " --dump grad");
    CHECK(r.status == 0);
    CHECK(r.output.find("d/dp = -(t * _2)") != std::string::npos);
    CHECK(r.output.find("grad p of shape 2x3 (CPU reference, float64): ") != std::string::npos);
    CHECK(r.output.find("grad t of shape 3 (CPU reference, float64), written to " + file) != std::string::npos);
    const auto t = lossjit::load_npy(file);
    CHECK(t.shape == lossjit::Shape{3});

    // The same numbers through the API, rounded to float32 as the file holds them.
    lossjit::Options options;
    options.inputs = {"p", "t"};
    const auto loss = lossjit::compile("mean(max(0, 1 - p*t))", options);
    const auto p_data = lossjit::generate(lossjit::parse_generator("2x3:uniform[-2,2]"), lossjit::seed_for(0, "p"));
    const auto t_data = lossjit::generate(lossjit::parse_generator("3:sign"), lossjit::seed_for(0, "t"));
    const std::vector<lossjit::TensorView> views{p_data.view(), t_data.view()};
    const auto grads = loss.reference_grad(views, std::vector<std::string>{"t"});
    REQUIRE(t.dtype == lossjit::DType::float32);
    for (std::size_t i = 0; i < 3; ++i) CHECK(t.floats()[i] == static_cast<float>(grads[0].values[i]));

    const auto map = run("run 'x * x' --input x=3:range --cpu --grad x --json");
    CHECK(map.status == 0);
    CHECK(map.output.find("\"device\": \"cpu-reference\"") != std::string::npos);
    CHECK(map.output.find("\"first\": [\n        0.0,\n        2.0,\n        4.0\n") != std::string::npos);

    const auto param = run("run 'param beta = 1; mean(beta * p)' --input p=3 --cpu --grad beta");
    CHECK(param.status == 2);
    CHECK(param.output.find("'beta' is a parameter: parameters are constants and have no gradient") != std::string::npos);
    CHECK(run("run 'mean(p)' --input p=3 --cpu --output-grad p").status == 2);

    // A gradient the inputs cannot have fails before any value is printed: an integer input.
    const auto integer = run("run 'mean(x * y)' --input x=3 --input y=3:integers[0,3]:i64 --cpu --grad y");
    CHECK(integer.status == 2);
    CHECK(integer.output.find("'y' is int64: an integer or bool input has no gradient") != std::string::npos);
    CHECK(integer.output.find("\n0") == std::string::npos);  // no value line
    // A broadcast input of a program that reduces along rows: the CPU reference sums its gradient
    // (rows of a = 0..5: 3 and 12, over N = 2).
    const auto rows = run("run 'mean(w * sum(a, -1))' --input a=2x3:range --input w=2x1 --cpu --grad w");
    CHECK(rows.status == 0);
    CHECK(rows.output.find("grad w of shape 2x1 (CPU reference, float64): 1.5, 6") != std::string::npos);

    // --dump grad shows the derivatives for the shapes given: w [N, 1] is one value per row.
    const auto per_row = run("run 'mean(w * sum(a, -1))' --input a=2x3 --input w=2x1 --cpu --grad a --dump grad");
    CHECK(per_row.status == 0);
    CHECK(per_row.output.find("d/da = w * g\n") != std::string::npos);
}

}  // TEST_SUITE
