// capi: what capi.cpp and dlpack.cpp share: the handle behind lossjit_loss and the error guard
// that turns every C++ exception into a status code and this thread's last-error message.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lossjit/lossjit.h"
#include "lossjit/lossjit.hpp"

struct lossjit_loss {
    explicit lossjit_loss(lossjit::Loss loss);
    // The Loss of `device`: one per CUDA device, each with its own kernels, made on first use from
    // `base` (same program and parameter values). Lock-free once made.
    lossjit::Loss& on(int device);

    lossjit::Loss base;  // runs on options.device
    std::string reduction;
    std::vector<std::string> param_names;  // lossjit_param_at hands out pointers into these
    std::vector<std::string> result_names;  // and lossjit_result_name into these
    static constexpr int kMaxDevices = 64;
    std::array<std::atomic<lossjit::Loss*>, kMaxDevices> devices{};
    std::mutex mutex;  // making a device's Loss, and set_param across them
    std::vector<std::unique_ptr<lossjit::Loss>> others;
};

namespace lossjit::capi {

// Runs `body`, mapping what it throws to a status and recording the message for lossjit_last_error().
template <class Body>
lossjit_status guard(Body&& body) noexcept;

lossjit_status record(lossjit_status status, const std::string& message, int line = 0, int column = 0,
                      std::size_t scratch = 0) noexcept;
lossjit_status record_current_exception() noexcept;
void clear_error() noexcept;

template <class Body>
lossjit_status guard(Body&& body) noexcept {
    try {
        clear_error();
        body();
        return LOSSJIT_OK;
    } catch (...) {
        return record_current_exception();
    }
}

// A C view as a TensorView / OutputView (UsageError on a bad rank, a null shape or an unknown dtype).
TensorView to_view(const lossjit_view& view, const char* what);
OutputView to_output(const lossjit_view& view, const char* what);

// Runs a GPU call on the device and stream of `exec` (NULL: the default), with its scratch lent.
template <class Call>
void with_exec(lossjit_loss* handle, const lossjit_exec* exec, Call&& call) {
    if (!handle) throw UsageError("the loss handle is NULL");
    Loss& loss = exec ? handle->on(exec->device) : handle->base;
    const auto stream = static_cast<Stream>(exec ? exec->stream : nullptr);
    if (exec && exec->scratch) {
        ScratchScope scratch(exec->scratch, exec->scratch_bytes);
        call(loss, stream);
    } else {
        call(loss, stream);
    }
}

}  // namespace lossjit::capi
