// The eager autograd path of a reduction in C++ (python/lossjit/_native.py builds and loads it;
// docs/python.md, "The native autograd path").
//
// Why C++: on small inputs a forward and backward is the host's time, and a Python
// torch.autograd.Function that launches nothing already costs 0.91x torch eager's F.mse_loss
// forward and backward, where the same Function in C++ costs 0.71x (H200, 4096 elements, round 254
// of docs/results/issue-31/stop75/); the fused kernel's launch fits in the difference.
//
// What it does is _EagerReduce's small-input way (python/lossjit/_torch.py), nothing more: forward
// launches the fused value-and-gradient kernel through the C API and saves the gradients (and the
// inputs they belong to); backward multiplies them by the upstream gradient. Python prepares every call as for its own path (the
// layout's input views, the gradient plan's views, the stream's lossjit_exec) and passes their
// addresses; this file only allocates the gradients, writes their data pointers into the plan's
// views and launches. The library is reached through the function pointer Python's ctypes loaded,
// so the extension links nothing of lossjit and survives rebuilds of the library.
#include <torch/extension.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "lossjit/lossjit.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using ValueAndGrad = decltype(&lossjit_value_and_grad);

// A launch that returned a status (its message names it): Python takes its own path for the call,
// which grows a scratch that was too small or raises the library's error with its message.
struct LaunchError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// One call as Python prepared it: the addresses of its C API arguments. `plan` holds one
// lossjit_view per differentiated input (contiguous, the input's shape and dtype; data written
// here), then the value's.
struct Call {
    ValueAndGrad value_and_grad;
    lossjit_loss* loss;
    const lossjit_view* inputs;
    const char* const* names;
    lossjit_view* plan;
    const lossjit_exec* exec;
    at::Tensor value;  // where the value goes: the next of Python's pooled 0-dim results
};

// What a gradient says when differentiated again: Python's text (_lib.SECOND_DERIVATIVE), set at load.
std::string second_derivative = "lossjit differentiates a program once";

struct FusedReduce : public torch::autograd::Function<FusedReduce> {
    static at::Tensor forward(AutogradContext* ctx, const Call& call, int64_t mask, at::TensorList tensors) {
        const auto count = static_cast<int64_t>(tensors.size());
        std::vector<at::Tensor> grads;
        for (int64_t i = 0; i < count; ++i) {
            if (!(mask >> i & 1)) continue;
            const at::Tensor& t = tensors[static_cast<size_t>(i)];
            grads.push_back(at::empty(t.sizes(), t.options().requires_grad(false)));
            call.plan[grads.size() - 1].data = grads.back().data_ptr();
        }
        call.plan[grads.size()].data = call.value.data_ptr();
        const lossjit_status status =
            call.value_and_grad(call.loss, call.inputs, static_cast<size_t>(count), call.names, grads.size(), call.plan,
                                call.plan + grads.size(), 1.0f, nullptr, call.exec);
        if (status != LOSSJIT_OK)
            throw LaunchError("lossjit_value_and_grad returned status " + std::to_string(static_cast<int>(status)));
        ctx->saved_data["mask"] = mask;
        ctx->saved_data["count"] = count;
        // The gradients, then the inputs they belong to (the refusal below needs their edges).
        std::vector<at::Tensor> saved = grads;
        for (int64_t i = 0; i < count; ++i)
            if (mask >> i & 1) saved.push_back(tensors[static_cast<size_t>(i)]);
        ctx->save_for_backward(saved);
        ctx->set_materialize_grads(false);
        return call.value;
    }

    static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
        const int64_t mask = ctx->saved_data["mask"].toInt();
        const int64_t count = ctx->saved_data["count"].toInt();
        variable_list out(static_cast<size_t>(2 + count));  // nothing for the call and the mask
        const at::Tensor& upstream = grad_outputs[0];
        if (!upstream.defined()) return out;
        const bool create_graph = at::GradMode::is_enabled();
        const variable_list saved = ctx->get_saved_variables();
        const size_t n = saved.size() / 2;
        variable_list grads;
        {
            at::NoGradGuard plain;
            for (size_t k = 0; k < n; ++k) grads.push_back(saved[k] * upstream);
        }
        // With create_graph=True the products would carry the upstream gradient's history at most: a
        // second derivative through them would miss its term through the inputs. Each gets a node
        // that refuses, with edges to the inputs and the upstream gradient so that differentiating
        // anything that depends on it reaches the node (once_differentiable's leads only to the
        // upstream gradient, and where that needs no grad leaves the products constants: a gradient
        // penalty would silently lose the term).
        if (create_graph) {
            variable_list reached(saved.begin() + static_cast<std::ptrdiff_t>(n), saved.end());
            reached.push_back(upstream);
            auto refuse = std::make_shared<torch::autograd::Error>(second_derivative, torch::autograd::collect_next_edges(reached));
            for (auto& g : grads) torch::autograd::set_history(g, refuse);
        }
        size_t k = 0;
        for (int64_t i = 0; i < count; ++i)
            if (mask >> i & 1) out[static_cast<size_t>(2 + i)] = grads[k++];
        return out;
    }
};

template <class T>
T* address(uint64_t a) {
    return reinterpret_cast<T*>(static_cast<uintptr_t>(a));
}

at::Tensor fused(const std::vector<at::Tensor>& tensors, int64_t mask, const at::Tensor& value, uint64_t entry,
                 uint64_t loss, uint64_t inputs, uint64_t names, uint64_t plan, uint64_t exec) {
    const Call call{address<std::remove_pointer_t<ValueAndGrad>>(entry),
                    address<lossjit_loss>(loss),
                    address<const lossjit_view>(inputs),
                    address<const char* const>(names),
                    address<lossjit_view>(plan),
                    address<const lossjit_exec>(exec),
                    value};
    return FusedReduce::apply(call, mask, at::TensorList(tensors));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "lossjit's eager autograd path of a reduction in C++ (python/lossjit/_native.py)";
    m.def("fused", &fused,
          "The fused value and gradients of a reduction as an autograd node: (tensors, mask, value, "
          "lossjit_value_and_grad's address, loss, inputs, names, plan, exec)");
    m.def("set_second_derivative", [](std::string text) { second_derivative = std::move(text); },
          "What a gradient raises when differentiated again (Python's _lib.SECOND_DERIVATIVE, at load)");
    pybind11::register_exception<LaunchError>(m, "LaunchError");
}
