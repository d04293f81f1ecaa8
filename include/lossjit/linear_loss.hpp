// linear_loss: a row program over the logits of a linear layer, logits = h W^T (+ bias), without
// ever holding all the logits: the rows of h go a chunk at a time through one product (cuBLASLt),
// the program's fused value-and-gradient kernel, and the two products of the backward pass.
//
//   lossjit::LinearLoss head(lossjit::compile("mean(logsumexp(logits, -1) - logits[y])"));
//   const lossjit::TensorView others[] = {y};
//   head.run(h, W, nullptr, others, values, &grads, stream);   // h [N, H], W [V, H], y [N]
//
// The program is any reduction of the language over `logits` [N, V] (and other inputs) whose
// results are sums of its reductions times constants, or any functions of its reductions where the
// first result reaches one that reads the logits (`sum(where(y != -100, l, 0)) / sum(y != -100)`);
// or a map of one value per row (reduction='none'), whose gradients backward() gives
// (docs/linear_loss.md). Memory: one chunk of logits (their gradient overwrites them) and
// cuBLASLt's workspace, beside the caller's tensors. cuBLASLt (libcublasLt.so.13 of the CUDA
// toolkit) is loaded at the first call, as the driver is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lossjit/lossjit.hpp"

namespace lossjit {

struct LinearLossOptions {
    std::string logits = "logits";  // the program's input that receives h W^T + bias
    // The most rows of h a chunk takes (the rows are split into chunks of equal size, the last one
    // perhaps smaller); 0: as many as fit chunk_bytes, in whole tiles of 128 where that fits.
    std::int64_t chunk_rows = 0;
    // What the chunk's buffer of logits (and then of their gradient) may take.
    std::size_t chunk_bytes = std::size_t{1} << 30;
};

// Where the gradients of the first result go (null data: not wanted). Each is of its tensor's shape
// (dh [N, H], dW [V, H], dbias [V]), of the operands' dtype or float32, with unit stride along its
// last dimension. dW and dbias add up over the chunks in their own dtype: float32 keeps the sum
// exact to float32; bfloat16 rounds it once per chunk.
struct LinearGrads {
    OutputView dh, dW, dbias;
};

class LinearLoss {
public:
    // Checks that the program splits by rows (SourceError at what keeps it from it) and that it reads
    // the logits input.
    explicit LinearLoss(Loss loss, LinearLossOptions options = {});
    ~LinearLoss();
    LinearLoss(LinearLoss&&) noexcept;
    LinearLoss& operator=(LinearLoss&&) noexcept;

    const Loss& loss() const;
    Loss& loss();
    // The program's inputs but the logits, in order: what `others` lists in run().
    std::vector<std::string> others() const;
    // The programs a call runs besides the products, for tools and tests (their kernels, their
    // checked forms): the program itself, or, for one run by its reductions, the program of its
    // reductions (run on each chunk) and the one that combines their sums (inputs t0, t1, ...).
    std::vector<const Loss*> programs() const;

    struct Plan {
        std::int64_t chunk_rows = 0, chunks = 0;
        std::size_t workspace_bytes = 0;  // device memory a call needs (lent, or held by this object)
    };
    // The chunking of a call with these operands (only shapes and dtypes are read).
    Plan plan(const TensorView& h, const TensorView& W, bool bias_gradient = false) const;

    // Enqueues everything on `stream` and returns: `values` (the program's result_count() results,
    // one element each, any floating dtype) and, if `grads` is given, the gradients of the first
    // result with respect to h, W and bias. h [N, H] and W [V, H] are float32, bfloat16 or float16
    // (the same), bias [V] of theirs, and the products accumulate in float32; the logits are stored
    // in that dtype, as torch's linear would give them. Inputs in `others` whose first dimension is
    // N (of rank 2, or index inputs of rank 1) are split with h's rows; the rest are read whole.
    // `workspace`: device memory of plan().workspace_bytes, or null to use memory this object
    // allocates and keeps (then calls on several streams at once must each lend their own).
    void run(const TensorView& h, const TensorView& W, const TensorView* bias, std::span<const TensorView> others,
             const OutputView& values, const LinearGrads* grads, Stream stream = nullptr, void* workspace = nullptr);

    // A map of one value per row (`logsumexp(logits, -1) - logits[y]`, reduction='none'): run() writes
    // `values` [N] (any floating dtype and stride) and takes no gradients; backward() computes the
    // vector-Jacobian product with `upstream` [N] (any dtype) for h, W and bias, computing each chunk's
    // logits again (the upstream gradient is not known when the values are).
    void backward(const TensorView& h, const TensorView& W, const TensorView* bias, std::span<const TensorView> others,
                  const TensorView& upstream, const LinearGrads& grads, Stream stream = nullptr,
                  void* workspace = nullptr);

private:
    void enqueue(const TensorView& h, const TensorView& W, const TensorView* bias, std::span<const TensorView> others,
                 const OutputView* values, const TensorView* upstream, const LinearGrads* grads, Stream stream,
                 void* workspace);
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace lossjit
