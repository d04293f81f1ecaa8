// kernel_spec: the launch policy (kernel_spec.hpp). Which variant of the loop templates a layout
// gets, given the knobs, and the grid it is launched with.
#include "codegen/kernel_spec.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "ir/print.hpp"  // has_common_path
#include "lang/builtins.hpp"
#include "lossjit/errors.hpp"

namespace lossjit {
namespace {

// Function applications (operators included) up to which a reduction's element program counts as
// short for the default unroll: MSE's two and hinge's three are, smooth L1's nine are not.
constexpr int kShortElementProgram = 4;

// Threads per block when the caller leaves it open. A fused gradient kernel reads and writes: on
// H100, smooth L1 + d/dp ran 4.41 ms with 1024 threads (unroll 2), 4.47 with 512, 4.63 with 256,
// and hinge + d/dp, d/dt 3.05 ms with 1024 against 3.06 (bench --explore, docs/results/performance-history.md).
// 1024 threads leave at most 64 registers a thread, so only small gradient programs get them.
// A map without gradients takes one tile per block (plan_grid), and small blocks with small tiles
// stream best that way (H200, hardsigmoid [4096, 393216]: 128 threads of 8 elements 100.8% of the
// copy rate with fast division, 256 threads of 16 97%; Triton's pointwise kernels are the same shape).
int automatic_block_threads(const ir::Program& program) {
    if (program.derivatives.empty()) return program.is_map() ? 128 : 256;
    const std::size_t read = read_inputs(program).size() + (program.is_map() ? 1 : 0);
    return program.derivatives.size() <= 2 && read <= 3 && program.nodes.size() <= 64 ? 1024 : 256;
}


}  // namespace

int summed_batch_dims(const ir::Program& program, const KernelSpec& spec, const Layout& layout) {
    for (std::size_t g = 0; g < spec.summed.size(); ++g)
        if (spec.summed[g] == KernelSpec::OverRows || spec.summed[g] == KernelSpec::AlongRows)
            return std::max(0, walked_outer_prefix(layout.inputs[static_cast<std::size_t>(program.derivatives[g].input)],
                                                   layout.dims.size() - 1));
    return 0;
}

int preferred_vector_width(std::size_t widest_element_bytes) {
    return widest_element_bytes > 0 && widest_element_bytes <= 2 ? 8 : 4;
}

KernelOperands KernelOperands::unplaced(const ir::Program& program, DType dtype) {
    KernelOperands operands;
    // A map's backward reads its upstream gradient after the inputs.
    const std::size_t inputs = program.inputs.size() + (program.is_map() && !program.derivatives.empty() ? 1 : 0);
    operands.input_data.assign(inputs, nullptr);
    operands.input_dtypes.assign(inputs, dtype);
    const DType written = is_floating(dtype) ? dtype : DType::float32;
    operands.result_dtype = written;
    operands.grad_dtypes.assign(program.derivatives.size(), written);
    return operands;
}

KernelSpec KernelSpec::choose(const ir::Program& program, const Layout& layout, const KernelOperands& operands,
                              const Knobs& knobs, bool tuned) {
    if (program.by_rows()) return choose_by_row(program, layout, operands, knobs, tuned);
    KernelSpec spec;
    spec.block_threads = knobs.block_threads > 0 ? knobs.block_threads : automatic_block_threads(program);
    spec.fast_math = knobs.fast_math.value_or(false);
    spec.tuned = tuned;
    const Accumulator accumulator = knobs.accumulator == Accumulator::Auto ? Accumulator::Float64 : knobs.accumulator;
    spec.accumulator = program.is_map() ? Accumulator::Float64 : accumulator;
    if (program.is_map() && accumulator != Accumulator::Float64)
        spec.notes.push_back("a map sums nothing: the accumulator does not apply");
    spec.rank = static_cast<int>(layout.dims.size());
    const std::size_t inner = layout.dims.size() - 1;
    const auto slots = read_inputs(program);

    const bool gradients = !program.derivatives.empty();
    const bool writes = program.is_map() || gradients;  // maps, and gradients
    auto read = slots;
    if (program.is_map() && gradients) read.push_back(static_cast<int>(program.inputs.size()));  // upstream
    bool rows = !writes || layout.output.strides[inner] == 1 || layout.count <= 1;
    if (operands.input_dtypes.size() < read.size() || operands.input_data.size() < read.size() ||
        operands.grad_dtypes.size() != program.derivatives.size())
        throw InternalError("kernel operands do not match the program");
    for (int slot : read) {
        const auto s = layout.inputs[static_cast<std::size_t>(slot)].strides[inner];
        rows = rows && (s == 0 || s == 1);
        spec.inner_strides.push_back(s == 0 ? 0 : 1);
        spec.input_dtypes.push_back(operands.input_dtypes[static_cast<std::size_t>(slot)]);
    }
    spec.compute = compute_dtype(spec.input_dtypes);
    spec.result_dtype = operands.result_dtype;
    spec.grad_dtypes = operands.grad_dtypes;
    if (spec.compute == DType::float64 && spec.accumulator != Accumulator::Float64) {
        spec.notes.push_back("a float64 program accumulates in float64");
        spec.accumulator = Accumulator::Float64;
    }

    // A gradient of a broadcast input sums over the dimensions it is broadcast along, by a loop that
    // sums as it goes: one row per batch of rows (Columns; one batch for a plain [C]), one value per
    // row or per batch of rows (Rows, per tile), one value for everything (Rows, per block). The
    // batches are the input's walked outer dimensions, which plan_program_layout put first.
    bool over_rows = false, other_sums = false;
    for (const auto& d : program.derivatives) {
        const OperandAccess& access = layout.inputs[static_cast<std::size_t>(d.input)];
        // By the input's own shape, not its strides: a full-shape view with zero strides (torch's
        // expand) has one gradient element per element, stored where the output walks.
        const bool broadcast = access.elements < layout.count;
        int summed = NotSummed;
        if (broadcast) {
            // Outer dimensions [0, kept) walked, [kept, inner) broadcast; -1: not in that order
            // (plan_program_layout orders them so for the first input summed).
            const int kept = walked_outer_prefix(access, inner);
            long long kept_count = 1;  // elements of the input along its walked outer dimensions
            for (int dim = 0; dim < kept; ++dim) kept_count *= layout.dims[static_cast<std::size_t>(dim)];
            if (kept == 0 && access.strides[inner] == 0 && access.elements == 1) summed = OverAll;
            else if (kept >= 0 && static_cast<std::size_t>(kept) < inner && access.strides[inner] == 1 &&
                     access.elements == kept_count * layout.dims[inner])
                summed = OverRows;
            else if (kept > 0 && access.strides[inner] == 0 && access.elements == kept_count)
                summed = AlongRows;
            else
                throw UnsupportedError(fmt::format(
                    "the gradient of '{}' sums over a broadcast whose dimensions another summed input orders "
                    "differently (one kernel sums inputs broadcast along the same dimensions): ask for these "
                    "gradients in two calls (reference_grad computes any)",
                    program.inputs[static_cast<std::size_t>(d.input)]));
        }
        spec.summed.push_back(summed);
        over_rows = over_rows || summed == OverRows;
        other_sums = other_sums || summed == AlongRows || summed == OverAll;
    }
    if (!over_rows && !other_sums) spec.summed.clear();
    // One loop sums them all over the same rows: the inputs summed over or along rows walk the same
    // outer dimensions ([C] and [N, 1, C] against [N, M, C] do not).
    // The inputs a refusal names: those whose gradients are summed.
    const auto summed_names = [&](auto keep) {
        std::vector<std::string> names;
        for (std::size_t g = 0; g < spec.summed.size(); ++g)
            if (keep(spec.summed[g]))
                names.push_back(fmt::format("'{}'", program.inputs[static_cast<std::size_t>(program.derivatives[g].input)]));
        return fmt::format("{}", fmt::join(names, ", "));
    };
    int batch_dims = -1;
    for (std::size_t g = 0; g < spec.summed.size(); ++g) {
        if (spec.summed[g] != OverRows && spec.summed[g] != AlongRows) continue;
        const int kept = walked_outer_prefix(layout.inputs[static_cast<std::size_t>(program.derivatives[g].input)], inner);
        if (batch_dims >= 0 && kept != batch_dims)
            throw UnsupportedError(fmt::format(
                "the gradients of {} are summed over different sets of rows ([C] and [N, 1, C] against [N, M, C], or "
                "[N, 1] and [1, M, 1]), which one kernel does not do: ask for them in two calls",
                summed_names([](int s) { return s == OverRows || s == AlongRows; })));
        batch_dims = kept;
    }
    if (over_rows && other_sums)
        throw UnsupportedError(fmt::format(
            "the gradients of {} are summed over rows (an input of one row, [C]) and along rows or over everything "
            "(an input [N, 1], or a scalar), which one kernel does not do: ask for them in two calls",
            summed_names([](int s) { return s != NotSummed; })));
    const bool any_summed = over_rows || other_sums;
    if (!rows) {
        if (any_summed)
            throw UnsupportedError(fmt::format(
                "the gradients of {} are summed over a broadcast, which on the GPU needs every input contiguous along "
                "the innermost dimension (reference_grad computes it)",
                summed_names([](int s) { return s != NotSummed; })));
        spec.loop = Loop::Strided;
        spec.inner_strides.clear();  // (input_dtypes stay: every loop loads through them)
        spec.one_block = !program.is_map() && KernelSpec::blocks(spec, layout) <= 1;
        if (knobs.unroll > 0 || knobs.items_per_thread > 0 || knobs.vector_width > 0)
            spec.notes.push_back("an operand is not contiguous along the last dimension: the strided loop has no "
                                 "tiles, so unroll, items per thread and vector width do not apply");
        return spec;
    }
    // The columns loop with a small gradient program (one that gets 1024 threads elsewhere): 512
    // threads walking 4 rows at a time (the unroll below, also where 512 is asked for), not 1024 by 2.
    // Hinge + d/dp, d/dt [32768, 32768] with t [32768]: H200 2.161 ms against 2.313, H100 3.040
    // against 3.052; 1024 threads by 4 rows spill on an H100 (5.67 ms).
    const bool small_program = automatic_block_threads(program) == 1024;
    if (over_rows) spec.loop = Loop::Columns;
    if ((spec.loop == Loop::Rows || spec.loop == Loop::Columns) && inner > 0) {
        for (std::size_t k = 0; k < read.size(); ++k) {
            const auto& strides = layout.inputs[static_cast<std::size_t>(read[k])].strides;
            const bool same = spec.inner_strides[k] == 1 &&
                              std::all_of(strides.begin(), strides.begin() + static_cast<std::ptrdiff_t>(inner),
                                          [](long long s) { return s == 0; });
            spec.same_every_row.push_back(same ? 1 : 0);
        }
        if (std::none_of(spec.same_every_row.begin(), spec.same_every_row.end(), [](int s) { return s != 0; }))
            spec.same_every_row.clear();
    }
    if (over_rows && small_program && knobs.block_threads == 0) spec.block_threads = 512;
    // Sums along rows (an input [N, 1]) in a reduction: 512 threads too (two blocks of 64 registers
    // per SM where 1024 threads made one). Squared hinge + d/dp, d/dt [32768, 32768], t [32768, 1]:
    // H200 2.189-2.200 ms against 2.270-2.275, H100 3.020 against 2.988 (docs/performance.md, issue
    // 15, fourth round).
    const bool along_rows = std::count(spec.summed.begin(), spec.summed.end(), AlongRows) > 0;
    if (along_rows && !program.is_map() && small_program && knobs.block_threads == 0) spec.block_threads = 512;
    const bool columns_by_4 = over_rows && small_program && spec.block_threads == 512;
    if (any_summed && spec.accumulator != Accumulator::Float64) {
        spec.notes.push_back("gradients summed over a broadcast accumulate in float64, and so does the value");
        spec.accumulator = Accumulator::Float64;
    }

    // Vector accesses of `width` elements need the innermost extent to be a multiple of it and every
    // row of every contiguous operand to start aligned for that many elements of its type.
    auto aligned = [&](const void* data, DType dtype, const OperandAccess& access, int width) {
        if (reinterpret_cast<std::uintptr_t>(data) % vector_alignment(dtype, width) != 0) return false;
        for (std::size_t d = 0; d < inner; ++d)
            if (access.strides[d] % width != 0) return false;
        return true;
    };
    if (operands.written_data.size() != operands.written_dtypes.size())
        throw InternalError("kernel operands: written data and dtypes differ in number");
    auto why_not = [&](int width) -> std::string {  // empty: `width`-element accesses are possible
        if (layout.dims[inner] % width != 0)
            return fmt::format("the last dimension ({}) is not a multiple of {}", layout.dims[inner], width);
        for (std::size_t k = 0; k < read.size(); ++k) {
            const auto slot = static_cast<std::size_t>(read[k]);
            if (spec.inner_strides[k] == 1 &&
                !aligned(operands.input_data[slot], spec.input_dtypes[k], layout.inputs[slot], width))
                return fmt::format("the rows of '{}' do not all start {}-byte aligned",
                                   slot < program.inputs.size() ? program.inputs[slot] : std::string("upstream"),
                                   vector_alignment(spec.input_dtypes[k], width));
        }
        for (std::size_t k = 0; k < operands.written_data.size() && writes; ++k)
            if (!aligned(operands.written_data[k], operands.written_dtypes[k], layout.output, width))
                return fmt::format("the rows of the {} do not all start {}-byte aligned",
                                   program.is_map() && program.derivatives.empty() ? "output" : "gradients",
                                   vector_alignment(operands.written_dtypes[k], width));
        return {};
    };
    // The widest element walked along the rows: contiguous inputs, and what is written per element.
    std::size_t widest = 0;
    for (std::size_t k = 0; k < read.size(); ++k)
        if (spec.inner_strides[k] == 1) widest = std::max(widest, size_of(spec.input_dtypes[k]));
    if (program.is_map() && !gradients) widest = std::max(widest, size_of(spec.result_dtype));
    for (std::size_t g = 0; g < spec.grad_dtypes.size(); ++g)
        if (spec.summed.empty() || spec.summed[g] == NotSummed) widest = std::max(widest, size_of(spec.grad_dtypes[g]));
    // Widths to try, widest first: the one asked for, else the preferred one; 8 falls back to 4.
    std::vector<int> widths;
    if (knobs.vector_width > 1) widths.push_back(knobs.vector_width);
    if (knobs.vector_width == 0) widths.push_back(preferred_vector_width(widest));
    if (!widths.empty() && widths.back() > 4) widths.push_back(4);
    spec.vector_width = 1;
    std::string why_scalar;  // why the width asked for is impossible here
    for (int width : widths) {
        // Items per thread that the lanes cannot make up ask for narrower accesses.
        if (knobs.vector_width == 0 && knobs.items_per_thread % width != 0) continue;
        const std::string why = why_not(width);
        if (why.empty()) {
            spec.vector_width = width;
            break;
        }
        if (why_scalar.empty()) why_scalar = why;
    }
    if (knobs.vector_width > 1 && spec.vector_width != knobs.vector_width)
        spec.notes.push_back(fmt::format("vector width {} was asked for, but {}: vector width {} is used",
                                         knobs.vector_width, why_scalar, spec.vector_width));
    // A reduction over 16-bit inputs (vector width 8) moves the same bytes per tile as float32 with
    // twice the elements: 512 threads halve the tiles and their index work per byte. bfloat16
    // [32768, 32768], H100 (docs/results/performance-history.md, issue 13): smooth L1 1.405 ms (97.7% of the read
    // roofline) against 1.431-1.436 at 256 threads, hinge 0.709 against 0.707-0.711.
    if (knobs.block_threads == 0 && spec.loop == Loop::Rows && !program.is_map() && !gradients &&
        spec.vector_width == 8)
        spec.block_threads = 512;
    // A reduction with logs on their common path (KL) is bound by arithmetic on an H200; 512 threads
    // (unroll 4, the same registers and occupancy, half the blocks) ran KL [16384, 16384] in
    // 0.513-0.517 ms (90% of the read roofline) against 0.528-0.533 with 256 (docs/results/performance-history.md,
    // issue 15, third round).
    if (knobs.block_threads == 0 && !program.is_map() && spec.common_path(program)) spec.block_threads = 512;
    // The columns loop gives each thread vector_width columns of a strip; narrow rows would leave most
    // of a large block idle, so the block shrinks to the columns there are (in warps, at least 64).
    if (spec.loop == Loop::Columns) {
        const long long lanes = (layout.dims[inner] + spec.vector_width - 1) / spec.vector_width;
        int threads = spec.block_threads;
        while (threads > 64 && (threads / 2) % kWarpThreads == 0 && threads / 2 >= lanes) threads /= 2;
        if (threads != spec.block_threads) {
            spec.notes.push_back(fmt::format("{} threads per block for {} columns of {} ({} per thread)", threads,
                                             layout.dims[inner], spec.block_threads, spec.vector_width));
            spec.block_threads = threads;
        }
    }

    if (knobs.unroll > 0) {
        spec.unroll = knobs.unroll;
    } else if (knobs.items_per_thread > 0) {
        spec.unroll = std::clamp(knobs.items_per_thread / spec.vector_width, 1, kMaxUnroll);
        if (spec.unroll * spec.vector_width != knobs.items_per_thread)
            spec.notes.push_back(fmt::format("{} items per thread is not a multiple of vector width {}: {} are used",
                                             knobs.items_per_thread, spec.vector_width,
                                             spec.unroll * spec.vector_width));
    } else {
        // Accesses of 16 bytes per thread per tile, counting the tensors that stream (inputs of the
        // full shape, and a map's output; a broadcast input is re-read from cache): sixteen for a
        // reduction with a short element program, eight for a longer one (and a map's backward),
        // four for a map (one tile per block). Measured (docs/results/performance-history.md, issue 15): MSE at
        // unroll 8 ran 2.745 ms on an H100 against 2.802 at 4 and 99.9% of the read roofline on an
        // H200; smooth L1 at unroll 8
        // took 88 registers and ran 95.5% on an H200 against 99.4% at 4 (2.770 and 2.778 ms on an
        // H100); the hardsigmoid map on an H200 100.8% of copy at unroll 2 with 128 threads, 97% at
        // 4 with 256. Hinge (one input streams) keeps unroll 8: 0.99 ms on an H200 against 0.96-1.01
        // at 4 over three runs, 1.396 ms on an H100 against 1.405-1.440.
        int streams = program.is_map() && !gradients ? 1 : 0;
        for (int slot : read)
            streams += layout.inputs[static_cast<std::size_t>(slot)].elements >= layout.count ? 1 : 0;
        int operations = 0;
        for (const auto& node : program.nodes) operations += node.kind == ir::NodeKind::Apply ? 1 : 0;
        const int accesses = program.is_map() ? (gradients ? 8 : 4) : operations <= kShortElementProgram ? 16 : 8;
        spec.unroll = std::clamp(accesses / std::max(1, streams), 1, 8);
        // Inputs of 16 bits or fewer: 4 / inputs read, with vector width 8 (16-byte accesses) as with
        // 4. Measured on H100 over bfloat16 [8192, 32768] (docs/results/performance-history.md, issue 13): vector 8,
        // unroll 2 against 8: hinge 0.182 ms against 0.184, smooth L1 0.356 against 0.411 (91
        // registers: 2 blocks per SM), mse 0.351 against 0.347; vector 4, unroll 8 halves the speed.
        std::size_t input_widest = 0;
        for (DType d : spec.input_dtypes) input_widest = std::max(input_widest, size_of(d));
        if (input_widest > 0 && input_widest <= 2)
            spec.unroll = std::clamp(4 / std::max<int>(1, static_cast<int>(read.size())), 1, 8);
        // A program with several transcendental calls per element is bound by arithmetic, not
        // memory: deeper unrolling only adds registers (KL: unroll 2 is 3% faster than 8 on H100).
        // With the logs' common path (common_path) 4: KL 0.528-0.532 ms on an H200 against
        // 0.539-0.543 at 2, 0.713-0.715 on an H100 against 0.719-0.720 (docs/results/performance-history.md, issue 15).
        int transcendental = 0;
        for (const auto& node : program.nodes)
            transcendental += node.kind == ir::NodeKind::Apply && builtin_info(node.fn).cost == Cost::Transcendental;
        if (transcendental >= 2) spec.unroll = std::min(spec.unroll, spec.common_path(program) ? 4 : 2);
        // A fused value-and-gradient kernel holds loads and results for every unrolled element;
        // past 2 its registers cut occupancy (smooth L1 + d/dp on H200: unroll 2 3.67 ms, 8 5.18 ms).
        if (!program.derivatives.empty()) spec.unroll = std::min(spec.unroll, 2);
        if (columns_by_4 && transcendental < 2 && !(input_widest > 0 && input_widest <= 2)) spec.unroll = 4;
        while (spec.loop == Loop::Rows && spec.unroll > 1 &&
               static_cast<std::int64_t>(spec.block_threads) * spec.vector_width * (spec.unroll / 2) >= layout.dims[inner])
            spec.unroll /= 2;
    }
    // The columns loop with a small float32 gradient program: registers for 1024 threads per SM (64
    // each), so twice the loads are in flight. Hinge + d/dp, d/dt at 512 threads by 4 rows took 100
    // registers, one block per SM; capped, 64 without spilling. Other input types spill under the cap
    // (float64 100 bytes, bfloat16 24) and keep their registers.
    const auto float32 = [](DType d) { return d == DType::float32; };
    const bool all_float32 = spec.compute == DType::float32 &&
                             std::all_of(spec.input_dtypes.begin(), spec.input_dtypes.end(), float32) &&
                             std::all_of(spec.grad_dtypes.begin(), spec.grad_dtypes.end(), float32);
    if (spec.loop == Loop::Columns && small_program && all_float32)
        spec.min_blocks_per_sm = std::max(1, 1024 / spec.block_threads);
    spec.one_block = !program.is_map() && spec.loop == Loop::Rows && KernelSpec::blocks(spec, layout) <= 1;
    return spec;
}

KernelSpec KernelSpec::choose_by_row(const ir::Program& program, const Layout& layout, const KernelOperands& operands,
                                     const Knobs& knobs, bool tuned) {
    if (!layout.by_rows) throw InternalError("a program that reduces along rows planned without a row layout");
    const auto totals = row_totals(program).size();
    if (totals > static_cast<std::size_t>(kMaxTotals))
        throw UnsupportedError(fmt::format("the program combines {} reductions of the whole tensor; a kernel holds at most {}",
                                           totals, kMaxTotals));
    KernelSpec spec;
    spec.loop = Loop::ByRow;
    spec.rank = static_cast<int>(layout.dims.size());
    const std::size_t inner = layout.dims.size() - 1;
    const long long columns = layout.dims[inner];
    // A warp per row while a row is a few thousand elements (no block-wide synchronisation per row);
    // the whole block beyond, so that long rows are not read by 32 threads alone. Warps come 16 to a
    // block, blocks 256 threads: measured on H100 (bench --rows --explore, docs/performance.md),
    // cross-entropy over 32768 x 4096 took 0.202 ms with 512 threads (16 warps) against 0.208 with
    // 256, over 4096 x 131072 0.724 ms with 256-thread blocks against 0.755 with 128.
    const bool warp_per_row = columns <= 8192;
    spec.block_threads = knobs.block_threads > 0 ? knobs.block_threads : warp_per_row ? 512 : 256;
    spec.fast_math = knobs.fast_math.value_or(false);
    spec.tuned = tuned;
    spec.accumulator = Accumulator::Float64;
    if (knobs.accumulator != Accumulator::Auto && knobs.accumulator != Accumulator::Float64)
        spec.notes.push_back("a program that reduces along rows accumulates in float64");
    const auto slots = read_inputs(program);
    const auto per_row = per_row_inputs(program, layout);
    if (operands.input_dtypes.size() < program.inputs.size() || operands.input_data.size() < program.inputs.size())
        throw InternalError("kernel operands do not match the program");
    int element_inputs = 0;
    for (int slot : slots) {
        const auto k = static_cast<std::size_t>(slot);
        spec.inner_strides.push_back(per_row[k] ? 0 : 1);
        spec.input_dtypes.push_back(operands.input_dtypes[k]);
        element_inputs += per_row[k] ? 0 : 1;
    }
    spec.compute = compute_dtype(spec.input_dtypes);
    spec.result_dtype = operands.result_dtype;
    spec.grad_dtypes = operands.grad_dtypes;
    refuse_broadcast_row_gradients(program, layout);

    // Four elements per access where every row of every operand walked along the row starts
    // aligned and steps by 1.
    auto aligned = [&](const void* data, DType dtype, const OperandAccess& access) {
        if (reinterpret_cast<std::uintptr_t>(data) % vector_alignment(dtype) != 0) return false;
        if (access.strides[inner] != 1) return false;
        for (std::size_t d = 0; d < inner; ++d)
            if (access.strides[d] % 4 != 0) return false;
        return true;
    };
    std::string why_scalar;
    if (columns % 4 != 0) why_scalar = fmt::format("the rows' length ({}) is not a multiple of 4", columns);
    for (std::size_t i = 0; i < slots.size() && why_scalar.empty(); ++i) {
        const auto k = static_cast<std::size_t>(slots[i]);
        if (spec.inner_strides[i] == 1 && !aligned(operands.input_data[k], spec.input_dtypes[i], layout.inputs[k]))
            why_scalar = fmt::format("the rows of '{}' are not contiguous, or do not all start {}-byte aligned",
                                     program.inputs[k], vector_alignment(spec.input_dtypes[i]));
    }
    const bool per_row_body = per_row_nodes(program, per_row)[static_cast<std::size_t>(program.body)];
    if (((program.is_map() && !per_row_body) || !program.derivatives.empty()) && why_scalar.empty())
        for (std::size_t k = 0; k < operands.written_data.size(); ++k)
            if (!aligned(operands.written_data[k], operands.written_dtypes[k], layout.output))
                why_scalar = "the rows written (output or gradients) are not contiguous, or do not all start aligned";
    bool vector = why_scalar.empty();
    if (knobs.vector_width == 1) vector = false;
    if (knobs.vector_width > 1 && !vector)
        spec.notes.push_back(fmt::format("vector width {} was asked for, but {}: vector width 1 is used",
                                         knobs.vector_width, why_scalar));
    else if (knobs.vector_width > 4)
        spec.notes.push_back(fmt::format("vector width {} was asked for, but the by-row loop reads at most 4 elements "
                                         "per access: vector width 4 is used", knobs.vector_width));
    spec.vector_width = vector ? 4 : 1;

    spec.team = warp_per_row ? kWarpThreads : spec.block_threads;
    if (knobs.unroll > 0) {
        spec.unroll = knobs.unroll;
    } else if (knobs.items_per_thread > 0) {
        spec.unroll = std::clamp(knobs.items_per_thread / spec.vector_width, 1, kMaxUnroll);
    } else {
        // Measured as above: one input read along the row (cross-entropy's logits) 2, against 4 at
        // 0.219 ms; two or three (cosine, triplet) 4.
        spec.unroll = element_inputs <= 1 ? 2 : 4;
        while (spec.unroll > 1 && static_cast<long long>(spec.team) * spec.vector_width * (spec.unroll / 2) >= columns)
            spec.unroll /= 2;
    }
    spec.one_block = !program.is_map() && KernelSpec::blocks(spec, layout) <= 1;
    return spec;
}

long long KernelSpec::blocks(const KernelSpec& spec, const Layout& layout) {
    if (spec.loop == Loop::ByRow) {
        const long long teams = spec.block_threads / spec.team;
        return std::max<long long>(1, (layout.rows + teams - 1) / teams);
    }
    if (spec.loop == Loop::Strided) return std::max<long long>(1, (layout.count + spec.block_threads - 1) / spec.block_threads);
    const long long inner = layout.dims.back();
    const long long tile = static_cast<long long>(spec.block_threads) * spec.unroll * spec.vector_width;
    return inner == 0 ? 1 : (layout.count / inner) * ((inner + tile - 1) / tile);
}

std::string KernelSpec::signature() const {
    // Knobs at their defaults add nothing: a float64 kernel's source (and key) is what it always was.
    std::string knobs;
    if (accumulator == Accumulator::Float32) knobs += ", float32 accumulator";
    if (accumulator == Accumulator::CompensatedFloat32) knobs += ", compensated float32 accumulator";
    if (fast_math) knobs += ", fast math";
    if (tuned) knobs += ", tuned";
    if (min_blocks_per_sm > 1) knobs += fmt::format(", registers for {} blocks per SM", min_blocks_per_sm);
    if (one_block) knobs += ", one block";
    // Types other than float32 name themselves: an all-float32 kernel's signature is what it was.
    auto named = [](std::span<const DType> dtypes) {
        std::vector<std::string_view> names;
        for (DType d : dtypes) names.push_back(short_name(d));
        return fmt::format("{}", fmt::join(names, " "));
    };
    bool typed = compute != DType::float32 || result_dtype != DType::float32;
    for (DType d : input_dtypes) typed = typed || d != DType::float32;
    for (DType d : grad_dtypes) typed = typed || d != DType::float32;
    if (typed) {
        knobs += fmt::format(", inputs [{}] -> {}", named(input_dtypes), short_name(result_dtype));
        if (!grad_dtypes.empty()) knobs += fmt::format(", gradients [{}]", named(grad_dtypes));
        if (compute == DType::float64) knobs += ", float64 arithmetic";
    }
    if (loop == Loop::Strided) return fmt::format("strided, rank {}, {} threads/block{}", rank, block_threads, knobs);
    if (loop == Loop::ByRow)
        return fmt::format("by row, rank {}, {} threads per row, inner strides [{}], vector {}, unroll {}, {} threads/block{}",
                           rank, team, fmt::join(inner_strides, " "), vector_width, unroll, block_threads, knobs);
    const std::string same_text =
        same_every_row.empty() ? "" : fmt::format(", same every row [{}]", fmt::join(same_every_row, " "));
    if (loop == Loop::Columns)
        return fmt::format("columns, rank {}, inner strides [{}]{}, summed [{}], vector {}, unroll {}, {} threads/block{}",
                           rank, fmt::join(inner_strides, " "), same_text, fmt::join(summed, " "), vector_width, unroll,
                           block_threads, knobs);
    const std::string sums_text = summed.empty() ? "" : fmt::format(", summed [{}]", fmt::join(summed, " "));
    return fmt::format("rows, rank {}, inner strides [{}]{}{}, vector {}, unroll {}, {} threads/block{}", rank,
                       fmt::join(inner_strides, " "), same_text, sums_text, vector_width, unroll, block_threads, knobs);
}

bool KernelSpec::common_path(const ir::Program& program) const {
    return loop == Loop::Rows && compute == DType::float32 && !fast_math && program.derivatives.empty() &&
           has_common_path(program);
}

bool KernelSpec::sums() const {
    return std::any_of(summed.begin(), summed.end(), [](int s) { return s != NotSummed; });
}

int Occupancy::per_sm() const {
    return max_blocks_per_sm > 0 ? std::min(fits_per_sm, max_blocks_per_sm) : fits_per_sm;
}

long long Occupancy::resident_blocks() const {
    return std::max(1, multiprocessors * std::min(std::max(per_sm(), 1), kMaxBlocksPerSm));
}

int Occupancy::blocks_per_sm(unsigned grid) const {
    const int sms = std::max(1, multiprocessors);
    return static_cast<int>(std::min<long long>(per_sm(), (static_cast<long long>(grid) + sms - 1) / sms));
}

double Occupancy::fraction(unsigned grid, int block_threads, int max_threads_per_sm) const {
    if (max_threads_per_sm <= 0) return 0;
    return static_cast<double>(blocks_per_sm(grid)) * block_threads / max_threads_per_sm;
}

LaunchGrid plan_grid(const ir::Program& program, const KernelSpec& spec, const Layout& layout,
                     const Occupancy& occupancy) {
    const long long resident = occupancy.resident_blocks();
    long long grid_limit = resident;
    // (A map whose gradients sum over everything keeps the resident grid too: its last block adds one
    // partial per block.)
    if (program.is_map() && !spec.sums() && occupancy.max_blocks_per_sm <= 0) grid_limit = std::numeric_limits<int>::max();

    LaunchGrid grid;
    long long blocks = 1;
    if (spec.loop == KernelSpec::Loop::Columns) {
        // Chunks of rows times column strips, taken in turn by a resident grid. The chunk count is
        // the one (from enough items for every block to eight times that) whose busiest block walks
        // the fewest rows, the fewer chunks on a tie (partial sums: chunks x columns doubles). Enough
        // items alone left 8 of 264 blocks idle: hinge [32768, 32768], 16 strips, 16 chunks.
        // The rows come in batches where the summed input holds one row per batch ([N, 1, C] against
        // [N, M, C]: N batches of M rows); chunks never straddle two batches.
        const long long inner = layout.dims.back();
        const long long rows = layout.count / inner;
        long long batches = 1;
        const int batch_dims = summed_batch_dims(program, spec, layout);
        for (int d = 0; d < batch_dims; ++d) batches *= layout.dims[static_cast<std::size_t>(d)];
        const long long batch_rows = batches > 0 ? rows / batches : 0;
        const long long strip = static_cast<long long>(spec.block_threads) * spec.vector_width;
        const long long strips = (inner + strip - 1) / strip;
        const long long limit = resident;
        const long long strip_blocks = std::max(1LL, std::min(strips, limit));
        const long long fill = std::max(1LL, (limit + strip_blocks * std::max(1LL, batches) - 1) /
                                                 (strip_blocks * std::max(1LL, batches)));  // chunks per batch
        long long per_batch = fill, busiest = std::numeric_limits<long long>::max();
        for (long long p = fill; p <= 8 * fill && p <= std::max(1LL, batch_rows); ++p) {
            const long long items = p * strip_blocks * std::max(1LL, batches);
            const long long rows_of_busiest = (items + limit - 1) / limit * ((batch_rows + p - 1) / p);
            if (rows_of_busiest < busiest) {
                busiest = rows_of_busiest;
                per_batch = p;
            }
        }
        const long long chunk_rows = std::max(1LL, (batch_rows + per_batch - 1) / per_batch);
        const long long chunks = std::max(1LL, (batch_rows + chunk_rows - 1) / chunk_rows);
        const auto summed = std::count(spec.summed.begin(), spec.summed.end(), KernelSpec::OverRows);
        grid.chunk_rows = chunk_rows;
        grid.batch_rows = batch_rows;
        grid.chunks = static_cast<int>(chunks);
        grid.strip_blocks = static_cast<int>(strip_blocks);
        // No rows (an empty batch): one batch of nothing, whose blocks store nothing (the gradients
        // were cleared before the launch) but still count their arrivals.
        batches = std::max(1LL, batches);
        grid.sum_partials = static_cast<std::size_t>(summed * batches * chunks * inner);
        grid.sum_arrivals = static_cast<std::size_t>(batches * strips);
        blocks = batches * chunks * strip_blocks;
    } else {
        blocks = KernelSpec::blocks(spec, layout);
    }
    if (spec.loop == KernelSpec::Loop::ByRow) {
        // Teams of a block: a block per row, so that blocks ending at different times keep every SM
        // busy to the end (H100, 16384 x 32768: 0.750 ms against 0.789 for a resident grid taking
        // rows in turn). Warp teams: a resident grid (32768 x 4096: 0.202 ms against 0.219 for a
        // block per 16 rows). A reduction's partial sums (one per block and total) must fit the
        // workspace's slots; beyond, blocks take rows grid-stride.
        const bool block_teams = spec.team == spec.block_threads && spec.team > kWarpThreads;
        grid_limit = block_teams && occupancy.max_blocks_per_sm <= 0 ? std::numeric_limits<int>::max() : resident;
        if (!program.is_map()) {
            const long long totals = std::max<long long>(1, static_cast<long long>(row_totals(program).size()));
            grid_limit = std::min(grid_limit, std::max(1LL, static_cast<long long>(occupancy.multiprocessors) * kMaxBlocksPerSm / totals));
        }
    }
    // The columns loop's blocks take (chunk, strip) items in turn, so it too stays within the
    // resident grid that a reduction's partials are sized for.
    grid.blocks = static_cast<unsigned>(std::clamp<long long>(blocks, 1, spec.loop == KernelSpec::Loop::Columns ? resident : grid_limit));
    if (spec.one_block && grid.blocks != 1) throw InternalError("a one-block kernel planned with a larger grid");
    // The rows loop's tiles per row (templates/rows.cuh), for the grid's rounding and the sums' partials.
    const long long inner = layout.dims.empty() ? 0 : layout.dims.back();
    const long long tile = static_cast<long long>(spec.block_threads) * spec.unroll * spec.vector_width;
    const long long tiles_per_row = (inner + tile - 1) / tile;
    if (spec.loop == KernelSpec::Loop::Rows && !spec.same_every_row.empty() && layout.dims.size() > 1 &&
        tiles_per_row > 0) {
        // A grid of whole multiples of the tiles per row keeps each block to the same columns, so the
        // inputs that repeat every row are loaded once (rows.cuh); worth up to 1/16 of the blocks.
        // bfloat16 hinge, t [32768] against [32768, 32768], H100: 95.5% of the read roofline before.
        const long long whole = grid.blocks - grid.blocks % tiles_per_row;
        if (whole > 0 && whole < grid.blocks && whole * 16 >= static_cast<long long>(grid.blocks) * 15)
            grid.blocks = static_cast<unsigned>(whole);
    }
    if (spec.loop == KernelSpec::Loop::Rows && spec.sums()) {
        // templates/grad_sink.cuh: one partial per block for each gradient summed over everything and
        // an arrival counter; where rows span several tiles, one partial per tile for each gradient
        // summed along rows and an arrival counter per row.
        const auto over_all = std::count(spec.summed.begin(), spec.summed.end(), KernelSpec::OverAll);
        const auto along_rows = std::count(spec.summed.begin(), spec.summed.end(), KernelSpec::AlongRows);
        const long long rows = inner > 0 ? layout.count / inner : 0;
        // Gradients summed along rows: one element per `batch_rows` rows (1 for [N, 1]; N for
        // [1, C, 1, 1] against [N, C, H, W], walked as [C, N, H*W]).
        long long elements = 1;
        const int batch_dims = summed_batch_dims(program, spec, layout);
        for (int d = 0; d < batch_dims; ++d) elements *= layout.dims[static_cast<std::size_t>(d)];
        grid.batch_rows = elements > 0 ? std::max(1LL, rows / elements) : 1;
        grid.sum_partials = static_cast<std::size_t>(over_all * grid.blocks);
        grid.sum_arrivals = 1;
        // A block taking whole rows sums each row in its threads and adds it once, instead of a block
        // barrier per tile; the rows must be many enough per block that the last ones even out.
        grid.whole_rows = along_rows > 0 && tiles_per_row > 1 && rows >= kWholeRowsPerBlock * static_cast<long long>(grid.blocks);
        if (along_rows > 0 && grid.batch_rows * tiles_per_row > 1) {
            grid.sum_partials += static_cast<std::size_t>(along_rows * rows * tiles_per_row);
            grid.sum_arrivals += static_cast<std::size_t>(elements);
        }
    }
    return grid;
}

}  // namespace lossjit
