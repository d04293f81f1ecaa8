// lossjit's torch paths in C++ (python/lossjit/_native.py builds and loads it; docs/python.md, "The
// native path"): the eager autograd node of a reduction, and the CUDA kernels of the ops lossjit::value
// and lossjit::value_and_grad, which torch.compile's code calls.
//
// Why C++: on small inputs a call is the host's time. A Python torch.autograd.Function that launches
// nothing already costs 0.91x torch eager's F.mse_loss forward and backward, where the same Function in
// C++ costs 0.71x (H200, 4096 elements, round 254 of docs/results/issue-31/stop75/); and under
// torch.compile the Python kernel of lossjit::value_and_grad (layout, plan, allocations, the ctypes
// call) was what kept a compiled step at 1.36x torch.compile's own MSE (round 257).
//
// The eager node does what _EagerReduce's small-input way (python/lossjit/_torch.py) does, nothing more:
// forward launches the fused value-and-gradient kernel through the C API and saves the gradients (and
// the inputs they belong to); backward multiplies them by the upstream gradient. Python prepares every
// call as for its own path (the layout's input views, the gradient plan's views, the stream's
// lossjit_exec) and passes their addresses; this file only allocates the gradients, writes their data
// pointers into the plan's views and launches.
//
// The ops' kernels build a call's views from the tensors' own sizes and strides and launch; Python is
// asked only what stays the same from call to call (a Loss's handle and input names, once per Loss; a
// stream's scratch, once per stream and again after it grew), and runs every call that is not the
// plain case (its kernel raises the errors, grows the scratch, handles what this file does not).
//
// The library is reached through the function pointers Python's ctypes loaded, so the extension links
// nothing of lossjit and survives rebuilds of the library.
#include <torch/extension.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
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

// ---- The CUDA kernels of lossjit::value and lossjit::value_and_grad ----

namespace py = pybind11;
using Evaluate = decltype(&lossjit_evaluate);
using OutputDtype = decltype(&lossjit_output_dtype);

// What a Loss's calls need that does not change: asked of Python once per Loss (describe), dropped
// when the Loss goes (forget, which Loss.__del__ and close() call before the handle is freed). Torch
// releases the GIL around an op's call from Python, so a call may overlap a close() on another thread: a kernel uses
// the handle only while it holds `use` shared, and forget nulls it holding `use` exclusively (a call
// that then finds it null goes to the Python kernel, which says the Loss is gone).
struct LossEntry {
    std::shared_mutex use;
    lossjit_loss* handle = nullptr;
    std::vector<std::string> names;  // the inputs', in order
    int64_t results = 1;
    std::map<std::string, int32_t> out_codes;  // the inputs' dtype codes, a byte each -> the result's (under Ops::lock)
};

// A stream's lossjit_exec and the scratch buffer it lends (held here, so it outlives a replacement on
// Python's side); asked of Python once per (device, stream), again after a launch found it too small.
struct ExecEntry {
    at::Tensor buffer;
    lossjit_exec exec{};
};

struct Ops {
    Evaluate evaluate = nullptr;
    ValueAndGrad value_and_grad = nullptr;
    OutputDtype output_dtype = nullptr;
    // describe(loss_id) -> (handle, names, results); exec_for(loss_id, device) -> (buffer, stream,
    // scratch, bytes); the Python kernels of the two ops, for every call not taken here.
    py::object describe, exec_for, python_value, python_value_and_grad;
    // Over the maps. Taken with or without the GIL, so never held while waiting for the GIL: no Python
    // runs under it and no tensor is released under it (a tensor's release may take the GIL).
    std::mutex lock;
    std::unordered_map<int64_t, std::shared_ptr<LossEntry>> losses;
    std::map<std::pair<int64_t, int64_t>, std::shared_ptr<ExecEntry>> execs;  // (device, stream id)
    std::unique_ptr<torch::Library> registration;  // the kernels, while registered
    // lossjit's dtype codes <-> torch's scalar types, as Python's table says (set_dtypes, once: calls
    // read them without a lock). code_of holds a code + 1 (0: none); type_of_code the first `codes`.
    std::array<int32_t, static_cast<size_t>(at::ScalarType::NumOptions)> code_of{};
    static constexpr size_t kMaxCodes = 32;  // lossjit has 8 dtypes (LOSSJIT_DTYPE_COUNT)
    std::array<at::ScalarType, kMaxCodes> type_of_code{};
    std::atomic<size_t> codes{0};
    // Calls launched here, and calls passed to the Python kernels (tests and debugging: ops_counts).
    std::atomic<uint64_t> launched{0}, passed{0};
};

