// lossjit's benchmark: the five reference problems through the C++ API, a streaming-read and a copy
// kernel for the roofline, a size sweep, and the per-call host cost of a small loss. Timings are
// CUDA events around single launches: warm-up first, then the median of --reps runs.
//
//   build/bench/lossjit_bench --json bench.json            (bench/run.sh adds PyTorch and the report)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "jit/compile.hpp"
#include "cuda/driver.hpp"
#include "tools/host.hpp"
#include "tools/json_text.hpp"
#include "util/numeric.hpp"
#include "lossjit/lossjit.hpp"
#include "cuda/timer.hpp"
#include "tools/roofline.hpp"
#include "tuning/knobs.hpp"

using namespace lossjit;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Where the example programs are: --examples DIR, else examples/ two levels above this binary
// (build/bench/lossjit_bench -> examples/, which also holds for a build folder copied beside a
// checkout), else the source tree this binary was built from.
fs::path find_examples(const std::string& given) {
    if (!given.empty()) return given;
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path beside = self.parent_path().parent_path().parent_path() / "examples";
        if (fs::is_directory(beside, ec)) return beside;
    }
    return fs::path(LOSSJIT_SOURCE_DIR) / "examples";
}

fs::path g_examples;
std::map<std::string, std::string> g_programs;  // read once, before any GPU work

// The text of examples/NAME; UsageError naming the path when it cannot be read (an empty program
// would otherwise fail later with a confusing parse error).
const std::string& read_example(const std::string& name) {
    if (const auto it = g_programs.find(name); it != g_programs.end()) return it->second;
    const fs::path path = g_examples / name;
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    if (in) s << in.rdbuf();
    if (!in || s.str().empty())
        throw UsageError(fmt::format("cannot read the example program {} (give the examples folder with --examples DIR)",
                                     path.string()));
    return g_programs.emplace(name, s.str()).first->second;
}

// Median of `reps` event-timed runs of `launch` (after `warmup` untimed ones), in milliseconds.
// `per_event` launches share one event pair when a single launch is too short to time alone.
double time_ms(const std::function<void()>& launch, int reps, int warmup = 3, int per_event = 1) {
    cuda::EventTimer timer(cuda::Context::for_device(0));
    for (int i = 0; i < warmup; ++i) launch();
    return timer.median_ms(launch, reps, per_event);
}

struct Device {
    std::vector<HostTensor> host;
    std::vector<DeviceBuffer> buffers;
    std::vector<TensorView> views, host_views;
};

// The inputs of `specs`, generated in float32 and rounded into `dtype` (the same values a torch
// tensor .to(dtype) holds).
Device upload(const std::vector<std::pair<std::string, std::string>>& specs, std::uint64_t seed,
              DType dtype = DType::float32) {
    Device d;
    for (const auto& [name, spec] : specs) {
        HostTensor t = generate(parse_generator(spec), seed_for(seed, name));
        d.host.push_back(dtype == DType::float32 ? std::move(t) : t.converted(dtype));
    }
    for (const auto& h : d.host) {
        d.buffers.emplace_back(h.bytes.size());
        d.buffers.back().upload(h.bytes.data(), h.bytes.size());
        d.views.push_back(TensorView::contiguous(d.buffers.back().data(), h.shape, h.dtype));
        d.host_views.push_back(h.view());
    }
    return d;
}

// ---- the roofline ---------------------------------------------------------------------------
struct Roofline {
    std::unique_ptr<cuda::Module> module;
    int sms = 0;

    Roofline() {
        const auto info = device_info(0);
        sms = info.multiprocessors;
        module = load_roofline(cuda::Context::for_device(0), target_for(info.major, info.minor));
    }

