// lossjit: a loss written as a string becomes one fused GPU kernel.
//
//   auto loss = lossjit::compile("mean(max(0, 1 - p*t))");
//   float value = loss({p_view, t_view});           // p, t: device memory
//
// compile() parses and checks the program (throwing SourceError with a caret for any mistake).
// The CUDA kernel is generated, compiled by NVRTC and cached (memory + disk) on the first call for
// each layout of the inputs; later calls only launch it.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lossjit/cache_outcome.hpp"
#include "lossjit/device.hpp"
#include "lossjit/errors.hpp"
#include "lossjit/knobs.hpp"
#include "lossjit/scratch.hpp"
#include "lossjit/tensor.hpp"
#include "lossjit/version.hpp"

struct CUstream_st;  // the CUDA driver's stream type; no CUDA header is needed to name it

namespace lossjit {

namespace ir { struct Program; }  // the checked program (src/ir/program.hpp)

// A CUstream, which is also a cudaStream_t (pass torch's current_stream().cuda_stream cast to it);
// nullptr is the legacy default stream.
using Stream = CUstream_st*;

// A reduction (sum, mean, batchmean: one value) or an elementwise map (one value per element).
enum class Kind { Reduction, Map };

struct Param {
    std::string name;
    double value = 0.0;
};

struct Options {
    std::string source_name = "expr";  // shown in diagnostics: "expr:1:13: error: ..."
    std::vector<std::string> inputs;   // input order for calls; empty: order of first appearance
    std::vector<Param> params;         // parameters and their defaults (override `param x = v;`); one the
                                       // program never reads, or also in `inputs`, is a UsageError
    int device = 0;                    // CUDA device ordinal
    // The GPU the stages that need none (cuda_source, compile_kernel, ptx, the statistics' and
    // factors' kernels; `lossjit emit`, `compile`, `warm --gpu`) choose kernels for: "h100" or "h200",
    // whose own defaults and shared memory then shape them as on that GPU (docs/cache.md). Empty: as
    // for no GPU in particular. Calls on a GPU choose for the GPU they run on, whatever this says.
    // Checked by compile() (UsageError); compile_kernel for another architecture is a UsageError.
    std::string gpu;

    // Kernel variant knobs (docs/tuning.md), all automatic by default. Checked by compile()
    // (UsageError). Automatic ones take what `lossjit tune` stored for this program, input shapes
    // and GPU, if anything (see use_tuning), else the built-in defaults.
    Knobs knobs;
    bool use_tuning = true;     // false: ignore the tuning store (sweeps do, to time exactly what they ask)
    // What the caller expects the program to be: compile() throws SourceError at the program's body
    // if it is the other kind, instead of the first call failing at run time. Empty: either.
    std::optional<Kind> expect;
};

// The kernel behind the most recent GPU call, and how the GPU runs it (Loss::kernel_info()).
struct KernelInfo {
    std::string signature;       // KernelSpec's: loop, rank, strides, vector width, unroll, threads, ...
    bool strided = false;        // the per-element loop (an operand is not contiguous along the last dimension)
    // The knobs in force, resolved (knobs.hpp): the kernel's block, unroll, vector width and items
    // (unroll x vector width; 1 each for the strided loop), accumulator (Float64 for maps: they
    // accumulate nothing), fast math, and the launch's blocks-per-SM cap (0: none).
    Knobs knobs;
    // From the driver when the kernel was loaded:
    int registers = 0;           // per thread (CU_FUNC_ATTRIBUTE_NUM_REGS)
    int local_bytes = 0;         // local memory per thread: register spills and local arrays
    int shared_bytes = 0;        // static shared memory per block
    int resident_blocks_per_sm = 0;  // what fits on one SM (the occupancy calculator), before any cap
    int blocks_per_sm = 0;       // what the launch uses per SM: the above, capped (maps launch more)
    double occupancy = 0;        // resident warps / the SM's maximum, at blocks_per_sm
    unsigned grid = 0;           // blocks in the last launch
    std::string target;          // "sm_90"
    std::string tuned;           // non-empty when knobs came from the tuning store: which, and from where
    std::vector<std::string> notes;  // knobs that were asked for and could not be honoured, and why
};

// The gradient of a loss (or a map's vector-Jacobian product) with respect to one input, from the
// CPU reference: float64 values in the input's own shape, row-major, summed over the dimensions
// along which the input is broadcast.
struct ReferenceGradient {
    std::string input;
    Shape shape;
    std::vector<double> values;
};


// A gradient in device memory that Loss::grad allocated: contiguous, the input's shape and dtype.
struct DeviceGradient {
    std::string input;
    Shape shape;
    DType dtype = DType::float32;
    DeviceBuffer buffer;
    OutputView view() const { return OutputView::contiguous(buffer.data(), shape, dtype); }
};

// The gradient flowing into a reduction from what is computed after it (d final / d loss): a
// number, times a float32 device scalar if `device` is set (read by the kernel, so it may be
// produced by earlier work on the same stream without a host sync).
struct Upstream {
    float value = 1.0f;
    const float* device = nullptr;
    Upstream(float v = 1.0f) : value(v) {}  // NOLINT: a plain number is an upstream gradient
    static Upstream on_device(const float* scalar, float times = 1.0f) {
        Upstream u(times);
        u.device = scalar;
        return u;
    }
};

// Where the time of the most recent kernel preparation went, in milliseconds.
struct Timings {
    double parse_ms = 0, check_ms = 0;      // at compile()
    double device_ms = 0;                   // at the first call: CUDA context and device queries
    double emit_ms = 0, cache_ms = 0;       // at the first call for a layout; cache_ms includes NVRTC
    double nvrtc_ms = 0, load_ms = 0;       // NVRTC alone (0 on a cache hit); cuModuleLoadData
    std::optional<CacheOutcome> cache;      // where the kernel came from; empty before the first call
    std::string target;                     // e.g. "sm_90"
    // Non-empty if the disk cache could not be written; set for the first such call in the process.
    std::string cache_warning;
    std::string tuned;           // non-empty when the knobs came from the tuning store (KernelInfo::tuned)
    std::string tuning_warning;  // the tuning store could not be read (ignored); first such call only

