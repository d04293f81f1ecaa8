// capi: lossjit's C ABI (include/lossjit/lossjit.h) over lossjit::Loss. Every entry point catches
// everything: an exception never crosses the C boundary; it becomes a status and a message.
#include "capi/capi.hpp"

#include <cstddef>
#include <cstring>
#include <new>
#include <span>

#include "lossjit/linear_loss.hpp"
#include "lossjit/version.hpp"
#include "tuning/knobs.hpp"

namespace lossjit {
namespace {

// The C enum spells lossjit::DType's values; the one table of dtype facts stays in runtime/dtype.cpp.
static_assert(LOSSJIT_FLOAT32 == static_cast<int>(DType::float32) && LOSSJIT_FLOAT64 == static_cast<int>(DType::float64) &&
              LOSSJIT_BFLOAT16 == static_cast<int>(DType::bfloat16) && LOSSJIT_FLOAT16 == static_cast<int>(DType::float16) &&
              LOSSJIT_INT32 == static_cast<int>(DType::int32) && LOSSJIT_INT64 == static_cast<int>(DType::int64) &&
              LOSSJIT_UINT8 == static_cast<int>(DType::uint8) && LOSSJIT_BOOL == static_cast<int>(DType::boolean) &&
              LOSSJIT_DTYPE_COUNT == kDTypeCount);

struct LastError {
    lossjit_status status = LOSSJIT_OK;
    std::string message;
    int line = 0, column = 0;
    std::size_t scratch = 0;
};
thread_local LastError last_error;

// Inputs of one call as TensorViews; on the stack for the usual handful (a view holds its extents).
class Views {
public:
    Views(const lossjit_view* views, std::size_t count) {
        if (count > 0 && !views) throw UsageError("the inputs are NULL but their count is " + std::to_string(count));
        if (count > kInline) heap_.resize(count);
        TensorView* out = count > kInline ? heap_.data() : inline_.data();
        for (std::size_t i = 0; i < count; ++i) out[i] = capi::to_view(views[i], "an input");
        span_ = std::span<const TensorView>(out, count);
    }
    std::span<const TensorView> span() const { return span_; }

private:
    static constexpr std::size_t kInline = 8;
    std::array<TensorView, kInline> inline_;
    std::vector<TensorView> heap_;
    std::span<const TensorView> span_;
};

std::vector<std::string> names(const char* const* wrt, std::size_t count) {
    if (count > 0 && !wrt) throw UsageError("the names of the inputs to differentiate are NULL");
    std::vector<std::string> out;
    out.reserve(count);
    for (std::size_t k = 0; k < count; ++k) {
        if (!wrt[k]) throw UsageError("the name of input " + std::to_string(k) + " to differentiate is NULL");
        out.emplace_back(wrt[k]);
    }
    return out;
}

std::vector<OutputView> outputs(const lossjit_view* views, std::size_t count, const char* what) {
    if (count > 0 && !views) throw UsageError(std::string(what) + " are NULL");
    std::vector<OutputView> out;
    out.reserve(count);
    for (std::size_t k = 0; k < count; ++k) out.push_back(capi::to_output(views[k], what));
    return out;
}

const lossjit_loss& checked(const lossjit_loss* loss) {
    if (!loss) throw UsageError("the loss handle is NULL");
    return *loss;
}

}  // namespace

namespace capi {

lossjit_status record(lossjit_status status, const std::string& message, int line, int column,
                      std::size_t scratch) noexcept {
    try {
        last_error.message = message;
    } catch (...) {
        last_error.message.clear();  // no memory for the message: the status still says what happened
    }
    last_error.status = status;
    last_error.line = line;
    last_error.column = column;
    last_error.scratch = scratch;
    return status;
}

void clear_error() noexcept {
    last_error.status = LOSSJIT_OK;
    last_error.message.clear();
    last_error.line = last_error.column = 0;
    last_error.scratch = 0;
}

lossjit_status record_current_exception() noexcept {
    try {
        throw;
    } catch (const SourceError& e) {
        return record(LOSSJIT_ERROR_SOURCE, e.what(), e.where().line, e.where().column);
    } catch (const ScratchTooSmall& e) {
        return record(LOSSJIT_ERROR_SCRATCH_TOO_SMALL, e.what(), 0, 0, e.needed());
    } catch (const UnsupportedError& e) {
        return record(LOSSJIT_ERROR_UNSUPPORTED, e.what());
    } catch (const UsageError& e) {
        return record(LOSSJIT_ERROR_USAGE, e.what());
    } catch (const CaptureError& e) {
        return record(LOSSJIT_ERROR_CAPTURE, e.what());
    } catch (const CompileError& e) {
        return record(LOSSJIT_ERROR_COMPILE, std::string(e.what()) + "\n" + e.log());
    } catch (const CudaError& e) {
        // -1: no driver; CUDA_ERROR_NO_DEVICE (100), CUDA_ERROR_INVALID_DEVICE (101).
        const bool none = e.code() == -1 || e.code() == 100 || e.code() == 101;
        return record(none ? LOSSJIT_ERROR_NO_DEVICE : LOSSJIT_ERROR_CUDA, e.what());
    } catch (const std::bad_alloc&) {
        return record(LOSSJIT_ERROR_OUT_OF_MEMORY, "out of host memory");
    } catch (const std::exception& e) {
        return record(LOSSJIT_ERROR_INTERNAL, e.what());
    } catch (...) {
        return record(LOSSJIT_ERROR_INTERNAL, "internal error (please report): an unknown exception");
    }
}

TensorView to_view(const lossjit_view& view, const char* what) {
    if (view.ndim < 0 || static_cast<std::size_t>(view.ndim) > kMaxViewRank)
        throw UsageError(std::string(what) + " has " + std::to_string(view.ndim) + " dimensions; lossjit takes 0 to " +
                         std::to_string(kMaxViewRank));
    if (view.ndim > 0 && !view.shape) throw UsageError(std::string(what) + " has dimensions but a NULL shape");
    if (view.dtype < 0 || view.dtype >= static_cast<int32_t>(kDTypeCount))
        throw UsageError(std::string(what) + " has an unknown dtype (" + std::to_string(view.dtype) + ")");
    TensorView out;
    out.data = view.data;
    out.dtype = static_cast<DType>(view.dtype);
    const auto rank = static_cast<std::size_t>(view.ndim);
    out.shape = Dims(std::span<const std::int64_t>(view.shape, rank));
    if (view.strides) out.strides = Dims(std::span<const std::int64_t>(view.strides, rank));
    return out;
}

OutputView to_output(const lossjit_view& view, const char* what) {
    const TensorView in = to_view(view, what);
    return OutputView{view.data, in.dtype, in.shape, in.strides};
}

}  // namespace capi
}  // namespace lossjit