    // Times `name` (arguments `args`) for each launch shape and keeps the fastest in `best`, as GB/s
    // of `bytes` moved per launch. A one-shot kernel (one tile of 2 x block float4s per block, no
    // loop) gets the grid that covers `n4` float4s; a looping one sms x blocks_per_sm blocks.
    void fastest(json& best, const char* name, void** args, long long n4, double bytes, bool oneshot,
                 std::initializer_list<int> blocks, std::initializer_list<int> per_sms, int reps) {
        const CUfunction f = module->function(name);
        const std::vector<int> shapes = oneshot ? std::vector<int>{0} : std::vector<int>(per_sms);
        for (int block : blocks) {
            for (int per_sm : shapes) {
                if (block * per_sm > 2048) continue;  // more threads than an SM holds
                const auto grid = static_cast<unsigned>(oneshot ? (n4 + 2 * block - 1) / (2 * block) : sms * per_sm);
                const double ms = time_ms([&] {
                    LOSSJIT_CU(cuLaunchKernel(f, grid, 1, 1, static_cast<unsigned>(block), 1, 1, 0, nullptr, args, nullptr));
                }, reps);
                const double gbps = bytes / (ms * 1e6);
                if (gbps <= best["gbps"].get<double>()) continue;
                best = {{"gbps", gbps}, {"ms", ms}, {"kernel", name}, {"block", block}};
                if (!oneshot) best["blocks_per_sm"] = per_sm;
            }
        }
    }

    // Best read rate (GB/s) over variants of unroll, block size and blocks per SM.
    json read(const DeviceBuffer& buffer, int reps) {
        json best = {{"gbps", 0.0}};
        DeviceBuffer sink(64);
        void* p = buffer.data();
        void* s = sink.data();
        long long n = static_cast<long long>(buffer.size() / 16);
        void* args[] = {&p, &n, &s};
        for (const char* name : {"read_u1", "read_u2", "read_u4", "read_u8", "read_cs_u4", "read_cs_u8"})
            fastest(best, name, args, n, static_cast<double>(buffer.size()), false, {256, 512, 1024}, {2, 4, 8}, reps);
        return best;
    }

    // Best copy rate (GB/s, read + write): cuMemcpyDtoD and copy kernels.
    json copy(const DeviceBuffer& in, const DeviceBuffer& out, int reps) {
        const double bytes = 2.0 * static_cast<double>(in.size());
        const double ms = time_ms([&] {
            LOSSJIT_CU(cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(out.data()),
                                         reinterpret_cast<CUdeviceptr>(in.data()), in.size(), nullptr));
        }, reps);
        json best = {{"gbps", bytes / (ms * 1e6)}, {"ms", ms}, {"kernel", "cuMemcpyDtoDAsync"}};
        void* i = in.data();
        void* o = out.data();
        long long n = static_cast<long long>(in.size() / 16);
        void* args[] = {&i, &o, &n};
        fastest(best, "copy_oneshot_u2", args, n, bytes, true, {256, 512, 1024}, {}, reps);
        for (const char* name : {"copy_u1", "copy_u2", "copy_u4"})
            fastest(best, name, args, n, bytes, false, {256, 512}, {2, 4, 8}, reps);
        return best;
    }

    // Best rate (GB/s, reads + writes) of c = a + b, each of `bytes`: the traffic of a fused loss and gradient.
    json add(const DeviceBuffer& a, const DeviceBuffer& b, const DeviceBuffer& c, std::size_t bytes, int reps) {
        json best = {{"gbps", 0.0}};
        void* pa = a.data();
        void* pb = b.data();
        void* pc = c.data();
        long long n = static_cast<long long>(bytes / 16);
        void* args[] = {&pa, &pb, &pc, &n};
        const double moved = 3.0 * static_cast<double>(bytes);
        fastest(best, "add_oneshot_u2", args, n, moved, true, {256, 512}, {}, reps);
        for (const char* name : {"add_u1", "add_u2", "add_u4"})
            fastest(best, name, args, n, moved, false, {256, 512}, {2, 4, 8}, reps);
        return best;
    }
};

struct Problem {
    std::string name, file;
    std::vector<std::pair<std::string, std::string>> inputs;
};

const std::vector<Problem> kProblems = {
    {"hinge", "hinge.loss", {{"p", "32768x32768:uniform"}, {"t", "32768:sign"}}},
    {"mse", "mse.loss", {{"p", "32768x32768:uniform"}, {"t", "32768x32768:uniform"}}},
    {"kl", "kl.loss", {{"p", "16384x16384:softmax"}, {"t", "16384x16384:softmax"}}},
    {"smooth_l1", "smooth_l1.loss", {{"p", "32768x32768:normal"}, {"t", "32768x32768:normal"}}},
    {"hardsigmoid", "hardsigmoid.loss", {{"x", "4096x393216:normal[0,3]"}}},
};

