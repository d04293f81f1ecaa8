// Cold start: what the first kernel costs in a fresh process, against bare NVRTC in the same run.
// One mode per process, so each measures a truly first call (bench/cold_start.py alternates them):
//
//   lossjit_cold_start bare      NVRTC alone, a hand-written MSE reduction kernel of the kind a
//                                user would write without lossjit, to sm_XX CUBIN: the first call in
//                                the process, then a second, different kernel (NVRTC loaded)
//   lossjit_cold_start lossjit   lossjit::compile + the first evaluate of mean((p - t)^2) (an empty
//                                cache directory), a second program in the same process, the first
//                                program again in a new Loss (the in-memory cache), then the call
//                                path of the first Loss (its kernel held: no lookup at all)
//   lossjit_cold_start disk      the same first program, its entry already on disk
//
// Prints one JSON object. CUDA context creation is timed apart (device_ms): it is the driver's, the
// same for any CUDA program, and not part of either compile.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <nvrtc.h>

#include "jit/cache.hpp"
#include "lossjit/lossjit.hpp"
#include "tools/json_text.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// What a user writes by hand for mean((p - t)^2): a grid-stride loop, a block reduction, an atomic.
const char* kHandWritten = R"(
extern "C" __global__ void mse(const float* p, const float* t, float* out, long long n, float scale) {
    __shared__ float partial[32];
    float acc = 0.0f;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const float d = p[i] - t[i];
        acc += d * d;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (threadIdx.x == 0) atomicAdd(out, acc * scale);
    }
}
)";

double bare_compile(const std::string& source, const std::string& arch) {
    const auto start = Clock::now();
    nvrtcProgram program = nullptr;
    if (nvrtcCreateProgram(&program, source.c_str(), "mse.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) return -1;
    const std::string option = "--gpu-architecture=" + arch;
    const char* options[] = {option.c_str()};
    const bool ok = nvrtcCompileProgram(program, 1, options) == NVRTC_SUCCESS;
    std::size_t size = 0;
    std::string cubin;
    if (ok && nvrtcGetCUBINSize(program, &size) == NVRTC_SUCCESS) {
        cubin.resize(size);
        nvrtcGetCUBIN(program, cubin.data());
    }
    nvrtcDestroyProgram(&program);
    const double ms = ms_since(start);
    return ok && !cubin.empty() ? ms : -1;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    // The programs' inputs in this dtype (bench/cold_start.py --dtype): a new bfloat16 program too
    // must be ready quickly.
    const auto dtype = lossjit::parse_dtype(argc > 2 ? argv[2] : "float32");
    if (!dtype) {
        std::fprintf(stderr, "lossjit_cold_start: unknown dtype %s\n", argv[2]);
        return 2;
    }
    std::string why;
    if (!lossjit::cuda_available(&why)) {
        std::fprintf(stderr, "lossjit_cold_start needs a GPU: %s\n", why.c_str());
        return 2;
    }
    nlohmann::json out{{"mode", mode}, {"dtype", lossjit::to_string(*dtype)}};
    const auto info = lossjit::device_info(0);
    out["arch"] = info.arch();
    if (mode == "bare") {
        out["first_ms"] = bare_compile(kHandWritten, info.arch());
        std::string second = kHandWritten;
        second.replace(second.find("d * d"), 5, "fabsf(d)");
        out["second_ms"] = bare_compile(second, info.arch());
    } else if (mode == "lossjit" || mode == "disk") {
        lossjit::DeviceBuffer p(1024 * 8), t(1024 * 8), result(sizeof(float));
        p.fill_bytes(0);
        t.fill_bytes(0);
        const std::vector<lossjit::TensorView> views{lossjit::TensorView::contiguous(p.data(), {1024}, *dtype),
                                                     lossjit::TensorView::contiguous(t.data(), {1024}, *dtype)};
        auto* r = static_cast<float*>(result.data());
        auto timed_first = [&](const char* text, nlohmann::json& row) {
            const auto start = Clock::now();
            auto loss = lossjit::compile(text);
            loss.evaluate(views, r);
            row["wall_ms"] = ms_since(start);
            const auto& tm = loss.timings();
            row["cache"] = tm.cache ? std::string(lossjit::to_string(*tm.cache)) : std::string();
            row["cache_ms"] = tm.cache_ms;  // the lookup (and NVRTC, when it compiles)
            row["device_ms"] = tm.device_ms;
            row["nvrtc_ms"] = tm.nvrtc_ms;
            row["own_ms"] = tm.total_ms() - tm.device_ms - tm.nvrtc_ms;  // parse, check, emit, hash, cache I/O, load
            row["ready_ms"] = tm.total_ms() - tm.device_ms;              // string to launchable kernel
            return loss;
        };
        nlohmann::json first, second;
        auto loss = timed_first("mean((p - t)^2)", first);
        out["first"] = first;
        if (mode == "lossjit") {
            timed_first("mean(abs(p - t))", second);
            out["second"] = second;
            nlohmann::json again;  // a new Loss for the first program: the in-memory cache finds its kernel
            timed_first("mean((p - t)^2)", again);
            out["again"] = again;
            // The in-memory lookup itself, repeated (the first one above ran with cold CPU caches).
            const std::string source = loss.cuda_source(views);
            const std::string target = loss.timings().target;
            constexpr int kLookups = 1000;
            auto start_lookup = Clock::now();
            for (int i = 0; i < kLookups; ++i) (void)lossjit::KernelCache::process().get(source, target);
            out["lookup_us"] = ms_since(start_lookup) * 1000.0 / kLookups;
            // The call path once the kernel is held: no lookup at all, only parameters and the launch.
            for (int i = 0; i < 100; ++i) loss.evaluate(views, r);
            lossjit::synchronize();
            const int calls = 10000;
            const auto start = Clock::now();
            for (int i = 0; i < calls; ++i) loss.evaluate(views, r);
            out["warm_call_us"] = ms_since(start) * 1000.0 / calls;
            lossjit::synchronize();
        }
    } else {
        std::fprintf(stderr, "usage: lossjit_cold_start bare|lossjit|disk [DTYPE]\n");
        return 2;
    }
    std::printf("%s\n", lossjit::json_text(out, -1).c_str());
    return 0;
}
