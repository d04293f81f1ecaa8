// Embedding lossjit in a C++ program: compile a loss once, call it on device tensors.
//   build/example_embed            (uses the GPU, or says why not and uses the CPU reference)
#include <cstdio>
#include <vector>

#include "lossjit/host.hpp"
#include "lossjit/lossjit.hpp"

int main() try {
    // Inputs are named in the order the call passes them; beta is set per call without recompiling.
    lossjit::Options options;
    options.inputs = {"p", "t"};
    auto loss = lossjit::compile("param beta = 1; d = abs(p - t); mean(d < beta ? 0.5 * d^2 / beta : d - 0.5 * beta)",
                                 options);

    const auto p = lossjit::generate(lossjit::parse_generator("1024x4096:normal"), 1);
    const auto t = lossjit::generate(lossjit::parse_generator("1024x4096:normal"), 2);

    std::string why_not;
    if (!lossjit::cuda_available(&why_not)) {
        std::printf("%s; CPU reference: %.9g\n", why_not.c_str(), loss.reference({{p.view(), t.view()}}));
        return 0;
    }
    lossjit::DeviceBuffer dp(p.values.size() * sizeof(float)), dt(t.values.size() * sizeof(float));
    dp.upload(p.values.data(), dp.size());
    dt.upload(t.values.data(), dt.size());
    const std::vector<lossjit::TensorView> inputs{lossjit::TensorView::contiguous(dp.data(), p.shape),
                                                  lossjit::TensorView::contiguous(dt.data(), t.shape)};
    std::printf("smooth_l1(beta=1)   = %.9g\n", loss(inputs));
    loss.set_param("beta", 0.5);
    std::printf("smooth_l1(beta=0.5) = %.9g\n", loss(inputs));
    std::printf("CPU reference       = %.9g\n", loss.reference({{p.view(), t.view()}}));
    return 0;
} catch (const lossjit::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
