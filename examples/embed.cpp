// Embedding lossjit in a C++ program: compile a loss once, call it on device tensors.
//   build/example_embed            (uses the GPU, or says why not and uses the CPU reference)
// It uses only the installed API (find_package(lossjit) + lossjit::lossjit); a test builds it that way.
#include <cmath>
#include <cstdio>
#include <vector>

#include "lossjit/lossjit.hpp"

namespace {

// Deterministic inputs without any tooling: a smooth pattern is enough to exercise both branches
// of smooth L1.
std::vector<float> pattern(std::size_t count, float phase) {
    std::vector<float> values(count);
    for (std::size_t i = 0; i < count; ++i) values[i] = 2.0f * std::sin(0.001f * static_cast<float>(i) + phase);
    return values;
}

}  // namespace

int main() try {
    // Inputs are named in the order the call passes them; beta is set per call without recompiling.
    lossjit::Options options;
    options.inputs = {"p", "t"};
    auto loss = lossjit::compile("param beta = 1; d = abs(p - t); mean(d < beta ? 0.5 * d^2 / beta : d - 0.5 * beta)",
                                 options);

    const lossjit::Shape shape{1024, 4096};
    const std::vector<float> p = pattern(1024 * 4096, 0.0f), t = pattern(1024 * 4096, 1.0f);
    const std::vector<lossjit::TensorView> host{lossjit::TensorView::contiguous(p.data(), shape),
                                                lossjit::TensorView::contiguous(t.data(), shape)};

    std::string why_not;
    if (!lossjit::cuda_available(&why_not)) {
        std::printf("%s; CPU reference: %.9g\n", why_not.c_str(), loss.reference(host));
        return 0;
    }
    lossjit::DeviceBuffer dp(p.size() * sizeof(float)), dt(t.size() * sizeof(float));
    dp.upload(p.data(), dp.size());
    dt.upload(t.data(), dt.size());
    const std::vector<lossjit::TensorView> inputs{lossjit::TensorView::contiguous(dp.data(), shape),
                                                  lossjit::TensorView::contiguous(dt.data(), shape)};
    std::printf("smooth_l1(beta=1)   = %.9g\n", loss(inputs));
    loss.set_param("beta", 0.5);
    std::printf("smooth_l1(beta=0.5) = %.9g\n", loss(inputs));
    std::printf("CPU reference       = %.9g\n", loss.reference(host));
    return 0;
} catch (const lossjit::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