// The row-wise losses (issue 12) at the shapes, and the inputs their gradients are taken for.
struct RowProblem {
    Problem problem;
    std::vector<std::string> wrt;
};
// The knobs of --knob: every lossjit variant this run times starts from them.
Knobs g_knobs;
Options base_options() {
    Options o;
    o.knobs = g_knobs;
    return o;
}

const std::vector<RowProblem> kRowProblems = {
    {{"cross_entropy 32768x4096", "cross_entropy.loss", {{"x", "32768x4096:uniform[-4,4]"}, {"y", "32768:integers[0,4095]:i64"}}}, {"x"}},
    {{"cross_entropy 16384x32768", "cross_entropy.loss", {{"x", "16384x32768:uniform[-4,4]"}, {"y", "16384:integers[0,32767]:i64"}}}, {"x"}},
    {{"cross_entropy 4096x131072", "cross_entropy.loss", {{"x", "4096x131072:uniform[-4,4]"}, {"y", "4096:integers[0,131071]:i64"}}}, {"x"}},
    {{"cosine 16384x16384", "cosine.loss", {{"a", "16384x16384:uniform[-1,1]"}, {"b", "16384x16384:uniform[-1,1]"}}}, {"a", "b"}},
    {{"triplet 32768x8192", "triplet.loss", {{"a", "32768x8192:uniform[-1,1]"}, {"p", "32768x8192:uniform[-1,1]"}, {"n", "32768x8192:uniform[-1,1]"}}}, {"a", "p", "n"}},
};

json bench_problem(const Problem& problem, const Device& d, int reps, const Options& options, bool check_accuracy) {
    auto loss = compile(read_example(problem.file), options);
    double bytes = 0;
    for (const auto& h : d.host) bytes += static_cast<double>(h.bytes.size());
    json row = {{"problem", problem.name}};

    if (loss.kind() == Kind::Map) {
        // The output in the inputs' dtype, as torch writes it (a bfloat16 map writes bfloat16).
        const Shape shape = loss.output_shape(d.views);
        HostTensor gpu(shape, loss.output_dtype(d.views));
        DeviceBuffer out(gpu.bytes.size());
        out.fill_bytes(0xFF);
        const auto view = OutputView::contiguous(out.data(), shape, gpu.dtype);
        bytes += static_cast<double>(gpu.bytes.size());  // the output is written once
        row["ms"] = time_ms([&] { loss.map(d.views, view); }, reps);
        if (check_accuracy) {
            out.download(gpu.bytes.data(), gpu.bytes.size());
            HostTensor ref(shape, gpu.dtype);
            loss.reference_map(d.host_views, ref.output());
            double worst = 0;  // relative to the reference value, rounded to the output's dtype
            for (std::int64_t i = 0; i < gpu.numel(); ++i)
                worst = std::max(worst, util::relative_error(gpu.at(i), ref.at(i)));
            row["max_rel_error"] = worst;
        }
    } else {
        DeviceBuffer result(sizeof(float));
        auto* r = static_cast<float*>(result.data());
        row["ms"] = time_ms([&] { loss.evaluate(d.views, r); }, reps);
        if (check_accuracy) {
            const float value = loss(d.views);
            bool same_bits = true;
            for (int i = 0; i < 10; ++i) {
                const float again = loss(d.views);
                same_bits = same_bits && std::memcmp(&again, &value, sizeof value) == 0;
            }
            const double reference = loss.reference(d.host_views);
            row["value"] = value;
            row["reference"] = reference;
            row["rel_error"] = util::relative_error(value, reference);
            row["same_bits_10_runs"] = same_bits;
        }
    }
    row["bytes"] = bytes;
    row["gbps"] = bytes / (row["ms"].get<double>() * 1e6);
    row["kernel"] = loss.timings().target;
    return row;
}

