// linear_loss: the rows of h a chunk at a time through logits = h W^T + bias (cuBLASLt), the
// program's value-and-gradient kernel on the chunk, and the backward products dh = G W and
// dW += G^T h (G: the chunk's d loss / d logits). Row-major tensors are cuBLAS's column-major
// transposes, so each product below is written for the transposes: logits^T = W h^T, dh^T = W^T G^T,
// dW^T = h^T G.
//
// G overwrites the logits in their buffer. Every kernel kind may write a gradient over the input
// it is of: the elementwise loop reads an element and writes its gradient in one thread and one
// step; the row kinds write gradients in their last pass over the row, which starts when every
// earlier pass (and the row's values: totals, takes such as logits[y]) is done, and in which each
// thread reads (from memory or the row cache) the columns it then writes and no others. Halving
// the chunk buffers doubles the rows a chunk takes: half the products, and half the passes of dW
// in and out of memory that its accumulation over chunks costs (tests/test_linear_loss.cpp runs
// every kind this way against the reference).
#include "lossjit/linear_loss.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <type_traits>

#include <fmt/format.h>

#include "cuda/blaslt.hpp"
#include "cuda/driver.hpp"
#include "ir/program.hpp"
#include "pipeline.hpp"

namespace lossjit {
namespace {

constexpr std::size_t kAlignment = 256;
std::size_t aligned(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

cudaDataType_t blas_type(DType dtype) {
    switch (dtype) {
        case DType::float32: return CUDA_R_32F;
        case DType::bfloat16: return CUDA_R_16BF;
        case DType::float16: return CUDA_R_16F;
        default: throw InternalError("blas_type of a dtype linear_loss refuses");
    }
}

// What a chunk of `count` of the `rows` rows weighs in a value of this share.
double chunk_weight(RowShare share, std::int64_t count, std::int64_t rows) {
    return share == RowShare::Sum ? 1.0 : static_cast<double>(count) / static_cast<double>(rows);
}

// `pointer` advanced by `rows` rows of `stride` elements of `dtype`.
template <class T>
T* row_offset(T* pointer, std::int64_t rows, std::int64_t stride, DType dtype) {
    using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
    const std::int64_t bytes = rows * stride * static_cast<std::int64_t>(size_of(dtype));
    return reinterpret_cast<T*>(reinterpret_cast<Byte*>(pointer) + bytes);
}

// The row stride of a 2-D operand with unit stride along its rows (what cuBLAS reads).
std::int64_t leading_stride(const Dims& shape, const Dims& strides, std::string_view what) {
    if (shape.size() != 2) throw UsageError(fmt::format("linear_loss: {} must have 2 dimensions", what));
    if (strides.empty()) return shape[1];
    if (strides[1] != 1 && shape[1] > 1)
        throw UsageError(fmt::format("linear_loss: {} must be contiguous along its last dimension", what));
    if (strides[0] < shape[1] && shape[0] > 1)
        throw UsageError(fmt::format("linear_loss: {}'s rows overlap (stride {} < {})", what, strides[0], shape[1]));
    return std::max<std::int64_t>(strides[0], shape[1]);
}

void check_output(const OutputView& view, DType operands, const Shape& shape, std::string_view what) {
    if (!view.data) return;
    if (!(view.shape == shape))
        throw UsageError(fmt::format("linear_loss: {} has shape {}; it must be {}", what, format_shape(view.shape),
                                     format_shape(shape)));
    if (view.dtype != operands && view.dtype != DType::float32)
        throw UsageError(fmt::format("linear_loss: {} is {}; it must be {} or float32", what, to_string(view.dtype),
                                     to_string(operands)));
    if (shape.size() == 1 && !view.strides.empty() && view.strides[0] != 1 && shape[0] > 1)
        throw UsageError(fmt::format("linear_loss: {} must be contiguous", what));
}

// Where each buffer of a call lies in its workspace.
struct Areas {
    // The gradient overwrites the logits; `sums` and `factor`: a program run by its reductions' (by_totals).
    std::size_t logits = 0, partials = 0, sums = 0, factor = 0, ones = 0, blas = 0, total = 0;
};

Areas areas(std::int64_t rows, std::int64_t chunks, std::int64_t classes, std::size_t results, DType dtype,
            bool bias_gradient) {
    const std::size_t chunk = aligned(static_cast<std::size_t>(rows * classes) * size_of(dtype));
    const std::size_t values = aligned(static_cast<std::size_t>(chunks) * results * sizeof(double));
    Areas a;
    std::size_t at = 0;
    a.logits = at, at += chunk;
    a.partials = at, at += values;
    a.sums = at, at += aligned(results * sizeof(double));
    a.factor = at, at += aligned(sizeof(float));
    a.ones = at, at += bias_gradient ? aligned(static_cast<std::size_t>(rows) * size_of(dtype)) : 0;
    a.blas = at, at += cuda::BlasLt::kWorkspaceBytes;
    a.total = at;
    return a;
}

}  // namespace

struct LinearLoss::State {
    State(Loss l, LinearLossOptions o)
        : loss(std::move(l)), options(std::move(o)),
          combine(compile("sum(p * w, 0)", [] {
              Options c;
              c.source_name = "linear_loss combine";
              c.inputs = {"p", "w"};
              c.expect = Kind::Map;
              return c;
          }())) {}

