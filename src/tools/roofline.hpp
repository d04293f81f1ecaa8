// The roofline kernels (src/tools/roofline.cu, embedded at build time): plain streaming reads,
// copies and adds that set the rates lossjit's kernels are compared with, by the sweep and by
// bench/lossjit_bench. One extern "C" entry per variant.
#pragma once

#include <memory>
#include <string>

#include "cuda/driver.hpp"

namespace lossjit {

// The read the sweep measures reductions against: 16-byte loads, four tiles in flight per thread.
inline constexpr const char* kRooflineRead = "read_u4";

// roofline.cu compiled by NVRTC for `target` and loaded into `context`.
std::unique_ptr<cuda::Module> load_roofline(std::shared_ptr<cuda::Context> context, const std::string& target);

}  // namespace lossjit