// Made by configure_ops and never freed: its Python objects must not be released after the interpreter
// has gone.
Ops* ops = nullptr;

std::optional<int32_t> dtype_code(at::ScalarType t) {
    const auto index = static_cast<size_t>(t);
    if (index >= ops->code_of.size() || ops->code_of[index] == 0) return std::nullopt;
    return ops->code_of[index] - 1;
}

std::optional<at::ScalarType> scalar_type(int32_t code) {
    if (code < 0 || static_cast<size_t>(code) >= ops->codes.load()) return std::nullopt;
    const at::ScalarType type = ops->type_of_code[static_cast<size_t>(code)];
    if (!at::isFloatingType(type)) return std::nullopt;  // results are floating point
    return type;
}

std::shared_ptr<LossEntry> loss_entry(int64_t loss_id) {
    {
        std::lock_guard<std::mutex> hold(ops->lock);
        auto it = ops->losses.find(loss_id);
        if (it != ops->losses.end()) return it->second;
    }
    auto entry = std::make_shared<LossEntry>();
    // Described and kept under the GIL, which forget() runs under too: a Loss closed meanwhile is either
    // refused here or forgotten after.
    py::gil_scoped_acquire gil;
    // Raises (UsageError: the Loss is gone) through the op's call, as its Python kernel would.
    auto described = ops->describe(loss_id).cast<py::tuple>();
    entry->handle = reinterpret_cast<lossjit_loss*>(described[0].cast<uintptr_t>());
    entry->names = described[1].cast<std::vector<std::string>>();
    entry->results = described[2].cast<int64_t>();
    std::lock_guard<std::mutex> hold(ops->lock);
    return ops->losses.emplace(loss_id, std::move(entry)).first->second;
}

std::shared_ptr<ExecEntry> exec_entry(int64_t loss_id, int64_t device) {
    const c10::Device where(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device));
    const int64_t stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(where).id();
    const std::pair<int64_t, int64_t> key{device, stream};
    {
        std::lock_guard<std::mutex> hold(ops->lock);
        auto it = ops->execs.find(key);
        if (it != ops->execs.end()) return it->second;
    }
    auto entry = std::make_shared<ExecEntry>();
    {
        py::gil_scoped_acquire gil;
        auto got = ops->exec_for(loss_id, device).cast<py::tuple>();
        entry->buffer = got[0].cast<at::Tensor>();
        entry->exec.stream = reinterpret_cast<void*>(got[1].cast<uintptr_t>());
        entry->exec.device = static_cast<int32_t>(device);
        entry->exec.scratch = reinterpret_cast<void*>(got[2].cast<uintptr_t>());
        entry->exec.scratch_bytes = got[3].cast<size_t>();
    }
    std::lock_guard<std::mutex> hold(ops->lock);
    // Another call may have kept one meanwhile: the first kept stays (`entry`, if not kept, is released
    // after the lock).
    return ops->execs.emplace(key, entry).first->second;
}

// The most inputs a call takes here (a mask's bits, below its sign): more go to the Python kernel.
constexpr size_t kMaxInputs = 63;

// One call as this file makes it: the inputs' views (pointing into the tensors' own sizes and strides,
// valid while `inputs` is), the result's dtype, the device and its stream's exec.
struct Prepared {
    std::shared_ptr<LossEntry> loss;
    std::array<lossjit_view, kMaxInputs> views;
    size_t count = 0;
    int32_t out_code = 0;
    at::ScalarType out_type = at::kFloat;
    c10::Device device{c10::DeviceType::CUDA};
    std::shared_ptr<ExecEntry> exec;
};