using namespace lossjit;

lossjit_loss::lossjit_loss(Loss loss) : base(std::move(loss)), reduction(base.reduction()) {
    for (const auto& p : base.params()) param_names.push_back(p.name);
    result_names = base.results();
    if (base.device() < kMaxDevices) devices[static_cast<std::size_t>(base.device())].store(&base);
}

Loss& lossjit_loss::on(int device) {
    if (device < 0 || device >= kMaxDevices)
        throw UsageError("device " + std::to_string(device) + " is not a CUDA device ordinal lossjit takes (0 to " +
                         std::to_string(kMaxDevices - 1) + ")");
    auto& slot = devices[static_cast<std::size_t>(device)];
    if (Loss* loss = slot.load(std::memory_order_acquire)) return *loss;
    std::lock_guard lock(mutex);
    if (Loss* loss = slot.load(std::memory_order_relaxed)) return *loss;
    others.push_back(std::make_unique<Loss>(base.on_device(device)));
    slot.store(others.back().get(), std::memory_order_release);
    return *others.back();
}

extern "C" {

uint32_t lossjit_c_api_version(void) { return LOSSJIT_C_API_VERSION; }
const char* lossjit_version(void) { return kVersion; }

const char* lossjit_dtype_name(int32_t dtype) {
    if (dtype < 0 || dtype >= static_cast<int32_t>(kDTypeCount)) return nullptr;
    return to_string(static_cast<DType>(dtype)).data();  // the table's names are NUL-terminated literals
}

const char* lossjit_last_error(void) { return last_error.message.c_str(); }
lossjit_status lossjit_last_error_status(void) { return last_error.status; }
int32_t lossjit_last_error_line(void) { return last_error.line; }
int32_t lossjit_last_error_column(void) { return last_error.column; }
size_t lossjit_last_error_scratch_bytes(void) { return last_error.scratch; }

int32_t lossjit_cuda_available(void) {
    std::string reason;
    int32_t available = 0;
    const lossjit_status status = capi::guard([&] { available = cuda_available(&reason) ? 1 : 0; });
    if (status == LOSSJIT_OK && !available) capi::record(LOSSJIT_ERROR_NO_DEVICE, reason);
    return available;
}

void lossjit_options_init(lossjit_options* options) {
    if (!options) return;
    std::memset(options, 0, sizeof *options);
    options->size = sizeof *options;
}

lossjit_status lossjit_compile(const char* program, const lossjit_options* options, lossjit_loss** out) {
    return lossjit_compile_n(program, program ? std::strlen(program) : 0, options, out);
}

lossjit_status lossjit_compile_n(const char* program, size_t length, const lossjit_options* options, lossjit_loss** out) {
    return capi::guard([&] {
        if (!out) throw UsageError("lossjit_compile needs somewhere to put the loss (out is NULL)");
        *out = nullptr;
        if (!program) throw UsageError("the program text is NULL");
        Options opts;
        if (options) {
            // A caller built against 1.2 passes the struct without `knobs`; anything smaller was never
            // initialised.
            constexpr std::size_t kSize12 = offsetof(lossjit_options, knobs);
            if (options->size < kSize12)
                throw UsageError("lossjit_options.size is " + std::to_string(options->size) +
                                 "; call lossjit_options_init first");
            if (options->size >= sizeof(lossjit_options) && options->knobs) set_knobs(opts.knobs, options->knobs);
            if (options->source_name) opts.source_name = options->source_name;
            if (options->input_count > 0 && !options->inputs) throw UsageError("lossjit_options.inputs is NULL");
            for (std::size_t i = 0; i < options->input_count; ++i) {
                if (!options->inputs[i]) throw UsageError("lossjit_options.inputs[" + std::to_string(i) + "] is NULL");
                opts.inputs.emplace_back(options->inputs[i]);
            }
            if (options->param_count > 0 && !options->params) throw UsageError("lossjit_options.params is NULL");
            for (std::size_t i = 0; i < options->param_count; ++i) {
                if (!options->params[i].name)
                    throw UsageError("lossjit_options.params[" + std::to_string(i) + "].name is NULL");
                opts.params.push_back({options->params[i].name, options->params[i].value});
            }
            opts.device = options->device;
            if (options->expect == LOSSJIT_KIND_REDUCTION) opts.expect = Kind::Reduction;
            else if (options->expect == LOSSJIT_KIND_MAP) opts.expect = Kind::Map;
            else if (options->expect != LOSSJIT_KIND_ANY)
                throw UsageError("lossjit_options.expect is " + std::to_string(options->expect) +
                                 "; it takes LOSSJIT_KIND_ANY, _REDUCTION or _MAP");
        }
        *out = new lossjit_loss(compile(std::string_view(program, length), std::move(opts)));
    });
}

void lossjit_free(lossjit_loss* loss) { delete loss; }

int32_t lossjit_kind_of(const lossjit_loss* loss) {
    if (!loss) return LOSSJIT_KIND_ANY;
    return loss->base.kind() == Kind::Map ? LOSSJIT_KIND_MAP : LOSSJIT_KIND_REDUCTION;
}
const char* lossjit_reduction(const lossjit_loss* loss) { return loss ? loss->reduction.c_str() : ""; }
size_t lossjit_input_count(const lossjit_loss* loss) { return loss ? loss->base.inputs().size() : 0; }
const char* lossjit_input_name(const lossjit_loss* loss, size_t index) {
    if (!loss || index >= loss->base.inputs().size()) return nullptr;
    return loss->base.inputs()[index].c_str();
}
size_t lossjit_result_count(const lossjit_loss* loss) { return loss ? loss->base.result_count() : 0; }
const char* lossjit_result_name(const lossjit_loss* loss, size_t index) {
    if (!loss || index >= loss->result_names.size()) return nullptr;
    return loss->result_names[index].c_str();  // lives as long as the handle
}
int32_t lossjit_result_differentiable(const lossjit_loss* loss, size_t index) {
    if (!loss || index >= loss->base.result_count()) return 0;
    try {
        return loss->base.result_differentiable(index) ? 1 : 0;
    } catch (...) {
        return 1;  // unknown: as a result that has one (never a gradient silently dropped)
    }
}
size_t lossjit_param_count(const lossjit_loss* loss) { return loss ? loss->base.params().size() : 0; }

lossjit_status lossjit_param_at(const lossjit_loss* loss, size_t index, const char** name, double* value) {
    return capi::guard([&] {
        const auto& l = checked(loss);
        if (index >= l.param_names.size())
            throw UsageError("the program has " + std::to_string(l.param_names.size()) + " parameters, not " +
                             std::to_string(index + 1));
        if (name) *name = l.param_names[index].c_str();  // lives as long as the handle
        if (value) *value = l.base.params()[index].value;
    });
}

lossjit_status lossjit_set_param(lossjit_loss* loss, const char* name, double value) {
    return capi::guard([&] {
        if (!loss) throw UsageError("the loss handle is NULL");
        if (!name) throw UsageError("the parameter name is NULL");
        std::lock_guard lock(loss->mutex);  // every device's Loss, so that later copies see it too
        loss->base.set_param(name, value);
        for (auto& other : loss->others) other->set_param(name, value);
    });
}

int32_t lossjit_uses(const lossjit_loss* loss, const char* name) {
    return loss && name && loss->base.uses(name) ? 1 : 0;
}

lossjit_status lossjit_scratch_bytes(lossjit_loss* loss, int32_t device, size_t* bytes) {
    return capi::guard([&] {
        if (!loss) throw UsageError("the loss handle is NULL");
        if (!bytes) throw UsageError("lossjit_scratch_bytes needs somewhere to put the size (bytes is NULL)");
        *bytes = loss->on(device).scratch_bytes();
    });
}

lossjit_status lossjit_output_shape(const lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                    int64_t* shape, int32_t* ndim) {
    return capi::guard([&] {
        const Views views(inputs, count);
        if (!shape || !ndim) throw UsageError("lossjit_output_shape needs room for the shape (shape or ndim is NULL)");
        const Shape out = checked(loss).base.output_shape(views.span());
        if (out.size() > kMaxViewRank)
            throw UsageError("the output has " + std::to_string(out.size()) + " dimensions, more than 16");
        std::copy(out.begin(), out.end(), shape);
        *ndim = static_cast<int32_t>(out.size());
    });
}

lossjit_status lossjit_output_dtype(const lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                    int32_t* dtype) {
    return capi::guard([&] {
        const Views views(inputs, count);
        if (!dtype) throw UsageError("lossjit_output_dtype needs somewhere to put the dtype (dtype is NULL)");
        *dtype = static_cast<int32_t>(checked(loss).base.output_dtype(views.span()));
    });
}

lossjit_status lossjit_evaluate(lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                const lossjit_view* result, const lossjit_exec* exec) {
    return capi::guard([&] {
        const Views views(inputs, count);
        if (!result) throw UsageError("lossjit_evaluate needs a result view (result is NULL)");
        const OutputView out = capi::to_output(*result, "the result");
        capi::with_exec(loss, exec, [&](Loss& l, Stream stream) { l.evaluate(views.span(), out, stream); });
    });
}

lossjit_status lossjit_map(lossjit_loss* loss, const lossjit_view* inputs, size_t count, const lossjit_view* output,
                           const lossjit_exec* exec) {
    return capi::guard([&] {
        const Views views(inputs, count);
        if (!output) throw UsageError("lossjit_map needs an output view (output is NULL)");
        const OutputView out = capi::to_output(*output, "the output");
        capi::with_exec(loss, exec, [&](Loss& l, Stream stream) { l.map(views.span(), out, stream); });
    });
}

lossjit_status lossjit_value_and_grad(lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                      const char* const* wrt, size_t wrt_count, const lossjit_view* grads,
                                      const lossjit_view* value, float upstream, const float* upstream_device,
                                      const lossjit_exec* exec) {
    return capi::guard([&] {
        const Views views(inputs, count);
        const auto names_ = names(wrt, wrt_count);
        const auto grads_ = outputs(grads, wrt_count, "the gradients");
        const Upstream up = upstream_device ? Upstream::on_device(upstream_device, upstream) : Upstream(upstream);
        capi::with_exec(loss, exec, [&](Loss& l, Stream stream) {
            if (value) l.value_and_grad(views.span(), names_, grads_, capi::to_output(*value, "the value"), stream, up);
            else l.grad(views.span(), names_, grads_, stream, up);
        });
    });
}

lossjit_status lossjit_map_grad(lossjit_loss* loss, const lossjit_view* inputs, size_t count, const char* const* wrt,
                                size_t wrt_count, const lossjit_view* grads, const lossjit_view* upstream,
                                const lossjit_exec* exec) {
    return capi::guard([&] {
        const Views views(inputs, count);
        const auto names_ = names(wrt, wrt_count);
        const auto grads_ = outputs(grads, wrt_count, "the gradients");
        if (!upstream) throw UsageError("a map's gradient needs the upstream gradient tensor (upstream is NULL)");
        const TensorView up = capi::to_view(*upstream, "the upstream gradient");
        capi::with_exec(loss, exec, [&](Loss& l, Stream stream) { l.grad(views.span(), names_, grads_, up, stream); });
    });
}

lossjit_status lossjit_reference(const lossjit_loss* loss, const lossjit_view* inputs, size_t count, double* value) {
    return capi::guard([&] {
        const Views views(inputs, count);
        if (!value) throw UsageError("lossjit_reference needs somewhere to put the value (value is NULL)");
        *value = checked(loss).base.reference(views.span());
    });
}

lossjit_status lossjit_reference_values(const lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                        double* values, size_t n) {
    return capi::guard([&] {
        const Views views(inputs, count);
        const Loss& l = checked(loss).base;
        if (n != l.result_count())
            throw UsageError("the program has " + std::to_string(l.result_count()) + " result" +
                             (l.result_count() == 1 ? "" : "s") + ", but room for " + std::to_string(n) + " was given");
        if (!values) throw UsageError("lossjit_reference_values needs somewhere to put the values (values is NULL)");
        const std::vector<double> got = l.reference_values(views.span());
        std::copy(got.begin(), got.end(), values);
    });
}

lossjit_status lossjit_reference_map(const lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                     const lossjit_view* output) {
    return capi::guard([&] {
        const Views views(inputs, count);
        if (!output) throw UsageError("lossjit_reference_map needs an output view (output is NULL)");
        checked(loss).base.reference_map(views.span(), capi::to_output(*output, "the output"));
    });
}

lossjit_status lossjit_reference_grad(const lossjit_loss* loss, const lossjit_view* inputs, size_t count,
                                      const char* const* wrt, size_t wrt_count, const lossjit_view* grads,
                                      double upstream, const lossjit_view* upstream_tensor) {
    return capi::guard([&] {
        const Views views(inputs, count);
        const auto names_ = names(wrt, wrt_count);
        const auto grads_ = outputs(grads, wrt_count, "the gradients");
        const Loss& l = checked(loss).base;
        const std::vector<ReferenceGradient> result =
            upstream_tensor ? l.reference_grad(views.span(), names_, capi::to_view(*upstream_tensor, "the upstream gradient"))
                            : l.reference_grad(views.span(), names_, upstream);
        for (std::size_t k = 0; k < result.size(); ++k) {
            const OutputView& g = grads_[k];
            if (!is_floating(g.dtype))
                throw UsageError("gradient " + std::to_string(k) + " is " + std::string(to_string(g.dtype)) +
                                 "; a gradient is float32, float64, bfloat16 or float16");
            if (!(g.shape == result[k].shape) || !(g.strides.empty() || g.strides == Dims(contiguous_strides(g.shape))))
                throw UsageError("gradient " + std::to_string(k) + " ('" + names_[k] + "') must be contiguous, of shape [" +
                                 format_shape(result[k].shape) + "]");
            if (!result[k].values.empty() && !g.data) throw UsageError("gradient " + std::to_string(k) + " has no data");
            for (std::size_t i = 0; i < result[k].values.size(); ++i)
                store_from_double(g.data, g.dtype, static_cast<std::int64_t>(i), result[k].values[i]);
        }
    });
}

}  // extern "C"