    // lossjit's own time before the first launch: everything above but nvrtc_ms (inside cache_ms).
    double total_ms() const { return parse_ms + check_ms + device_ms + emit_ms + cache_ms + load_ms; }
};

// What compile_kernel() produced, for tools that build kernels without running them.
struct KernelBuild {
    std::string source;     // the CUDA C++ that was compiled
    std::string target;     // "sm_90" (CUBIN) or "compute_90" (PTX)
    std::string key;        // cache key
    CacheOutcome cache = CacheOutcome::Compiled;
    std::size_t image_bytes = 0;
    double nvrtc_ms = 0;
    std::string warning;
    // Read from the CUBIN, no GPU needed (the numbers KernelInfo gets from the driver); empty for
    // PTX, which ptxas has not seen yet.
    std::optional<int> registers;    // per thread
    std::optional<int> local_bytes;  // per thread: the stack frame, register spills and local arrays
};

// A compiled program and the GPU state that runs it.
//
// Copies share the immutable checked program but nothing else: each copy has its own parameter
// values, kernels, plans and workspaces, so set_param on a copy never changes the original. There
// is no empty Loss: compile() makes one (hold a std::optional<Loss> to create it later).
//
// Thread safety: a Loss may be called from several threads at once. Each stream has its own lock,
// device scratch and kernel arguments: the host part of a launch (checking the views, patching the
// arguments, cuLaunchKernel: microseconds) holds only its stream's lock, so launches on different
// streams do not wait for each other, and calls on one stream run in call order. The first call
// for a layout of the inputs (planning it, and compiling and loading its kernel: milliseconds, up
// to a second for NVRTC) takes a lock the streams share; launches of layouts a stream has seen
// before do not. No lock is held while a call waits for the GPU (operator() waits for its value
// after releasing its stream's lock); the one wait under a lock is a stream's own, when a larger
// gradient layout first needs more scratch for its summed gradients on it and its earlier kernels
// must finish.
// set_param takes effect for calls that start after it returns, and never waits for a launch.
class Loss {
public:
    Loss(const Loss& other);
    Loss& operator=(const Loss& other);
    ~Loss();

    Kind kind() const;
    std::string_view reduction() const;        // "sum", "mean", "batchmean"; "" for a map
    // The names of a program's several results (`loss, z, acc`), in order; empty for a program of one
    // result. Every call computes all of them in one pass; the first is the value operator() returns
    // and what gradients are of.
    std::vector<std::string> results() const;
    std::size_t result_count() const;          // results().size(), or 1
    // Whether result `index` has a gradient with respect to some input at all (accuracy,
    // `mean(argmax(x, -1) == y)`, has none): autograd treats the others as constants.
    bool result_differentiable(std::size_t index) const;
    const std::vector<std::string>& inputs() const;
    std::vector<Param> params() const;         // current values
    void set_param(std::string_view name, double value);  // takes effect at the next call; no recompile
    bool uses(std::string_view name) const;    // does the program read this input or parameter?