// A loss and its gradients in one kernel: reads each input once, writes each gradient once (in its
// input's own shape: hinge's d/dt is a sum over rows).
json bench_value_and_grad(const Problem& problem, const Device& d, const std::vector<std::string>& wrt, int reps,
                          bool explore, bool check_accuracy, const Options& options = base_options()) {
    std::vector<DeviceBuffer> buffers;
    std::vector<OutputView> grads;
    double bytes = 0;
    for (const auto& h : d.host) bytes += static_cast<double>(h.bytes.size());
    for (const auto& name : wrt) {
        std::size_t k = 0;
        while (problem.inputs[k].first != name) ++k;
        // Gradients are float32, whatever the input's dtype.
        const auto grad_bytes = static_cast<std::size_t>(d.host[k].numel()) * sizeof(float);
        buffers.emplace_back(grad_bytes);
        grads.push_back(OutputView::contiguous(buffers.back().data(), d.host[k].shape));
        bytes += static_cast<double>(grad_bytes);
    }
    DeviceBuffer value(sizeof(float));
    auto time_variant = [&](const Options& options) {
        auto loss = compile(read_example(problem.file), options);
        return time_ms([&] { loss.value_and_grad(d.views, wrt, grads, static_cast<float*>(value.data())); }, reps);
    };
    json row = {{"problem", fmt::format("{} value_and_grad ({})", problem.name, fmt::join(wrt, ", "))},
                {"bytes", bytes}, {"ms", time_variant(options)}};
    row["gbps"] = bytes / (row["ms"].get<double>() * 1e6);
    if (explore) {
        json variants = json::array();
        for (int block : {256, 512, 1024}) {
            for (int unroll : {1, 2, 4}) {
                for (int per_sm : {0, 1024 / block}) {  // no cap, or 1024 threads per SM
                    Options o = base_options();
                    o.knobs.block_threads = block;
                    o.knobs.unroll = unroll;
                    o.knobs.max_blocks_per_sm = per_sm;
                    variants.push_back({{"block", block}, {"unroll", unroll}, {"max_blocks_per_sm", per_sm},
                                        {"ms", time_variant(o)}});
                }
            }
        }
        row["variants"] = variants;
    }
    if (check_accuracy) {
        auto loss = compile(read_example(problem.file));
        loss.value_and_grad(d.views, wrt, grads, static_cast<float*>(value.data()));
        synchronize();
        float v = 0;
        value.download(&v, sizeof v);
        const double reference = loss.reference(d.host_views);
        row["rel_error"] = util::relative_error(v, reference);
        const auto ref = loss.reference_grad(d.host_views, wrt);
        double worst = 0;
        for (std::size_t g = 0; g < wrt.size(); ++g) {
            std::vector<float> gpu(ref[g].values.size());
            buffers[g].download(gpu.data(), gpu.size() * sizeof(float));
            worst = std::max(worst, util::largest_error_relative_to_max(gpu, ref[g].values));
        }
        row["grad_max_error_rel_to_max"] = worst;
    }
    return row;
}

// Host time per call of back-to-back launches that leave the result on the device.
json small_call(int calls) {
    Options options;
    auto loss = compile(read_example("mse.loss"), options);
    Device d = upload({{"p", "4096:uniform"}, {"t", "4096:uniform"}}, 7);
    DeviceBuffer result(sizeof(float));
    auto* r = static_cast<float*>(result.data());
    for (int i = 0; i < 100; ++i) loss.evaluate(d.views, r);
    synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) loss.evaluate(d.views, r);
    const auto end = std::chrono::steady_clock::now();
    synchronize();
    const double us = std::chrono::duration<double, std::micro>(end - start).count() / calls;
    const double gpu_ms = time_ms([&] { loss.evaluate(d.views, r); }, 50, 10, 100);
    return {{"elements", 4096}, {"host_us_per_call", us}, {"gpu_us_per_call", gpu_ms * 1000}, {"calls", calls}};
}