// ---- linear_loss --------------------------------------------------------------------------------
struct lossjit_linear {
    lossjit::LinearLoss linear;
    int device;
    const lossjit_loss* source;  // whose parameter values every call takes (lossjit_set_param on it)
};

lossjit_status lossjit_linear_create(const lossjit_loss* loss, const char* logits, int64_t chunk_rows, size_t chunk_bytes,
                                     int32_t device, lossjit_linear** out) {
    return capi::guard([&] {
        if (!loss || !out) throw UsageError("lossjit_linear_create needs a loss and an out pointer");
        *out = nullptr;
        LinearLossOptions options;
        if (logits) options.logits = logits;
        options.chunk_rows = chunk_rows;
        if (chunk_bytes) options.chunk_bytes = chunk_bytes;
        *out = new lossjit_linear{LinearLoss(loss->base.on_device(device), options), device, loss};
    });
}

void lossjit_linear_free(lossjit_linear* linear) { delete linear; }

lossjit_status lossjit_linear_plan(const lossjit_linear* linear, const lossjit_view* h, const lossjit_view* W,
                                   int32_t bias_gradient, int64_t* chunk_rows, int64_t* chunks, size_t* workspace_bytes) {
    return capi::guard([&] {
        if (!linear || !h || !W) throw UsageError("lossjit_linear_plan needs the handle, h and W");
        const auto p = linear->linear.plan(capi::to_view(*h, "h"), capi::to_view(*W, "W"), bias_gradient != 0);
        if (chunk_rows) *chunk_rows = p.chunk_rows;
        if (chunks) *chunks = p.chunks;
        if (workspace_bytes) *workspace_bytes = p.workspace_bytes;
    });
}