    // A copy (the same program and current parameter values) that runs on another CUDA device: one
    // Loss per device, each loading its own kernels there. No GPU is touched until its first call.
    Loss on_device(int device) const;
    int device() const;  // the CUDA device ordinal its GPU calls run on (Options::device at first)
    // The device scratch a GPU call needs when the caller lends it (lossjit/scratch.hpp): enough
    // for every reduction and gradient on this device but those whose kernel sums a broadcast row
    // (they throw ScratchTooSmall saying how much they need). Opens the device.
    std::size_t scratch_bytes();

    // ---- on the GPU; inputs are device tensors in the order of inputs() ----
    // Inputs may be of any DType, mixed freely (docs/language.md, "Types"): 16-bit floats, integers
    // and bools are widened to float32 as they are loaded, and the program computes in float32, or
    // in float64 if it reads a float64 input. What lossjit writes (a map's output, a result, a
    // gradient) is of a floating dtype the caller chooses: rounded once, from the computed value.
    // Reduction: launch, wait, return the value.
    float operator()(std::span<const TensorView> inputs, Stream stream = nullptr);
    float operator()(std::initializer_list<TensorView> inputs) { return (*this)(std::span(inputs.begin(), inputs.size())); }
    // Reduction: every result (result_count() of them, in order), launched, waited for, returned.
    std::vector<float> values(std::span<const TensorView> inputs, Stream stream = nullptr);
    // Reduction: launch only; the float lands in device memory at `device_result` when `stream` gets
    // there. A program of several results needs the OutputView overload (UsageError here).
    void evaluate(std::span<const TensorView> inputs, float* device_result, Stream stream = nullptr);
    // The same into elements of any floating dtype (a bfloat16 loss for bfloat16 inputs, say): a view
    // of result_count() elements.
    void evaluate(std::span<const TensorView> inputs, const OutputView& device_result, Stream stream = nullptr);
    // Map: launch only; writes every element of `output` (its shape must be the broadcast shape).
    void map(std::span<const TensorView> inputs, const OutputView& output, Stream stream = nullptr);

    // The broadcast shape of these inputs: the shape of a map's output. Only shapes are read.
    Shape output_shape(std::span<const TensorView> inputs) const;
    // The dtype a map's output (or a result) gets by default for inputs of these dtypes: the
    // promoted floating type of the inputs the program reads (result_dtype, lossjit/dtype.hpp).
    DType output_dtype(std::span<const TensorView> inputs) const;

    // ---- the CPU reference: float64 arithmetic on host tensors of any dtype, widened and rounded
    // exactly as the GPU widens and rounds them ----
    double reference(std::span<const TensorView> host_inputs) const;
    std::vector<double> reference_values(std::span<const TensorView> host_inputs) const;  // every result
    void reference_map(std::span<const TensorView> host_inputs, const OutputView& host_output) const;
    // Reduction: d (upstream * loss) / d input for each input named in `wrt`, in that order.
    // Parameters are constants (no gradient); an input the program never reads gets zeros. At kinks
    // the conventions are PyTorch autograd's (docs/language.md, "Gradients").
    std::vector<ReferenceGradient> reference_grad(std::span<const TensorView> host_inputs,
                                                  std::span<const std::string> wrt, double upstream = 1.0) const;
    // Map: the vector-Jacobian product with `host_upstream`, a tensor of the output's shape
    // (what y.backward(upstream) gives in torch).
    std::vector<ReferenceGradient> reference_grad(std::span<const TensorView> host_inputs,
                                                  std::span<const std::string> wrt,
                                                  const TensorView& host_upstream) const;
    // ---- gradients on the GPU ----
    // One kernel computes the loss and d (upstream * loss) / d input for each input named in `wrt`,
    // reading every input once and writing each gradient once. `grads[k]` receives the gradient of
    // wrt[k]: a contiguous device tensor of that input's own shape and any floating dtype (an
    // integer or bool input has no gradient: UsageError). An input broadcast as one
    // row against all the others (hinge's t: [C] against [N, C]) gets its per-element derivatives
    // summed over the rows, deterministically; other broadcast patterns are refused (UsageError; the
    // CPU reference_grad computes any). The loss lands at `device_value` (may be null; a program of
    // several results needs the OutputView overload, which receives them all). Asynchronous on
    // `stream`, like evaluate().
    void value_and_grad(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                        std::span<const OutputView> grads, float* device_value, Stream stream = nullptr,
                        Upstream upstream = {});
    // The same, with the loss stored in one element of any floating dtype.
    void value_and_grad(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                        std::span<const OutputView> grads, const OutputView& device_value, Stream stream = nullptr,
                        Upstream upstream = {});
    // The same kernel without keeping the value.
    void grad(std::span<const TensorView> inputs, std::span<const std::string> wrt, std::span<const OutputView> grads,
              Stream stream = nullptr, Upstream upstream = {});
    // The same, into device memory this call allocates (on the loss's device): one gradient per
    // input in `wrt`, each of that input's shape and dtype. The kernel runs on `stream`: synchronise it before
    // reading the buffers (DeviceBuffer::download copies on the legacy stream). It allocates on every
    // call; a training loop should pass its own views to the overload above.
    std::vector<DeviceGradient> grad(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                                     Stream stream = nullptr, Upstream upstream = {});
    // Map: the vector-Jacobian product with `upstream`, a device tensor of the output's shape (any dtype)
    // (what y.backward(upstream) gives in torch), in one pass over the inputs and `upstream`.
    void grad(std::span<const TensorView> inputs, std::span<const std::string> wrt, std::span<const OutputView> grads,
              const TensorView& upstream, Stream stream = nullptr);