json size_sweep(Roofline& roofline, int reps) {
    json rows = json::array();
    auto loss = compile(read_example("mse.loss"));
    for (int log2n = 10; log2n <= 30; log2n += 2) {
        const long long n = 1ll << log2n;
        Device d = upload({{"p", fmt::format("{}:uniform", n)}, {"t", fmt::format("{}:uniform", n)}}, 11);
        DeviceBuffer result(sizeof(float));
        auto* r = static_cast<float*>(result.data());
        const int per_event = static_cast<int>(std::clamp<long long>((1ll << 24) / n, 1, 200));
        const double ms = time_ms([&] { loss.evaluate(d.views, r); }, reps, 3, per_event);
        const double bytes = 2.0 * static_cast<double>(n) * sizeof(float);
        json row = {{"log2n", log2n}, {"elements", n}, {"bytes", bytes}, {"lossjit_ms", ms}, {"lossjit_gbps", bytes / (ms * 1e6)}};
        if (log2n >= 20) {  // below that a read kernel only measures launch latency
            DeviceBuffer buffer(static_cast<std::size_t>(bytes));
            buffer.fill_bytes(0x3F);
            row["read_gbps"] = roofline.read(buffer, std::max(5, reps / 4))["gbps"];
        }
        rows.push_back(row);
    }
    return rows;
}

json bench_value_and_grad(const Problem& problem, const std::vector<std::string>& wrt, int reps, bool explore,
                          bool check_accuracy) {
    const Device d = upload(problem.inputs, 2027);
    return bench_value_and_grad(problem, d, wrt, reps, explore, check_accuracy);
}