// Whether the call is the plain case this file takes: the inputs' count (fewer than 64: the mask's
// bits), all on one CUDA device, dtypes lossjit reads, no input needing a gradient (the ops compute none
// of their own: their Python kernels raise), the Loss not closed. Anything else goes to the Python
// kernel, whose checks word the errors.
bool prepare(int64_t loss_id, at::TensorList inputs, Prepared& call) {
    call.loss = loss_entry(loss_id);
    if (inputs.size() != call.loss->names.size() || inputs.empty() || inputs.size() > kMaxInputs) return false;
    const bool grad_mode = at::GradMode::is_enabled();
    const auto device = inputs[0].device();
    if (!device.is_cuda()) return false;
    std::string codes;  // the out_codes key: short enough for no allocation up to 15 inputs
    for (const at::Tensor& t : inputs) {
        if (!t.defined() || t.device() != device || (grad_mode && t.requires_grad())) return false;
        const auto code = dtype_code(t.scalar_type());
        if (!code) return false;
        codes.push_back(static_cast<char>(*code));
        call.views[call.count++] = {t.data_ptr(), *code, static_cast<int32_t>(t.dim()), t.sizes().data(),
                                    t.strides().data()};
    }
    call.device = device;
    call.exec = exec_entry(loss_id, device.index());  // may ask Python: before `use` is taken
    {
        std::lock_guard<std::mutex> hold(ops->lock);
        auto it = call.loss->out_codes.find(codes);
        call.out_code = it != call.loss->out_codes.end() ? it->second : -1;
    }
    if (call.out_code < 0) {
        int32_t out = -1;
        {
            std::shared_lock<std::shared_mutex> in_use(call.loss->use);
            if (!call.loss->handle ||
                ops->output_dtype(call.loss->handle, call.views.data(), call.count, &out) != LOSSJIT_OK)
                return false;
        }
        std::lock_guard<std::mutex> hold(ops->lock);
        call.loss->out_codes.emplace(std::move(codes), out);
        call.out_code = out;
    }
    const auto type = scalar_type(call.out_code);
    if (!type) return false;
    call.out_type = *type;
    return true;
}

// Launches with the handle held in use (`launch` gets it); a Loss forgotten meanwhile is a status, as a
// failed launch is, and the caller takes the Python kernel.
template <class Launch>
lossjit_status launch_in_use(const Prepared& call, Launch&& launch) {
    std::shared_lock<std::shared_mutex> in_use(call.loss->use);
    if (!call.loss->handle) return LOSSJIT_ERROR_USAGE;
    return launch(call.loss->handle);
}

// After a launch returned a status: a scratch too small is asked of Python again on the next call
// (the Python kernel, which repeats this call, grows it).
void after_failure(lossjit_status status, const Prepared& call) {
    if (status != LOSSJIT_ERROR_SCRATCH_TOO_SMALL) return;
    std::shared_ptr<ExecEntry> dropped;  // released after the lock
    std::lock_guard<std::mutex> hold(ops->lock);
    for (auto it = ops->execs.begin(); it != ops->execs.end(); ++it)
        if (it->second == call.exec) {
            dropped = std::move(it->second);
            ops->execs.erase(it);
            break;
        }
}

std::vector<at::Tensor> tensor_list(at::TensorList inputs) { return {inputs.begin(), inputs.end()}; }

at::Tensor python_value(int64_t loss_id, at::TensorList inputs) {
    ++ops->passed;
    py::gil_scoped_acquire gil;
    return ops->python_value(loss_id, tensor_list(inputs)).cast<at::Tensor>();
}

std::vector<at::Tensor> python_value_and_grad(int64_t loss_id, at::TensorList inputs, int64_t mask) {
    ++ops->passed;
    py::gil_scoped_acquire gil;
    return ops->python_value_and_grad(loss_id, tensor_list(inputs), mask).cast<std::vector<at::Tensor>>();
}