    // ---- the stages, for tools and curious users; only the shapes and strides of inputs are read ----
    std::string ast() const;
    std::string checked() const;
    // `--dump grad`: d body / d input, in the language. Where the program reduces along rows, a
    // per-row input ([N, 1]) has other derivatives than a full-shape one: the first form shows them
    // for inputs of the full shape, the second for these inputs' shapes (and refuses an integer input).
    std::string derivatives(std::span<const std::string> wrt) const;
    std::string derivatives(std::span<const std::string> wrt, std::span<const TensorView> inputs) const;
    std::string cuda_source(std::span<const TensorView> inputs) const;
    std::string cuda_source() const;  // for inputs that all share one contiguous shape
    // The fused value-and-gradient kernel value_and_grad() would run for these inputs and `wrt`.
    std::string cuda_source(std::span<const TensorView> inputs, std::span<const std::string> wrt) const;
    // Compiles (through the cache) for a target such as "sm_90" or "compute_90"; needs no GPU. With
    // `wrt`, the fused value-and-gradient kernel for those inputs.
    KernelBuild compile_kernel(std::span<const TensorView> inputs, const std::string& target) const;
    KernelBuild compile_kernel(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                               const std::string& target) const;
    std::string ptx(std::span<const TensorView> inputs, const std::string& arch) const;
    // The kernels of the program's statistics (whole-tensor reductions used inside expressions: the
    // two-phase rule of docs/language.md), in the order they run before the program's own; none
    // where it has none. Empty `inputs`: as compile_kernel's.
    std::vector<std::string> statistic_sources(std::span<const TensorView> inputs) const;
    std::vector<KernelBuild> compile_statistics(std::span<const TensorView> inputs, const std::string& target) const;
    // The kernel a program of several whole-tensor reductions runs before its gradient kernel (the
    // factors: d value / d each reduction differentiated), if the gradient for `wrt` has one.
    std::optional<std::string> factor_source(std::span<const TensorView> inputs, std::span<const std::string> wrt) const;
    std::optional<KernelBuild> compile_factor(std::span<const TensorView> inputs, std::span<const std::string> wrt,
                                              const std::string& target) const;

    Timings timings() const;  // a snapshot: later calls do not change it
    // The kernel of the most recent GPU call (any of operator(), evaluate, map, value_and_grad):
    // knobs as resolved, registers, spills and occupancy. Empty before the first GPU call.
    std::optional<KernelInfo> kernel_info() const;

private:
    struct Compiled;  // the immutable part copies share
    struct State;     // the rest: parameters, kernels, plans, workspaces
    Loss(std::shared_ptr<const Compiled> compiled, int device);
    friend Loss compile(std::string_view program, Options options);
    friend class LinearLoss;  // asks the checked program how its results split by rows
    const ir::Program& checked_program() const;
    const Options& options() const;  // as compile() was given them
    // A Loss of a program built by a pass rather than parsed (linear_loss's per-chunk totals and their
    // combination): `program` must be as check() leaves one.
    static Loss from_program(ir::Program program, Options options);
    std::unique_ptr<State> state_;
};

// Parses and checks `program`; throws SourceError (user mistakes, with line, column and caret) or
// UsageError (bad options). Needs no GPU.
Loss compile(std::string_view program, Options options = {});

}  // namespace lossjit
