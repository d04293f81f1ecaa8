// elementwise: the kind for maps, whole-tensor reductions and their fused gradients, element by
// element (kinds.hpp): its choice of loop and numbers, and its grid. Its source is
// elementwise_emit.cpp; the columns loop, chosen here, adjusts the spec in columns.cpp.
#include <algorithm>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "codegen/kinds/kinds.hpp"
#include "lang/builtins.hpp"
#include "lossjit/errors.hpp"

namespace lossjit::kinds {
namespace {

// Threads per block when the caller leaves it open. A fused gradient kernel reads and writes; 1024
// threads leave at most 64 registers a thread, so only small gradient programs get them. A map
// without gradients takes one tile per block (elementwise_grid), and small blocks with small tiles
// stream best that way (Triton's pointwise kernels are the same shape).
int automatic_block_threads(const ir::Program& program, const GpuFacts& gpu) {
    if (program.derivatives.empty()) return default_value(program.is_map() ? Default::MapThreads : Default::ReductionThreads, gpu);
    return default_value(small_gradient_program(program, gpu) ? Default::SmallGradientThreads : Default::GradientThreads, gpu);
}

}  // namespace

bool small_gradient_program(const ir::Program& program, const GpuFacts& gpu) {
    if (program.derivatives.empty()) return false;
    const std::size_t read = read_inputs(program).size() + (program.is_map() ? 1 : 0);
    return program.derivatives.size() <= 2 && read <= 3 &&
           program.nodes.size() <= static_cast<std::size_t>(default_value(Default::SmallGradientProgramNodes, gpu));
}

bool transcendental_call(const ir::Program& program, const ir::Node& node) {
    if (node.kind != ir::NodeKind::Apply || builtin_info(node.fn).cost != Cost::Transcendental) return false;
    // x^2, x^-0.5 and the other powers printed exactly (lj_square, rsqrt, ...) are not pow.
    if (node.fn == Builtin::Pow) {
        const ir::Node& exponent = program.node(node.args[1]);
        return exponent.kind != ir::NodeKind::Constant || !exact_power(exponent.value);
    }
    return true;
}

int transcendental_calls(const ir::Program& program) {
    int calls = 0;
    for (const auto& node : program.nodes) calls += transcendental_call(program, node);
    return calls;
}

bool sixteen_bit_inputs(const KernelSpec& spec) {
    std::size_t widest = 0;
    for (DType d : spec.input_dtypes) widest = std::max(widest, size_of(d));
    return widest > 0 && widest <= 2;
}

KernelSpec choose_elementwise(const ir::Program& program, const Layout& layout, const KernelOperands& operands,
                              const Knobs& knobs, bool tuned, const GpuFacts& gpu) {
    using Loop = KernelSpec::Loop;
    using enum KernelSpec::Summed;
    KernelSpec spec;
    spec.block_threads = knobs.block_threads > 0 ? knobs.block_threads : automatic_block_threads(program, gpu);
    spec.fast_math = knobs.fast_math.value_or(false);
    spec.tuned = tuned;
    const Accumulator accumulator = knobs.accumulator == Accumulator::Auto ? Accumulator::Float64 : knobs.accumulator;
    spec.accumulator = program.is_map() ? Accumulator::Float64 : accumulator;
    if (program.is_map() && accumulator != Accumulator::Float64)
        spec.notes.push_back("a map sums nothing: the accumulator does not apply");
    if (knobs.row_cache == true)
        spec.notes.push_back("a row cache was asked for, but the program does not reduce along rows: it walks no row twice");
    if (knobs.row_team != RowTeam::Auto)
        spec.notes.push_back("a row team was asked for, but the program does not reduce along rows");
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
    const bool upstream = read.size() > slots.size();
    spec.compute = program_compute_dtype(program, operands.input_dtypes,
                                         upstream ? std::optional(spec.input_dtypes.back()) : std::nullopt);
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
                    "differently (one GPU kernel sums inputs broadcast along the same dimensions): ask for these "
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
                "[N, 1] and [1, M, 1]), which one GPU kernel does not do: ask for them in two calls (reference_grad "
                "computes any)",
                summed_names([](int s) { return s == OverRows || s == AlongRows; })));
        batch_dims = kept;
    }
    if (over_rows && other_sums)
        throw UnsupportedError(fmt::format(
            "the gradients of {} are summed over rows (an input of one row, [C]) and along rows or over everything "
            "(an input [N, 1], or a scalar), which one GPU kernel does not do: ask for them in two calls (reference_grad "
            "computes any)",
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
    const bool small_program = small_gradient_program(program, gpu);
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
    // Sums along rows (an input [N, 1]) in a reduction with a small program: on an H200, 512 threads
    // (two blocks of 64 registers per SM where 1024 threads made one); an H100 keeps 1024.
    const bool along_rows = std::count(spec.summed.begin(), spec.summed.end(), AlongRows) > 0;
    if (along_rows && !program.is_map() && small_program && knobs.block_threads == 0)
        spec.block_threads = default_value(Default::AlongRowsSmallGradientThreads, gpu);
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
    // twice the elements: more threads halve the tiles and their index work per byte.
    if (knobs.block_threads == 0 && spec.loop == Loop::Rows && !program.is_map() && !gradients &&
        spec.vector_width == 8)
        spec.block_threads = default_value(Default::SixteenBitReductionThreads, gpu);
    // A reduction with logs on their common path (KL) is bound by arithmetic: more threads (the same
    // registers and occupancy, half the blocks).
    if (knobs.block_threads == 0 && !program.is_map() && spec.common_path(program))
        spec.block_threads = default_value(Default::CommonPathReductionThreads, gpu);

    if (knobs.unroll > 0) {
        spec.unroll = knobs.unroll;
    } else if (knobs.items_per_thread > 0) {
        spec.unroll = std::clamp(knobs.items_per_thread / spec.vector_width, 1, kMaxUnroll);
        if (spec.unroll * spec.vector_width != knobs.items_per_thread)
            spec.notes.push_back(fmt::format("{} items per thread is not a multiple of vector width {}: {} are used",
                                             knobs.items_per_thread, spec.vector_width,
                                             spec.unroll * spec.vector_width));
    } else {
        // Accesses of 16 bytes per thread per tile, divided among the tensors that stream (inputs
        // of the full shape, and a map's output; a broadcast input is re-read from cache): more for a
        // reduction with a short element program than for a longer one (and a map's backward), the
        // fewest for a map (one tile per block). Hinge (one input streams) gets the short program's
        // 16 over one stream, capped at 8.
        int streams = program.is_map() && !gradients ? 1 : 0;
        for (int slot : read)
            streams += layout.inputs[static_cast<std::size_t>(slot)].elements >= layout.count ? 1 : 0;
        int operations = 0;
        for (const auto& node : program.nodes) operations += node.kind == ir::NodeKind::Apply ? 1 : 0;
        const int accesses = default_value(program.is_map()
                                               ? (gradients ? Default::MapBackwardAccesses : Default::MapAccesses)
                                           : operations <= default_value(Default::ShortElementProgram, gpu)
                                               ? Default::ShortReductionAccesses
                                               : Default::LongReductionAccesses,
                                           gpu);
        spec.unroll = std::clamp(accesses / std::max(1, streams), 1, 8);
        // Inputs of 16 bits or fewer (vector width 8, 16-byte accesses as with 4): their accesses
        // divided among the inputs read; more unrolling only adds registers.
        if (sixteen_bit_inputs(spec))
            spec.unroll = std::clamp(default_value(Default::SixteenBitAccesses, gpu) /
                                         std::max<int>(1, static_cast<int>(read.size())),
                                     1, 8);
        // A program with several transcendental calls per element is bound by arithmetic, not
        // memory: deeper unrolling only adds registers (less so on the logs' common path).
        if (transcendental_calls(program) >= 2)
            spec.unroll = std::min(spec.unroll, default_value(spec.common_path(program) ? Default::CommonPathUnrollLimit
                                                                                        : Default::TranscendentalUnrollLimit,
                                                              gpu));
        // A fused value-and-gradient kernel holds loads and results for every unrolled element: past
        // the limit its registers cut occupancy.
        if (!program.derivatives.empty()) spec.unroll = std::min(spec.unroll, default_value(Default::GradientUnrollLimit, gpu));
        while (spec.loop == Loop::Rows && spec.unroll > 1 &&
               static_cast<std::int64_t>(spec.block_threads) * spec.vector_width * (spec.unroll / 2) >= layout.dims[inner])
            spec.unroll /= 2;
    }
    if (spec.loop == Loop::Columns) choose_columns(spec, program, layout, knobs, gpu);
    spec.one_block = !program.is_map() && spec.loop == Loop::Rows && KernelSpec::blocks(spec, layout) <= 1;
    return spec;
}


// ---- grid (the columns loop's is columns_grid) ----
LaunchGrid elementwise_grid(const ir::Program& program, const KernelSpec& spec, const Layout& layout,
                            const Occupancy& occupancy) {
    const long long resident = occupancy.resident_blocks();
    long long grid_limit = resident;
    // (A map whose gradients sum over everything keeps the resident grid too: its last block adds one
    // partial per block.)
    if (program.is_map() && !spec.sums() && occupancy.max_blocks_per_sm <= 0) grid_limit = std::numeric_limits<int>::max();

    LaunchGrid grid;
    const long long blocks = KernelSpec::blocks(spec, layout);
    grid.blocks = static_cast<unsigned>(std::clamp<long long>(blocks, 1, grid_limit));
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

}  // namespace lossjit::kinds
