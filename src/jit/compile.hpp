// compile: CUDA C++ -> CUBIN (or PTX) with NVRTC.
#pragma once

#include <string>
#include <vector>

namespace lossjit {

struct KernelImage {
    std::string target;  // "sm_90": CUBIN for exactly that GPU; "compute_90": PTX the driver will JIT
    std::string data;    // the CUBIN or PTX bytes
    std::string log;     // NVRTC's log (warnings), usually empty
    bool is_cubin() const { return target.rfind("sm_", 0) == 0; }
};

// NVRTC's version as "13.0".
std::string nvrtc_version();

// The compute capabilities this NVRTC builds for, e.g. {75, 80, ..., 120}.
std::vector<int> supported_archs();

// The target to build for a GPU of compute capability major.minor: CUBIN when this NVRTC knows the
// architecture, else PTX for the newest virtual architecture it knows (the driver JIT-compiles it).
std::string target_for(int major, int minor);

// "sm_90" / "compute_90" / "90" -> a target NVRTC accepts; throws UsageError otherwise.
std::string normalize_target(const std::string& text);
// The compute capability x 10 of a target normalize_target accepts: 90 for "sm_90" or "compute_90".
int target_arch(const std::string& text);

// LOSSJIT_FAST_COMPILE=1 (read once per process) adds --Ofast-compile=mid: faster cold starts,
// possibly slower kernels. `fast_math` (the kernel knob) adds --use_fast_math.
std::vector<std::string> compile_options(const std::string& target, bool fast_math = false);

// Throws CompileError (with log, options and source) when NVRTC rejects the source.
KernelImage compile_cuda(const std::string& source, const std::string& target, bool fast_math = false);

}  // namespace lossjit