at::Tensor value_kernel(int64_t loss_id, at::TensorList inputs) {
    Prepared call;
    if (!prepare(loss_id, inputs, call)) return python_value(loss_id, inputs);
    const auto options = at::TensorOptions().dtype(call.out_type).device(call.device);
    const int64_t results = call.loss->results;
    at::Tensor value = results == 1 ? at::empty({}, options) : at::empty({results}, options);
    const lossjit_view out{value.data_ptr(), call.out_code, results == 1 ? 0 : 1, results == 1 ? nullptr : &results,
                           nullptr};
    const lossjit_status status = launch_in_use(call, [&](lossjit_loss* handle) {
        return ops->evaluate(handle, call.views.data(), call.count, &out, &call.exec->exec);
    });
    if (status == LOSSJIT_OK) {
        ++ops->launched;
        return value;
    }
    after_failure(status, call);
    return python_value(loss_id, inputs);
}

std::vector<at::Tensor> value_and_grad_kernel(int64_t loss_id, at::TensorList inputs, int64_t mask) {
    Prepared call;
    // A program of several results, or no input differentiated: the Python kernel (the op's own
    // splitting of results into tensors of their own).
    if (!prepare(loss_id, inputs, call) || call.loss->results != 1 || mask <= 0 ||
        (mask >> static_cast<int64_t>(inputs.size())) != 0)
        return python_value_and_grad(loss_id, inputs, mask);
    std::vector<at::Tensor> out;
    out.reserve(1 + static_cast<size_t>(__builtin_popcountll(static_cast<unsigned long long>(mask))));
    out.push_back(at::empty({}, at::TensorOptions().dtype(call.out_type).device(call.device)));
    std::array<const char*, kMaxInputs> names;
    std::array<lossjit_view, kMaxInputs> grads;
    size_t differentiated = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
        if (!(mask >> i & 1)) continue;
        const at::Tensor& t = inputs[i];
        out.push_back(at::empty(t.sizes(), at::TensorOptions().dtype(t.scalar_type()).device(call.device)));
        names[differentiated] = call.loss->names[i].c_str();
        grads[differentiated++] = {out.back().data_ptr(), call.views[i].dtype, call.views[i].ndim, t.sizes().data(),
                                   nullptr};
    }
    const lossjit_view value{out[0].data_ptr(), call.out_code, 0, nullptr, nullptr};
    const lossjit_status status = launch_in_use(call, [&](lossjit_loss* handle) {
        return ops->value_and_grad(handle, call.views.data(), call.count, names.data(), differentiated, grads.data(),
                                   &value, 1.0f, nullptr, &call.exec->exec);
    });
    if (status == LOSSJIT_OK) {
        ++ops->launched;
        return out;
    }
    after_failure(status, call);
    return python_value_and_grad(loss_id, inputs, mask);
}

// lossjit's dtype codes as Python's table gives them: samples[code] is a tensor of that dtype. Read
// once a process (the table does not change; the kernels read it without a lock).
void set_dtypes(const std::vector<at::Tensor>& samples) {
    if (!ops) ops = new Ops;
    if (samples.size() > Ops::kMaxCodes)
        throw std::invalid_argument(std::to_string(samples.size()) + " dtype codes, more than the ops' kernels hold (" +
                                    std::to_string(Ops::kMaxCodes) + ")");
    if (ops->codes.load() > 0) return;
    for (size_t code = 0; code < samples.size(); ++code) {
        const at::ScalarType type = samples[code].scalar_type();
        ops->code_of[static_cast<size_t>(type)] = static_cast<int32_t>(code) + 1;
        ops->type_of_code[code] = type;
    }
    ops->codes.store(samples.size());
}

void configure_ops(uint64_t evaluate, uint64_t value_and_grad, uint64_t output_dtype, py::object describe,
                   py::object exec_for, py::object python_value, py::object python_value_and_grad) {
    if (!ops) ops = new Ops;
    ops->evaluate = address<std::remove_pointer_t<Evaluate>>(evaluate);
    ops->value_and_grad = address<std::remove_pointer_t<ValueAndGrad>>(value_and_grad);
    ops->output_dtype = address<std::remove_pointer_t<OutputDtype>>(output_dtype);
    ops->describe = std::move(describe);
    ops->exec_for = std::move(exec_for);
    ops->python_value = std::move(python_value);
    ops->python_value_and_grad = std::move(python_value_and_grad);
}