    Loss loss;
    LinearLossOptions options;
    Loss combine;  // the results over all rows: each chunk's, weighed by its share
    std::vector<RowShare> shares;  // of each value a chunk gives: the results, or the reductions by_totals
    // A Composite program whose results are not sums of its reductions (split_totals): the chunks
    // compute its reductions (`per_chunk`), `by_totals` combines their sums into the results and the
    // factor the gradients are then scaled by, which `scaler` applies.
    std::optional<Loss> per_chunk, by_totals, scaler;
    std::size_t logits_slot = 0;
    std::vector<bool> split_index;  // per input slot: an index input (split with the rows at rank 1)

    std::mutex mutex;  // the held workspace and cuBLASLt handle
    std::shared_ptr<cuda::Context> context;
    std::unique_ptr<cuda::BlasLt> blas;
    std::optional<cuda::Memory> held;
    // Each chunk's weight in each value it gives (`shares`), [chunks, values] float64, per (rows,
    // chunk rows): made once for each (fresh memory, so no kernel of an earlier call can be reading it).
    std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<cuda::Memory>> weights;
};

LinearLoss::LinearLoss(Loss loss, LinearLossOptions options)
    : state_(std::make_unique<State>(std::move(loss), std::move(options))) {
    State& s = *state_;
    const ir::Program& program = s.loss.checked_program();
    check_row_split(program);
    const auto& inputs = s.loss.inputs();
    const auto found = std::find(inputs.begin(), inputs.end(), s.options.logits);
    if (found == inputs.end() || !s.loss.uses(s.options.logits))
        throw UsageError(fmt::format("linear_loss: the program never reads '{}', the input that receives the logits "
                                     "(LinearLossOptions::logits)",
                                     printable(s.options.logits)));
    s.logits_slot = static_cast<std::size_t>(found - inputs.begin());
    try {
        s.shares = row_shares(program);
    } catch (const SourceError&) {
        if (program.reduction != ir::Reduction::Composite) throw;
        // Past check_row_split, the refusal is of how the results combine the reductions: run the
        // reductions by chunks, and combine their sums after (SourceError where that cannot either).
        TotalsSplit split = split_totals(program, static_cast<int>(s.logits_slot));
        s.shares = std::move(split.shares);
        // The reductions' program walks the logits: it takes the program's knobs. The others are
        // scalar programs of a few elements, at the defaults.
        Options options;
        options.device = s.loss.device();
        options.source_name = program.source_name;
        Options chunk_options = options;
        chunk_options.knobs = s.loss.options().knobs;
        chunk_options.use_tuning = s.loss.options().use_tuning;
        s.per_chunk.emplace(Loss::from_program(std::move(split.per_chunk), chunk_options));
        s.by_totals.emplace(Loss::from_program(std::move(split.combine), options));
        Options scaler = options;
        scaler.source_name = "linear_loss factor";
        scaler.inputs = {"d", "g"};
        s.scaler.emplace(compile("d * g", scaler));
    }
    s.split_index.assign(inputs.size(), false);
    for (const ir::Node& n : program.nodes)
        if (n.kind == ir::NodeKind::Take) {
            const ir::Node& index = program.node(n.args[1]);
            if (index.kind == ir::NodeKind::Input) s.split_index[static_cast<std::size_t>(index.slot)] = true;
        }
}

LinearLoss::~LinearLoss() = default;
LinearLoss::LinearLoss(LinearLoss&&) noexcept = default;
LinearLoss& LinearLoss::operator=(LinearLoss&&) noexcept = default;

const Loss& LinearLoss::loss() const { return state_->loss; }
Loss& LinearLoss::loss() { return state_->loss; }

std::vector<const Loss*> LinearLoss::programs() const {
    const State& s = *state_;
    if (s.per_chunk) return {&*s.per_chunk, &*s.by_totals};
    return {&s.loss};
}

std::vector<std::string> LinearLoss::others() const {
    std::vector<std::string> names = state_->loss.inputs();
    names.erase(names.begin() + static_cast<std::ptrdiff_t>(state_->logits_slot));
    return names;
}

LinearLoss::Plan LinearLoss::plan(const TensorView& h, const TensorView& W, bool bias_gradient) const {
    const State& s = *state_;
    if (h.shape.size() != 2 || W.shape.size() != 2)
        throw UsageError(fmt::format("linear_loss: h [N, H] and W [V, H] must have 2 dimensions (they are {} and {})",
                                     format_shape(h.shape), format_shape(W.shape)));
    if (h.shape[1] != W.shape[1])
        throw UsageError(fmt::format("linear_loss: h is {} and W {}: their last dimensions (H) differ",
                                     format_shape(h.shape), format_shape(W.shape)));
    if (h.dtype != W.dtype || (h.dtype != DType::float32 && h.dtype != DType::bfloat16 && h.dtype != DType::float16))
        throw UsageError(fmt::format("linear_loss: h and W must be both float32, bfloat16 or float16 (they are {} "
                                     "and {})",
                                     to_string(h.dtype), to_string(W.dtype)));
    const std::int64_t rows = h.shape[0], classes = W.shape[0];
    if (rows == 0 || classes == 0 || h.shape[1] == 0)
        throw UsageError(fmt::format("linear_loss: h {} and W {} have no rows, classes or features",
                                     format_shape(h.shape), format_shape(W.shape)));
    std::int64_t most = s.options.chunk_rows;
    if (most < 0) throw UsageError(fmt::format("linear_loss: chunk_rows {} is negative", most));
    if (most == 0) {
        const std::size_t row_bytes = static_cast<std::size_t>(classes) * size_of(h.dtype);
        most = std::max<std::int64_t>(1, static_cast<std::int64_t>(s.options.chunk_bytes / row_bytes));
        if (most >= 128) most -= most % 128;  // whole tiles of the products
    }
    Plan p;
    p.chunks = (rows + most - 1) / most;
    // Chunks of equal size rather than a short last one: the products' tiles stay full.
    p.chunk_rows = (rows + p.chunks - 1) / p.chunks;
    if (s.options.chunk_rows == 0 && p.chunk_rows % 64 != 0 && (p.chunk_rows / 64 + 1) * 64 <= most)
        p.chunk_rows = (p.chunk_rows / 64 + 1) * 64;
    p.chunks = (rows + p.chunk_rows - 1) / p.chunk_rows;
    p.workspace_bytes = areas(p.chunk_rows, p.chunks, classes, s.shares.size(), h.dtype, bias_gradient).total;
    return p;
}

void LinearLoss::run(const TensorView& h, const TensorView& W, const TensorView* bias,
                     std::span<const TensorView> others, const OutputView& values, const LinearGrads* grads,
                     Stream stream, void* workspace) {
    if (state_->loss.kind() == Kind::Map && grads)
        throw UsageError("linear_loss: the gradients of a map (one value per row) need its upstream gradient: "
                         "run() gives the values, backward() the gradients");
    enqueue(h, W, bias, others, &values, nullptr, grads, stream, workspace);
}

void LinearLoss::backward(const TensorView& h, const TensorView& W, const TensorView* bias,
                          std::span<const TensorView> others, const TensorView& upstream, const LinearGrads& grads,
                          Stream stream, void* workspace) {
    if (state_->loss.kind() != Kind::Map)
        throw UsageError("linear_loss: backward() is for maps (one value per row); a reduction's run() computes its "
                         "gradients beside its value");
    enqueue(h, W, bias, others, nullptr, &upstream, &grads, stream, workspace);
}

// One walk over the chunks for every kind of call: a reduction's values (and gradients), a map's
// values (`values`), or a map's gradients (`upstream`).
void LinearLoss::enqueue(const TensorView& h, const TensorView& W, const TensorView* bias,
                         std::span<const TensorView> others, const OutputView* values, const TensorView* upstream,
                         const LinearGrads* grads, Stream stream, void* workspace) {
    State& s = *state_;
    const bool map = s.loss.kind() == Kind::Map;
    const auto& names = s.loss.inputs();
    if (others.size() + 1 != names.size())
        throw UsageError(fmt::format("linear_loss: the program reads {} inputs beside '{}' ({}); {} were given",
                                     names.size() - 1, s.options.logits, fmt::join(this->others(), ", "),
                                     others.size()));
    const bool want_dh = grads && grads->dh.data, want_dW = grads && grads->dW.data;
    const bool want_dbias = grads && grads->dbias.data;
    const bool gradients = want_dh || want_dW || want_dbias;
    const Plan p = plan(h, W, want_dbias);
    const std::int64_t rows = h.shape[0], features = h.shape[1], classes = W.shape[0];
    const DType dtype = h.dtype;
    const std::int64_t ld_h = leading_stride(h.shape, h.strides, "h");
    const std::int64_t ld_W = leading_stride(W.shape, W.strides, "W");
    if (bias) {
        if (bias->shape.size() != 1 || bias->shape[0] != classes || bias->dtype != dtype)
            throw UsageError(fmt::format("linear_loss: bias must be [{}] of {} (it is {} of {})", classes,
                                         to_string(dtype), format_shape(bias->shape), to_string(bias->dtype)));
        if (!bias->strides.empty() && bias->strides[0] != 1 && classes > 1)
            throw UsageError("linear_loss: bias must be contiguous");
    }
    if (want_dbias && !bias) throw UsageError("linear_loss: a bias gradient was asked for without a bias");
    const std::size_t results = s.loss.result_count();
    const std::size_t per_chunk = s.shares.size();  // values a chunk gives: the results, or the reductions
    Loss& chunk_loss = s.per_chunk ? *s.per_chunk : s.loss;
    if (values && !is_floating(values->dtype))
        throw UsageError(fmt::format("linear_loss: values are {}; they must be of a floating dtype",
                                     to_string(values->dtype)));
    if (values && !map && (values->numel() != static_cast<std::int64_t>(results) || values->shape.size() > 1))
        throw UsageError(fmt::format("linear_loss: values must be {} element(s) of rank 0 or 1, one per result",
                                     results));
    // A map's values and upstream gradient: one per row of h, along a dimension of any stride.
    auto row_stride = [&](const Dims& shape, const Dims& strides, std::string_view what) {
        if (shape.size() != 1 || shape[0] != rows)
            throw UsageError(fmt::format("linear_loss: {} has shape {}; the map gives one value per row of h: [{}]",
                                         what, format_shape(shape), rows));
        return strides.empty() ? std::int64_t{1} : strides[0];
    };
    const std::int64_t values_stride = values && map ? row_stride(values->shape, values->strides, "values") : 0;
    const std::int64_t upstream_stride = upstream ? row_stride(upstream->shape, upstream->strides, "upstream") : 0;
    std::int64_t ld_dh = 0, ld_dW = 0;
    if (grads) {
        check_output(grads->dh, dtype, {rows, features}, "dh");
        check_output(grads->dW, dtype, {classes, features}, "dW");
        check_output(grads->dbias, dtype, {classes}, "dbias");
        if (want_dh) ld_dh = leading_stride(grads->dh.shape, grads->dh.strides, "dh");
        if (want_dW) ld_dW = leading_stride(grads->dW.shape, grads->dW.strides, "dW");
        if (gradients && !s.loss.result_differentiable(0))
            throw UsageError("linear_loss: the program's first result has no gradient");
    }
    // Which inputs are split with the rows, checked before anything is enqueued.
    std::vector<bool> split(names.size(), false);
    for (std::size_t i = 0, o = 0; i < names.size(); ++i) {
        if (i == s.logits_slot) continue;
        const TensorView& v = others[o++];
        if (v.shape.size() > 2)
            throw UsageError(fmt::format("linear_loss: input '{}' has {} dimensions; inputs are of at most 2 ([N, V], "
                                         "[N, 1], [V], [N] for an index)",
                                         names[i], v.shape.size()));
        split[i] = (v.shape.size() == 2 && v.shape[0] == rows && rows > 1) ||
                   (v.shape.size() == 1 && s.split_index[i] && v.shape[0] == rows);
        if (v.shape.size() == 1 && s.split_index[i] && !split[i])
            throw UsageError(fmt::format("linear_loss: the index input '{}' is {}; it must have one value per row of "
                                         "h ({})",
                                         names[i], format_shape(v.shape), rows));
    }
    // The chunk's inputs: the logits in the workspace, the split ones from the chunk's first row.
    std::vector<TensorView> inputs(names.size());
    auto chunk_inputs = [&](void* logits, std::int64_t first, std::int64_t count) {
        for (std::size_t i = 0, o = 0; i < names.size(); ++i) {
            if (i == s.logits_slot) {
                inputs[i] = TensorView::contiguous(logits, Dims{count, classes}, dtype);
                continue;
            }
            TensorView v = others[o++];
            if (split[i]) {
                const Dims strides = v.effective_strides();
                v.data = row_offset(v.data, first, strides[0], v.dtype);
                v.shape[0] = count;
                v.strides = strides;
            }
            inputs[i] = v;
        }
    };
    if (map) {  // one value per row, not one per logit: checked on the shapes before anything runs
        chunk_inputs(nullptr, 0, std::min(p.chunk_rows, rows));
        const Shape out = s.loss.output_shape(inputs);
        if (out.size() != 1)
            throw UsageError(fmt::format("linear_loss: the map gives an output of shape {} for a chunk of logits {}; "
                                         "it must give one value per row (a map of one value per element is as large "
                                         "as the logits: write a reduction)",
                                         format_shape(out), format_shape(inputs[s.logits_slot].shape)));
    }

    std::lock_guard lock(s.mutex);
    if (!s.context) s.context = cuda::Context::for_device(s.loss.device());
    cuda::ScopedContext scope(*s.context);
    if (!s.blas) s.blas = std::make_unique<cuda::BlasLt>(s.context);
    if (!workspace) {
        if (!s.held || s.held->size() < p.workspace_bytes) {
            s.held.reset();
            s.held.emplace(s.context, p.workspace_bytes);
        }
        workspace = reinterpret_cast<void*>(s.held->get());
    }
    const Areas area = areas(p.chunk_rows, p.chunks, classes, per_chunk, dtype, want_dbias);
    if (s.per_chunk)  // the copies run with the program's current parameter values
        for (const auto& param : s.loss.params())
            for (Loss* l : {&*s.per_chunk, &*s.by_totals}) l->set_param(param.name, param.value);
    auto at = [&](std::size_t offset) { return static_cast<char*>(workspace) + offset; };
    auto* partials = reinterpret_cast<double*>(at(area.partials));
    const CUstream cu_stream = reinterpret_cast<CUstream>(stream);
    if (want_dbias) {  // the ones that sum G's rows into dbias, one product per chunk
        const auto ones = reinterpret_cast<CUdeviceptr>(at(area.ones));
        const auto count = static_cast<std::size_t>(p.chunk_rows);
        if (dtype == DType::float32) LOSSJIT_CU(cuMemsetD32Async(ones, 0x3F800000u, count, cu_stream));
        else LOSSJIT_CU(cuMemsetD16Async(ones, dtype == DType::bfloat16 ? 0x3F80 : 0x3C00, count, cu_stream));
    }

    const cuda::Memory* weights = nullptr;  // a reduction's chunks' weights in each result
    if (!map) {
        auto table = s.weights.find({rows, p.chunk_rows});
        if (table == s.weights.end()) {
            std::vector<double> host(static_cast<std::size_t>(p.chunks) * per_chunk);
            for (std::int64_t c = 0; c < p.chunks; ++c) {
                const std::int64_t count = std::min(p.chunk_rows, rows - c * p.chunk_rows);
                for (std::size_t r = 0; r < per_chunk; ++r)
                    host[static_cast<std::size_t>(c) * per_chunk + r] = chunk_weight(s.shares[r], count, rows);
            }
            auto memory = std::make_unique<cuda::Memory>(s.context, host.size() * sizeof(double));
            LOSSJIT_CU(cuMemcpyHtoD(memory->get(), host.data(), host.size() * sizeof(double)));
            table = s.weights.emplace(std::pair(rows, p.chunk_rows), std::move(memory)).first;
        }
        weights = table->second.get();
    }
    // The first result's gradient of each chunk is scaled by its share (on the host: a launch argument).
    auto first_weight = [&](std::int64_t count) {
        return map ? 1.0f : static_cast<float>(chunk_weight(s.shares[0], count, rows));
    };

    const std::string wrt[] = {s.options.logits};
    for (std::int64_t c = 0; c < p.chunks; ++c) {
        const std::int64_t first = c * p.chunk_rows, count = std::min(p.chunk_rows, rows - first);
        const void* h_chunk = row_offset(h.data, first, ld_h, dtype);
        cuda::Gemm forward;  // logits^T [V x n] = W [V x H] . h_chunk^T [H x n]
        forward.transpose_a = true;
        forward.m = classes, forward.n = count, forward.k = features;
        forward.a = W.data, forward.lda = ld_W;
        forward.b = h_chunk, forward.ldb = ld_h;
        forward.d = at(area.logits), forward.ldd = classes;
        forward.operand_type = forward.output_type = blas_type(dtype);
        forward.bias = bias ? bias->data : nullptr;
        s.blas->run(forward, at(area.blas), cuda::BlasLt::kWorkspaceBytes, cu_stream);
        chunk_inputs(at(area.logits), first, count);

        const OutputView gradient = OutputView::contiguous(at(area.logits), Dims{count, classes}, dtype);
        if (map && values) {
            OutputView out = *values;
            out.data = row_offset(out.data, first, values_stride, out.dtype);
            out.shape = Dims{count};
            out.strides = Dims{values_stride};
            s.loss.map(inputs, out, stream);
            continue;
        }
        if (map) {
            TensorView up = *upstream;
            up.data = row_offset(up.data, first, upstream_stride, up.dtype);
            up.shape = Dims{count};
            up.strides = Dims{upstream_stride};
            s.loss.grad(inputs, wrt, std::span(&gradient, 1), up, stream);
        } else {
            const auto values_here = static_cast<std::int64_t>(per_chunk);
            const OutputView chunk_values =
                OutputView::contiguous(partials + c * values_here, Dims{values_here}, DType::float64);
            if (!gradients) {
                chunk_loss.evaluate(inputs, chunk_values, stream);
                continue;
            }
            chunk_loss.value_and_grad(inputs, wrt, std::span(&gradient, 1), chunk_values, stream,
                                      Upstream(first_weight(count)));
        }
        if (want_dh) {  // dh_chunk^T [H x n] = W^T [H x V] . G^T [V x n]
            cuda::Gemm back;
            back.m = features, back.n = count, back.k = classes;
            back.a = W.data, back.lda = ld_W;
            back.b = at(area.logits), back.ldb = classes;
            back.d = row_offset(grads->dh.data, first, ld_dh, grads->dh.dtype);
            back.ldd = ld_dh;
            back.operand_type = blas_type(dtype), back.output_type = blas_type(grads->dh.dtype);
            s.blas->run(back, at(area.blas), cuda::BlasLt::kWorkspaceBytes, cu_stream);
        }
        if (want_dW) {  // dW^T [H x V] (+)= h_chunk^T [H x n] . G [n x V]
            cuda::Gemm back;
            back.transpose_b = true;
            back.m = features, back.n = classes, back.k = count;
            back.a = h_chunk, back.lda = ld_h;
            back.b = at(area.logits), back.ldb = classes;
            back.d = grads->dW.data, back.ldd = ld_dW;
            back.operand_type = blas_type(dtype), back.output_type = blas_type(grads->dW.dtype);
            back.beta = c == 0 ? 0.0f : 1.0f;
            s.blas->run(back, at(area.blas), cuda::BlasLt::kWorkspaceBytes, cu_stream);
        }
        if (want_dbias) {  // dbias [V x 1] (+)= G^T [V x n] . ones [n x 1]
            cuda::Gemm back;
            back.m = classes, back.n = 1, back.k = count;
            back.a = at(area.logits), back.lda = classes;
            back.b = at(area.ones), back.ldb = count;
            back.d = grads->dbias.data, back.ldd = classes;
            back.operand_type = blas_type(dtype), back.output_type = blas_type(grads->dbias.dtype);
            back.beta = c == 0 ? 0.0f : 1.0f;
            s.blas->run(back, at(area.blas), cuda::BlasLt::kWorkspaceBytes, cu_stream);
        }
    }
    if (map) return;
    // The chunks' values, each weighed by its share: the results, or the reductions' sums.
    const Dims shape{p.chunks, static_cast<std::int64_t>(per_chunk)};
    const auto* weight_table = reinterpret_cast<const void*>(weights->get());
    const TensorView combined[] = {TensorView::contiguous(partials, shape, DType::float64),
                                   TensorView::contiguous(weight_table, shape, DType::float64)};
    OutputView out = *values;  // a rank-0 view of the one result as a vector of it
    if (out.shape.empty()) out = OutputView{values->data, values->dtype, Dims{static_cast<std::int64_t>(results)}, {}};
    if (!s.per_chunk) {
        s.combine.map(combined, out, stream);
        return;
    }
    auto* sums = reinterpret_cast<double*>(at(area.sums));
    s.combine.map(combined, OutputView::contiguous(sums, Dims{shape[1]}, DType::float64), stream);
    std::vector<TensorView> reductions;
    for (std::int64_t k = 0; k < shape[1]; ++k) reductions.push_back(TensorView::contiguous(sums + k, Dims{1}, DType::float64));
    s.by_totals->evaluate(reductions, out, stream);
    if (!gradients) return;
    // The chunks' gradients are of the reduction the first result's flows through: times d (first
    // result) / d (that reduction), at the sums of all the reductions.
    auto* factor = reinterpret_cast<float*>(at(area.factor));
    const std::string first[] = {"t0"};
    const OutputView factor_out = OutputView::contiguous(factor, Dims{1}, DType::float32);
    s.by_totals->grad(reductions, first, std::span(&factor_out, 1), stream);
    const TensorView factor_in = TensorView::contiguous(factor, Dims{}, DType::float32);
    auto scale = [&](const OutputView& g, std::int64_t ld) {  // in place: each element read, then written
        if (!g.data) return;
        const Dims strides = g.shape.size() == 2 ? Dims{ld, 1} : Dims{1};
        const TensorView in[] = {TensorView{g.data, g.dtype, g.shape, strides}, factor_in};
        s.scaler->map(in, OutputView{g.data, g.dtype, g.shape, strides}, stream);
    };
    scale(grads->dh, ld_dh);
    scale(grads->dW, ld_dW);
    scale(grads->dbias, 0);
}

}  // namespace lossjit