namespace {

// What lossjit_linear_run and lossjit_linear_backward share: the views, the device check and the
// lent scratch around the call.
template <class Call>
lossjit_status linear_call(lossjit_linear* linear, const lossjit_view* h, const lossjit_view* W,
                           const lossjit_view* bias, const lossjit_view* others, size_t count, const lossjit_view* dh,
                           const lossjit_view* dW, const lossjit_view* dbias, const lossjit_exec* exec, Call&& call) {
    return capi::guard([&] {
        if (!linear || !h || !W) throw UsageError("linear_loss needs the handle, h and W");
        if (exec && exec->device != linear->device)
            throw UsageError("this linear_loss handle runs on device " + std::to_string(linear->device) + ", not " +
                             std::to_string(exec->device));
        const Views views(others, count);
        const TensorView bias_view = bias ? capi::to_view(*bias, "bias") : TensorView{};
        LinearGrads grads;
        if (dh) grads.dh = capi::to_output(*dh, "dh");
        if (dW) grads.dW = capi::to_output(*dW, "dW");
        if (dbias) grads.dbias = capi::to_output(*dbias, "dbias");
        const auto stream = static_cast<Stream>(exec ? exec->stream : nullptr);
        // The handle runs a copy of the program: it takes the loss's current parameter values.
        for (const auto& param : linear->source->base.params()) linear->linear.loss().set_param(param.name, param.value);
        auto run = [&] {
            call(capi::to_view(*h, "h"), capi::to_view(*W, "W"), bias ? &bias_view : nullptr, views.span(),
                 (dh || dW || dbias) ? &grads : nullptr, stream);
        };
        if (exec && exec->scratch) {
            ScratchScope scratch(exec->scratch, exec->scratch_bytes);
            run();
        } else {
            run();
        }
    });
}

}  // namespace

