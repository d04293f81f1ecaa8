// sweep: times kernel variants of one program on the GPU, for `lossjit bench --sweep`, `lossjit
// tune` and the REPL's :sweep. Like the rest of the library it never prints: progress goes to a
// callback, and the table and JSON come back as text. docs/tuning.md describes the method.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lossjit/lossjit.hpp"
#include "tools/host.hpp"
#include "tuning/store.hpp"

namespace lossjit {

// One axis: a knob and the values to try. "block=128,256,512" -> {"block", {"128", "256", "512"}}.
struct SweepAxis {
    std::string knob;                 // canonical name (knobs.hpp): block, items, unroll, vector, ...
    std::vector<std::string> values;  // as written; "auto" is a value
};
// UsageError for an unknown knob, an empty list, or a value the knob can never take.
SweepAxis parse_sweep_axis(std::string_view text);

// One point of the product of the axes. Compiled with the sweep's base options, these knobs, and
// the tuning store ignored.
struct SweepVariant {
    Knobs knobs;        // the base knobs with this point's set (as asked for: knobs.hpp)
    std::string label;  // "block=256 items=16"
    std::string error;  // the knobs contradict each other (e.g. vector=4 items=2): not run
    bool baseline = false;  // the base knobs alone, timed as the defaults ("default" or "base: KNOBS")
};
// The cartesian product, the first axis slowest. UsageError when two axes set one knob.
std::vector<SweepVariant> expand_sweep(const Knobs& base, std::span<const SweepAxis> axes);

// What `lossjit tune` searches when given no axes: threads per block x items per thread x blocks per
// SM; for a program that reduces along rows, threads x items x the row cache x the row cluster
// instead (the knobs whose best setting differs most between GPUs and shapes there).
std::vector<SweepAxis> default_tune_axes(bool by_rows = false);

struct SweepProgress {
    enum class Stage { Upload, Reference, Roofline, Compile, Time };
    Stage stage = Stage::Upload;
    int done = 0, total = 0;
    std::string what;  // the variant's knobs while compiling or timing
};

struct SweepRequest {
    std::string program;  // the program text
    Options base;         // source_name, inputs, params, device, and knobs every variant shares
    std::vector<SweepAxis> axes;  // none: the base variant alone
    // Host inputs in the program's input order, one vector per set (at least one). Each set is
    // uploaded once; the i-th variant timed runs on set i % sets, so consecutive variants never
    // read the data the previous one left in L2.
    std::vector<std::vector<HostTensor>> input_sets;
    int reps = 20;                 // timed intervals per variant, the median is reported; >= 10
    int warmup = 3;                // untimed launches first (after the first call, which loads the kernel)
    double min_interval_ms = 1.0;  // back-to-back launches per interval: enough to fill this much time
    bool include_default = true;   // also time the built-in defaults (every knob automatic, no tuning)
    std::function<void(const SweepProgress&)> progress;  // called on the caller's thread
};

struct SweepRow {
    std::string label;       // the knobs as asked ("block=256 items=16"), or "default"
    bool baseline = false;   // this row timed the defaults (SweepRequest::include_default)
    bool is_default = false; // the baseline, or a variant that resolves to the very same kernel and launch
    KernelInfo kernel;       // as resolved and loaded: knobs, registers, spills, occupancy, notes
    double ms = 0;           // median time per call
    double gbps = 0;         // SweepResult::bytes_per_call / ms
    double roofline = 0;     // gbps / SweepResult::roofline_gbps
    // Relative error against the CPU float64 reference: of the value (reductions, on every input
    // set), or the largest elementwise one (maps, on the set the variant ran on).
    double error = 0;
    // Maps: the largest |value - reference| over the largest |reference|. Where the outputs cross 0
    // (a normalization's (x - m) / s) the elementwise error of the elements near 0 is large for every
    // variant, and a bound made of it would let anything pass. Reductions: `error`.
    double error_of_largest = 0;
    int input_set = 0;
    int launches_per_interval = 1;
    std::string failure;     // non-empty: not timed (contradicting knobs, or compile / launch failed)
};

struct SweepResult {
    std::string program_name;
    std::string device;         // "NVIDIA H100 80GB HBM3 (sm_90)"
    std::string target;         // "sm_90"
    std::string kind;           // "mean", "sum", "batchmean" or "map"
    std::string shapes;         // "p=8192x8192 t=8192x8192"
    int input_sets = 0;
    int reps = 0;
    double bytes_per_call = 0;  // every input read once, plus a map's output written once
    double roofline_gbps = 0;
    std::string roofline_method;
    std::vector<double> references;  // reductions: the float64 reference value per input set
    std::vector<SweepRow> rows;      // fastest first; failures last
    double seconds = 0;              // wall time of the whole sweep
};

// The row that timed the defaults, or nullptr (none asked for, or a hand-made result without one).
const SweepRow* baseline_row(const SweepResult& result);

// Throws UsageError (bad axes, inputs), SourceError (the program), or CudaError "no CUDA device: ..."
// where there is no GPU, before any timing. A variant that fails is a row with `failure`, not an exception.
SweepResult run_sweep(const SweepRequest& request);

struct TuneOptions {
    double tolerance = 1e-7;  // the accuracy bound (see tune())
    bool store = true;        // false: search and report only
};

struct TuneResult {
    SweepResult sweep;
    double bound = 0;         // the error a variant may have: max(tolerance, the default's error)
    double bound_of_largest = 0;  // and its error_of_largest: max(tolerance, the default's)
    int winner = -1;          // index into sweep.rows; -1: no variant qualified
    std::optional<TuningRecord> record;
    std::string stored_in;    // the tuning store's file, or ""
    std::string not_stored;   // why not, when not
    // A fresh compile with automatic knobs after storing, run once on the first input set: what it
    // picked up from the store (its `tuned` must be non-empty) and its error.
    std::optional<KernelInfo> check;
    double check_error = 0;
    double check_error_of_largest = 0;
};

// Times the variants (request.axes, or default_tune_axes() when empty; the defaults are always
// timed too), takes the fastest whose error and error_of_largest are each within max(tolerance, the
// default's own) and
// stores it for (program, shapes, float32, GPU) beside the kernel cache. Variants beyond the
// bound (typically float32 accumulators on large inputs) are never chosen.
TuneResult tune(SweepRequest request, const TuneOptions& options);

// Whether a timed row is within both of the result's bounds (the one rule tune() and its summary use).
bool qualifies(const SweepRow& row, const TuneResult& result);

// For people and machines; the library prints neither.
std::string format_sweep_table(const SweepResult& result);
std::string format_tune_summary(const TuneResult& result);
std::string sweep_json(const SweepResult& result, const TuneResult* tuned = nullptr);

}  // namespace lossjit