// --variant: each row problem's inputs uploaded once, then every variant's value and value with
// gradients timed in turn, `rounds` times over (alternating, so that a drift of the GPU's clocks
// or temperature reaches every variant alike).
json bench_row_variants(const RowProblem& rp, const std::vector<std::string>& variants, int reps, int rounds,
                        double read_gbps, double copy_gbps) {
    const Device d = upload(rp.problem.inputs, 2026);
    json out = json::array();
    for (const auto& v : variants) out.push_back({{"knobs", v}, {"ms", json::array()}, {"value_and_grad_ms", json::array()}});
    for (int round = 0; round < rounds; ++round) {
        for (std::size_t i = 0; i < variants.size(); ++i) {
            Options o = base_options();
            std::stringstream list(variants[i]);
            for (std::string assignment; std::getline(list, assignment, ',');)
                if (!assignment.empty()) set_knob(o.knobs, assignment);
            const json fwd = bench_problem(rp.problem, d, reps, o, false);
            const json vg = bench_value_and_grad(rp.problem, d, rp.wrt, reps, false, false, o);
            out[i]["ms"].push_back(fwd["ms"]);
            out[i]["value_and_grad_ms"].push_back(vg["ms"]);
            out[i]["read_fraction"] = fwd["gbps"].get<double>() / read_gbps;
            out[i]["value_and_grad_floor_fraction"] = vg["gbps"].get<double>() / copy_gbps;
            std::fprintf(stderr, "%-28s %-36s %8.3f ms (%.1f%% of read)  value+grad %8.3f ms (%.1f%% of floor)\n",
                         rp.problem.name.c_str(), variants[i].c_str(),
                         fwd["ms"].get<double>(), 100 * fwd["gbps"].get<double>() / read_gbps, vg["ms"].get<double>(),
                         100 * vg["gbps"].get<double>() / copy_gbps);
        }
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) try {
    CLI::App app{"lossjit benchmark"};
    std::string json_path;
    int reps = 20;
    bool explore = false, sweep = true, accuracy = true;
    std::vector<std::string> only;
    std::string examples;
    app.add_option("--json", json_path, "write the results here");
    app.add_option("--examples", examples, "the folder of example programs (default: examples/ beside the build folder)");
    app.add_option("--reps", reps, "timed runs per measurement (median reported)")->capture_default_str();
    app.add_option("--only", only, "problems to run, by name (default: all five; with --rows, all the row problems; "
                                  "value_and_grad: issue 15's fused gradients)");
    app.add_flag("--explore", explore, "also time unroll / blocks-per-SM variants of each problem");
    app.add_flag("!--no-sweep", sweep, "skip the 2^10..2^30 size sweep");
    app.add_flag("!--no-accuracy", accuracy, "skip the CPU reference and determinism checks");
    bool rows = false;
    app.add_flag("--rows", rows, "time the row-wise losses (cross-entropy, cosine, triplet) instead: the value, and the "
                                 "value with its gradients in one kernel");
    std::string dtype_name = "float32";
    app.add_option("--dtype", dtype_name,
                   "the five problems' inputs in this dtype (generated in float32, then rounded), maps writing it "
                   "too; other than float32, only the problems are timed")
        ->capture_default_str();
    std::vector<std::string> row_variants;
    app.add_option("--variant", row_variants,
                   "with --rows: time these variants of each row problem instead (KNOB=VALUE,KNOB=VALUE; row_cache=auto "
                   "is the defaults), inputs uploaded once, twice over in turn; --only names the row problems");
    std::vector<std::string> knob_assignments;
    app.add_option("-k,--knob", knob_assignments,
                   "KNOB=VALUE: a kernel variant knob for every lossjit variant timed (docs/tuning.md); repeatable");
    CLI11_PARSE(app, argc, argv);
    for (const auto& assignment : knob_assignments) set_knob(g_knobs, assignment);
    const auto parsed_dtype = parse_dtype(dtype_name);
    if (!parsed_dtype || !is_floating(*parsed_dtype)) {
        std::fprintf(stderr, "lossjit_bench: --dtype %s: give float32, bfloat16, float16 or float64\n", dtype_name.c_str());
        return 2;
    }
    const DType dtype = *parsed_dtype;
    if (dtype != DType::float32) sweep = false;

    // Every program this run needs, read before asking for the GPU: a missing file is named, not
    // discovered as an empty program halfway through.
    g_examples = find_examples(examples);
    const auto wanted = [&](const std::string& name) {
        return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
    };
    // A misspelt name would time nothing and say nothing.
    for (const auto& name : only) {
        const auto named = [&](const auto& problems, auto problem_name) {
            return std::any_of(problems.begin(), problems.end(), [&](const auto& p) { return problem_name(p) == name; });
        };
        if (name == "value_and_grad" || named(kProblems, [](const Problem& p) { return p.name; }) ||
            named(kRowProblems, [](const RowProblem& p) { return p.problem.name; }))
            continue;
        std::string names = "value_and_grad";
        for (const auto& p : kProblems) names += ", " + p.name;
        for (const auto& p : kRowProblems) names += ", '" + p.problem.name + "'";
        std::fprintf(stderr, "lossjit_bench: --only %s: no such problem (%s)\n", name.c_str(), names.c_str());
        return 2;
    }
    for (const auto& problem : kProblems)
        if (wanted(problem.name)) read_example(problem.file);
    for (const auto& row : kRowProblems)
        if (rows) read_example(row.problem.file);
    if (wanted("value_and_grad")) {
        read_example(kProblems[0].file);
        read_example(kProblems[3].file);
    }
    read_example("mse.loss");  // the small-call and size-sweep measurements

    std::string why;
    if (!cuda_available(&why)) {
        std::fprintf(stderr, "lossjit_bench needs a GPU: %s\n", why.c_str());
        return 2;
    }
    const auto info = device_info(0);
    // Events and the roofline kernels live in the primary context, like lossjit's own launches.
    const auto context = cuda::Context::for_device(0);
    LOSSJIT_CU(cuCtxSetCurrent(context->get()));
    json out = {{"device", info.name}, {"arch", info.arch()}, {"sms", info.multiprocessors}, {"reps", reps},
                {"lossjit", kVersion}, {"nvrtc", nvrtc_version()}, {"dtype", to_string(dtype)}};
    std::fprintf(stderr, "device: %s (%s)\n", info.name.c_str(), info.arch().c_str());

    Roofline roofline;
    {
        DeviceBuffer a(8ull << 30), b(4ull << 30);
        a.fill_bytes(0x3F);
        b.fill_bytes(0x3F);
        out["read_roofline"] = roofline.read(a, reps);
        DeviceBuffer c(4ull << 30);
        out["copy_roofline"] = roofline.copy(b, c, reps);
        out["add_roofline"] = roofline.add(a, b, c, 4ull << 30, reps);
    }
    std::fprintf(stderr, "read roofline %.0f GB/s, copy roofline %.0f GB/s, add (2 reads, 1 write) %.0f GB/s\n",
                 out["read_roofline"]["gbps"].get<double>(), out["copy_roofline"]["gbps"].get<double>(),
                 out["add_roofline"]["gbps"].get<double>());

    if (rows) {
        // Forward: the inputs read once, against the read roofline. Value and gradients: the inputs
        // read once and the gradients written once is the floor, against the copy roofline.
        json row_problems = json::array();
        if (!row_variants.empty()) {
            for (const auto& rp : kRowProblems) {
                if (!wanted(rp.problem.name)) continue;
                row_problems.push_back({{"problem", rp.problem.name},
                                        {"variants", bench_row_variants(rp, row_variants, reps, 2,
                                                                        out["read_roofline"]["gbps"].get<double>(),
                                                                        out["copy_roofline"]["gbps"].get<double>())}});
            }
        }
        for (const auto& rp : row_variants.empty() ? kRowProblems : std::vector<RowProblem>{}) {
            if (!wanted(rp.problem.name)) continue;
            json row;
            std::size_t input_bytes = 0;
            {
                const Device d = upload(rp.problem.inputs, 2026);
                for (const auto& h : d.host) input_bytes += h.bytes.size();
                row = bench_problem(rp.problem, d, reps, base_options(), false);
            }
            row["read_fraction"] = row["gbps"].get<double>() / out["read_roofline"]["gbps"].get<double>();
            // The rooflines above stream 8 and 4 GB; a launch over fewer bytes pays its ramp and tail on
            // a larger share of its time (a 512 MB read takes about 0.12 ms on an H200), so each problem
            // is also set against a read, and a copy, of its own inputs' bytes: the copy moves what the
            // value and gradient floor does where every floating input is differentiated (all of these).
            {
                DeviceBuffer own((input_bytes + 15) / 16 * 16), copy_to(own.size());
                own.fill_bytes(0x3F);
                const json read = roofline.read(own, reps), copy = roofline.copy(own, copy_to, reps);
                row["read_roofline_own_bytes"] = read;
                row["copy_roofline_own_bytes"] = copy;
                row["read_fraction_own_bytes"] = row["gbps"].get<double>() / read["gbps"].get<double>();
            }
            if (explore) {
                const Device d = upload(rp.problem.inputs, 2026);
                json variants = json::array();
                for (int block : {128, 256, 512}) {
                    for (int unroll : {2, 4, 8}) {
                        for (int per_sm : {0, 2, 4, 8}) {
                            Options o = base_options();
                            o.knobs.block_threads = block;
                            o.knobs.unroll = unroll;
                            o.knobs.max_blocks_per_sm = per_sm;
                            const json v = bench_problem(rp.problem, d, reps, o, false);
                            variants.push_back({{"block", block}, {"unroll", unroll}, {"max_blocks_per_sm", per_sm},
                                                {"ms", v["ms"]}});
                        }
                    }
                }
                row["variants"] = variants;
            }
            const json vg = bench_value_and_grad(rp.problem, rp.wrt, reps, false, false);
            row["value_and_grad_ms"] = vg["ms"];
            row["value_and_grad_floor_fraction"] = vg["gbps"].get<double>() / out["copy_roofline"]["gbps"].get<double>();
            row["value_and_grad_floor_fraction_own_bytes"] =
                vg["gbps"].get<double>() / row["copy_roofline_own_bytes"]["gbps"].get<double>();
            std::fprintf(stderr,
                         "%-28s %8.3f ms (%.1f%% of read, %.1f%% of a read of its bytes)  value+grad %8.3f ms (%.1f%% of "
                         "floor, %.1f%% of a copy of its bytes)\n",
                         rp.problem.name.c_str(), row["ms"].get<double>(), 100 * row["read_fraction"].get<double>(),
                         100 * row["read_fraction_own_bytes"].get<double>(), vg["ms"].get<double>(),
                         100 * row["value_and_grad_floor_fraction"].get<double>(),
                         100 * row["value_and_grad_floor_fraction_own_bytes"].get<double>());
            row_problems.push_back(row);
        }
        out["row_problems"] = row_problems;
        if (!json_path.empty()) std::ofstream(json_path) << lossjit::json_text(out) << "\n";
        else std::printf("%s\n", lossjit::json_text(out).c_str());
        return 0;
    }

    json problems = json::array();
    for (const auto& problem : kProblems) {
        if (!wanted(problem.name)) continue;
        const Device d = upload(problem.inputs, 2026, dtype);
        json row = bench_problem(problem, d, reps, base_options(), accuracy);
        if (explore) {
            json variants = json::array();
            for (int unroll : {1, 2, 4, 8}) {
                for (int per_sm : {0, 2, 4, 8}) {
                    Options o = base_options();
                    o.knobs.unroll = unroll;
                    o.knobs.max_blocks_per_sm = per_sm;
                    json v = bench_problem(problem, d, reps, o, false);
                    variants.push_back({{"unroll", unroll}, {"max_blocks_per_sm", per_sm}, {"ms", v["ms"]}, {"gbps", v["gbps"]}});
                }
            }
            row["variants"] = variants;
        }
        std::fprintf(stderr, "%-12s %8.3f ms %7.0f GB/s %s\n", problem.name.c_str(), row["ms"].get<double>(),
                     row["gbps"].get<double>(), row.contains("rel_error") ? fmt::format("rel error {:.2e}", row["rel_error"].get<double>()).c_str() : "");
        problems.push_back(row);
    }
    out["problems"] = problems;
    if (dtype != DType::float32) {  // the gradients, the small call and the sweep are float32 measurements
        if (!json_path.empty()) std::ofstream(json_path) << lossjit::json_text(out) << "\n";
        else std::printf("%s\n", lossjit::json_text(out).c_str());
        return 0;
    }
    if (wanted("value_and_grad")) {
        out["value_and_grad"] = bench_value_and_grad(kProblems[3], {"p"}, reps, explore, accuracy);
        std::fprintf(stderr, "smooth_l1 value_and_grad %8.3f ms %7.0f GB/s\n", out["value_and_grad"]["ms"].get<double>(),
                     out["value_and_grad"]["gbps"].get<double>());
        out["hinge_value_and_grad"] = bench_value_and_grad(kProblems[0], {"p", "t"}, reps, explore, accuracy);
        std::fprintf(stderr, "hinge value_and_grad (p, t) %8.3f ms %7.0f GB/s\n",
                     out["hinge_value_and_grad"]["ms"].get<double>(), out["hinge_value_and_grad"]["gbps"].get<double>());
        // Gradients of inputs broadcast other than as a row: one label per row, a scalar weight.
        const Problem per_row{"squared_hinge", "squared_hinge.loss",
                              {{"p", "32768x32768:uniform"}, {"t", "32768x1:sign"}}};
        const Problem scalar{"weighted_mse", "weighted_mse.loss",
                             {{"w", "1:uniform"}, {"p", "32768x32768:normal"}, {"t", "32768x32768:normal"}}};
        json broadcast = json::array();
        for (const auto& [problem, wrt] : std::vector<std::pair<Problem, std::vector<std::string>>>{
                 {per_row, {"p", "t"}}, {scalar, {"w", "p"}}}) {
            json row = bench_value_and_grad(problem, wrt, reps, explore, accuracy);
            row["floor_fraction"] = row["gbps"].get<double>() / out["add_roofline"]["gbps"].get<double>();
            std::fprintf(stderr, "%s %8.3f ms %7.0f GB/s, %.1f%% of the floor (add rate)\n",
                         row["problem"].get<std::string>().c_str(), row["ms"].get<double>(), row["gbps"].get<double>(),
                         100 * row["floor_fraction"].get<double>());
            broadcast.push_back(row);
        }
        out["broadcast_value_and_grad"] = broadcast;
    }
    out["small_call"] = small_call(20000);
    std::fprintf(stderr, "mse over 4096 elements: %.2f us host time per call\n", out["small_call"]["host_us_per_call"].get<double>());
    if (sweep) out["sweep"] = size_sweep(roofline, reps);

    if (!json_path.empty()) std::ofstream(json_path) << lossjit::json_text(out) << "\n";
    else std::printf("%s\n", lossjit::json_text(out).c_str());
    return 0;
} catch (const lossjit::Error& e) {
    std::fprintf(stderr, "lossjit_bench: %s\n", e.what());
    return 1;
}