lossjit_status lossjit_linear_run(lossjit_linear* linear, const lossjit_view* h, const lossjit_view* W,
                                  const lossjit_view* bias, const lossjit_view* others, size_t count,
                                  const lossjit_view* values, const lossjit_view* dh, const lossjit_view* dW,
                                  const lossjit_view* dbias, const lossjit_exec* exec, void* workspace) {
    return linear_call(linear, h, W, bias, others, count, dh, dW, dbias, exec,
                       [&](const TensorView& hv, const TensorView& Wv, const TensorView* b,
                           std::span<const TensorView> o, const LinearGrads* grads, Stream stream) {
                           if (!values) throw UsageError("lossjit_linear_run needs a values view (values is NULL)");
                           linear->linear.run(hv, Wv, b, o, capi::to_output(*values, "values"), grads, stream,
                                              workspace);
                       });
}

lossjit_status lossjit_linear_backward(lossjit_linear* linear, const lossjit_view* h, const lossjit_view* W,
                                       const lossjit_view* bias, const lossjit_view* others, size_t count,
                                       const lossjit_view* upstream, const lossjit_view* dh, const lossjit_view* dW,
                                       const lossjit_view* dbias, const lossjit_exec* exec, void* workspace) {
    return linear_call(linear, h, W, bias, others, count, dh, dW, dbias, exec,
                       [&](const TensorView& hv, const TensorView& Wv, const TensorView* b,
                           std::span<const TensorView> o, const LinearGrads* grads, Stream stream) {
                           if (!upstream) throw UsageError("lossjit_linear_backward needs the upstream gradient");
                           linear->linear.backward(hv, Wv, b, o, capi::to_view(*upstream, "upstream"),
                                                   grads ? *grads : LinearGrads{}, stream, workspace);
                       });
}
