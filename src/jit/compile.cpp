#include "jit/compile.hpp"

#include <cstdlib>
#include <memory>
#include <string_view>

#include <fmt/format.h>
#include <nvrtc.h>

#include "lossjit/errors.hpp"
#include "pipeline.hpp"

namespace lossjit {
namespace {

void check_nvrtc(nvrtcResult result, const char* what) {
    if (result != NVRTC_SUCCESS) throw Error(fmt::format("NVRTC {} failed: {}", what, nvrtcGetErrorString(result)));
}

// Owns an nvrtcProgram from the moment it exists.
struct ProgramDeleter {
    void operator()(nvrtcProgram* p) const {
        nvrtcDestroyProgram(p);
        delete p;
    }
};
using ProgramHandle = std::unique_ptr<nvrtcProgram, ProgramDeleter>;

}  // namespace

std::vector<int> supported_archs() {
    int count = 0;
    check_nvrtc(nvrtcGetNumSupportedArchs(&count), "nvrtcGetNumSupportedArchs");
    std::vector<int> archs(static_cast<std::size_t>(count));
    if (count > 0) check_nvrtc(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
    return archs;
}

std::string nvrtc_version() {
    int major = 0, minor = 0;
    check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion");
    return fmt::format("{}.{}", major, minor);
}

std::string target_for(int major, int minor) {
    const int wanted = major * 10 + minor;
    int best = 0;
    for (int arch : supported_archs()) {
        if (arch == wanted) return fmt::format("sm_{}", arch);
        if (arch < wanted) best = std::max(best, arch);
    }
    if (best == 0) throw CudaError(fmt::format("NVRTC {} cannot build for compute capability {}.{}", nvrtc_version(), major, minor));
    return fmt::format("compute_{}", best);
}

std::string normalize_target(const std::string& text) {
    std::string digits = text;
    std::string prefix = "sm_";
    if (text.rfind("sm_", 0) == 0) digits = text.substr(3);
    else if (text.rfind("compute_", 0) == 0) { digits = text.substr(8); prefix = "compute_"; }
    const bool numeric = !digits.empty() && digits.size() <= 4 &&
                         digits.find_first_not_of("0123456789") == std::string::npos;
    if (!numeric) throw UsageError(fmt::format("'{}' is not a GPU architecture (expected e.g. sm_90)", text));
    const int arch = std::stoi(digits);
    const auto archs = supported_archs();
    if (std::find(archs.begin(), archs.end(), arch) == archs.end()) {
        throw UsageError(fmt::format("NVRTC {} cannot build for {}{} (it supports {})", nvrtc_version(), prefix, digits,
                                     fmt::join(archs, ", ")));
    }
    return prefix + digits;
}

int target_arch(const std::string& text) {
    const std::string target = normalize_target(text);
    return std::stoi(target.substr(target.find('_') + 1));
}

bool fast_compile_requested() {
    static const bool requested = [] {
        const char* value = std::getenv("LOSSJIT_FAST_COMPILE");
        return value && *value && std::string_view(value) != "0";
    }();
    return requested;
}

std::vector<std::string> compile_options(const std::string& target, bool fast_math) {
    // No fast math by default: PyTorch's float32 semantics (IEEE division and sqrt, denormals kept).
    // --minimal: the kernels use builtins only (no texture, runtime or launch API declarations), and
    // leaving those out saves NVRTC a few milliseconds per program.
    std::vector<std::string> options{"--gpu-architecture=" + target, "--std=c++17", "--minimal"};
    // Opt-in only: about a third less NVRTC time, but ptxas optimises less, so kernels may be
    // slower. The options are part of the cache key, so such kernels never mix with the others.
    if (fast_compile_requested()) options.push_back("--Ofast-compile=mid");
    // The fast-math knob: approximate division, sqrt and transcendentals, denormals flushed to zero.
    // Also part of the key through these options (and marked in the kernel's signature line).
    if (fast_math) options.push_back("--use_fast_math");
    return options;
}

KernelImage compile_cuda(const std::string& source, const std::string& target, bool fast_math) {
    const auto options = compile_options(target, fast_math);
    ProgramHandle program(new nvrtcProgram{});
    check_nvrtc(nvrtcCreateProgram(program.get(), source.c_str(), "lossjit_kernel.cu", 0, nullptr, nullptr),
                "nvrtcCreateProgram");

    std::vector<const char*> argv;
    for (const auto& o : options) argv.push_back(o.c_str());
    const nvrtcResult result = nvrtcCompileProgram(*program, static_cast<int>(argv.size()), argv.data());

    std::size_t log_size = 0;
    check_nvrtc(nvrtcGetProgramLogSize(*program, &log_size), "nvrtcGetProgramLogSize");
    std::string log(log_size, '\0');
    if (log_size > 0) check_nvrtc(nvrtcGetProgramLog(*program, log.data()), "nvrtcGetProgramLog");
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();

    if (result != NVRTC_SUCCESS) {
        throw CompileError(fmt::format("NVRTC could not compile the generated kernel ({}); this is a lossjit bug",
                                       nvrtcGetErrorString(result)),
                           log, options, source);
    }

    KernelImage image;
    image.target = target;
    image.log = std::move(log);
    std::size_t size = 0;
    if (image.is_cubin()) {
        check_nvrtc(nvrtcGetCUBINSize(*program, &size), "nvrtcGetCUBINSize");
        image.data.resize(size);
        check_nvrtc(nvrtcGetCUBIN(*program, image.data.data()), "nvrtcGetCUBIN");
    } else {
        check_nvrtc(nvrtcGetPTXSize(*program, &size), "nvrtcGetPTXSize");
        image.data.resize(size);
        check_nvrtc(nvrtcGetPTX(*program, image.data.data()), "nvrtcGetPTX");
    }
    return image;
}

}  // namespace lossjit