// Registers the kernels (on) or removes them (off: the ops' Python kernels run again). Returns whether
// they are registered: not before configure_ops (no torch side to run them with).
bool set_ops(bool on) {
    if (!ops) return false;
    if (on && !ops->registration) {
        auto registration = std::make_unique<torch::Library>(torch::Library::IMPL, "lossjit", c10::DispatchKey::CUDA,
                                                             __FILE__, __LINE__);
        registration->impl("value", TORCH_FN(value_kernel));
        registration->impl("value_and_grad", TORCH_FN(value_and_grad_kernel));
        ops->registration = std::move(registration);
    } else if (!on) {
        ops->registration.reset();
        decltype(ops->execs) dropped;  // released after the lock
        std::lock_guard<std::mutex> hold(ops->lock);
        dropped.swap(ops->execs);  // Python's scratch may change meanwhile, unannounced
    }
    return ops->registration != nullptr;
}

// Python replaced the scratch of (device, stream): the next call asks for the new one.
void drop_scratch(int64_t device, uintptr_t stream) {
    if (!ops) return;
    std::vector<std::shared_ptr<ExecEntry>> dropped;  // released after the lock
    std::lock_guard<std::mutex> hold(ops->lock);
    for (auto it = ops->execs.begin(); it != ops->execs.end();) {
        if (it->first.first == device && reinterpret_cast<uintptr_t>(it->second->exec.stream) == stream) {
            dropped.push_back(std::move(it->second));
            it = ops->execs.erase(it);
        } else {
            ++it;
        }
    }
}

bool ops_registered() { return ops && ops->registration; }

std::pair<uint64_t, uint64_t> ops_counts() {
    if (!ops) return {0, 0};
    return {ops->launched.load(), ops->passed.load()};
}

// A Loss gone or closed: its entry goes before its handle is freed, once no call is launching with it.
void forget(int64_t loss_id) {
    if (!ops) return;
    std::shared_ptr<LossEntry> entry;
    {
        std::lock_guard<std::mutex> hold(ops->lock);
        auto it = ops->losses.find(loss_id);
        if (it == ops->losses.end()) return;
        entry = std::move(it->second);
        ops->losses.erase(it);
    }
    std::unique_lock<std::shared_mutex> no_call(entry->use);
    entry->handle = nullptr;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "lossjit's eager autograd path of a reduction in C++ (python/lossjit/_native.py)";
    m.def("fused", &fused,
          "The fused value and gradients of a reduction as an autograd node: (tensors, mask, value, "
          "lossjit_value_and_grad's address, loss, inputs, names, plan, exec)");
    m.def("set_second_derivative", [](std::string text) { second_derivative = std::move(text); },
          "What a gradient raises when differentiated again (Python's _lib.SECOND_DERIVATIVE, at load)");
    m.def("configure_ops", &configure_ops,
          "The ops' kernels' library entry points and Python's side: (lossjit_evaluate's, lossjit_value_and_grad's "
          "and lossjit_output_dtype's addresses, describe, exec_for, the ops' Python kernels of value and "
          "value_and_grad)");
    m.def("set_dtypes", &set_dtypes,
          "lossjit's dtype codes: a tensor of each code's dtype, in code order (Python's table, _lib.DTYPE_NAMES)");
    m.def("dtype_code_of", [](const at::Tensor& t) { return ops ? dtype_code(t.scalar_type()).value_or(-1) : -1; },
          "lossjit's dtype code of a tensor as the ops' kernels read it, -1 for none (tests)");
    m.def("set_ops", &set_ops, "Registers (True) or removes (False) the CUDA kernels of lossjit::value and "
                                "lossjit::value_and_grad; returns whether they are registered (not before "
                                "configure_ops)");
    m.def("ops_registered", &ops_registered, "Whether the ops' CUDA kernels are registered");
    m.def("drop_scratch", &drop_scratch, "Python replaced the scratch of (device, stream): the next call asks again");
    m.def("ops_counts", &ops_counts, "(calls the ops' kernels launched, calls they passed to the Python kernels)");
    m.def("forget", &forget, "Drops what the ops' kernels keep of a Loss (before its handle is freed)");
    pybind11::register_exception<LaunchError>(m, "LaunchError");
}
