// knobs: the kernel variant knobs are checked when compiling (not at the first launch), read from
// text as the CLI spells them, honoured by KernelSpec::choose where the layout allows (and noted
// where not), part of the signature and the cache key, and every combination compiles with NVRTC.
#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <regex>
#include <set>
#include <thread>

#include "jit/cache.hpp"
#include "jit/compile.hpp"
#include "tuning/knobs.hpp"
#include "lossjit/errors.hpp"
#include "lossjit/lossjit.hpp"
#include "codegen/kernel_spec.hpp"
#include "pipeline.hpp"

using namespace lossjit;

namespace {

ir::Program checked(const std::string& text) { return check(parse(text, "expr"), {}); }

Layout contiguous_layout(const ir::Program& program, Shape shape) {
    std::vector<OperandShape> shapes;
    for (const auto& name : program.inputs) shapes.push_back({name, shape, {}});
    OperandShape out{"output", shape, {}};
    return plan_layout(shapes, program.is_map() ? &out : nullptr);
}

KernelSpec choose(const ir::Program& program, const Layout& layout, const Knobs& knobs,
                  const std::vector<const void*>& data = {}, const void* output = nullptr, bool tuned = false) {
    KernelOperands operands = KernelOperands::unplaced(program);
    for (std::size_t k = 0; k < data.size(); ++k) operands.input_data[k] = data[k];
    if (output) {
        operands.written_data.push_back(output);
        operands.written_dtypes.push_back(DType::float32);
    }
    return KernelSpec::choose(program, layout, operands, knobs, tuned);
}

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}  // namespace

TEST_SUITE("knobs") {

TEST_CASE("bad knobs are UsageErrors from compile(), naming the knob and what it takes") {
    const std::pair<std::function<void(Options&)>, const char*> table[] = {
        {[](Options& o) { o.knobs.block_threads = 100; }, "threads per block must be a multiple of 32 in [32, 1024], not 100"},
        {[](Options& o) { o.knobs.block_threads = 2048; }, "not 2048"},
        {[](Options& o) { o.knobs.block_threads = -32; }, "not -32"},
        {[](Options& o) { o.knobs.unroll = 65; }, "unroll must be in [1, 64] (0: automatic), not 65"},
        {[](Options& o) { o.knobs.unroll = -1; }, "unroll must be in [1, 64]"},
        {[](Options& o) { o.knobs.items_per_thread = 128; }, "items per thread must be in [1, 64] (0: automatic), not 128"},
        {[](Options& o) { o.knobs.unroll = 2, o.knobs.items_per_thread = 8; }, "set unroll or items per thread, not both"},
        {[](Options& o) { o.knobs.vector_width = 2; }, "vector width must be 1, 4 or 8 (0: automatic), not 2"},
        {[](Options& o) { o.knobs.vector_width = 8, o.knobs.items_per_thread = 12; },
         "items per thread (12) must be a multiple of the vector width (8)"},
        {[](Options& o) { o.knobs.vector_width = 4, o.knobs.items_per_thread = 6; },
         "items per thread (6) must be a multiple of the vector width (4)"},
        {[](Options& o) { o.knobs.max_blocks_per_sm = 33; }, "blocks per SM must be in [1, 32] (0: automatic), not 33"},
        {[](Options& o) { o.knobs.max_blocks_per_sm = -1; }, "blocks per SM must be in [1, 32]"},
        {[](Options& o) { o.knobs.accumulator = static_cast<Accumulator>(9); }, "unknown accumulator (9)"},
    };
    for (const auto& [change, message] : table) {
        CAPTURE(message);
        Options options;
        change(options);
        CHECK_THROWS_WITH_AS(compile("mean(x)", options), doctest::Contains(message), UsageError);
    }
    // The boundaries themselves are fine.
    Options edge;
    edge.knobs.block_threads = 1024;
    edge.knobs.items_per_thread = 64;
    edge.knobs.vector_width = 4;
    edge.knobs.max_blocks_per_sm = 32;
    edge.knobs.accumulator = Accumulator::CompensatedFloat32;
    edge.knobs.fast_math = true;
    CHECK_NOTHROW(compile("mean(x)", edge));
}

TEST_CASE("knobs from text: names, aliases, values, auto") {
    struct Row {
        const char* text;
        std::function<bool(const Options&)> holds;
    };
    const Row table[] = {
        {"block=512", [](const Options& o) { return o.knobs.block_threads == 512; }},
        {"threads=64", [](const Options& o) { return o.knobs.block_threads == 64; }},
        {"items=16", [](const Options& o) { return o.knobs.items_per_thread == 16; }},
        {"unroll=8", [](const Options& o) { return o.knobs.unroll == 8; }},
        {"vector=1", [](const Options& o) { return o.knobs.vector_width == 1; }},
        {"vector=auto", [](const Options& o) { return o.knobs.vector_width == 0; }},
        {"blocks_per_sm=4", [](const Options& o) { return o.knobs.max_blocks_per_sm == 4; }},
        {"bps=0", [](const Options& o) { return o.knobs.max_blocks_per_sm == 0; }},
        {"registers=64", [](const Options& o) { return o.knobs.max_registers == 64; }},
        {"max_registers=255", [](const Options& o) { return o.knobs.max_registers == 255; }},
        {"registers=auto", [](const Options& o) { return o.knobs.max_registers == 0; }},
        {"acc=float32", [](const Options& o) { return o.knobs.accumulator == Accumulator::Float32; }},
        {"acc=kahan", [](const Options& o) { return o.knobs.accumulator == Accumulator::CompensatedFloat32; }},
        {"accumulator=float64", [](const Options& o) { return o.knobs.accumulator == Accumulator::Float64; }},
        {"acc=auto", [](const Options& o) { return o.knobs.accumulator == Accumulator::Auto; }},
        {"fast_math=on", [](const Options& o) { return o.knobs.fast_math == true; }},
        {"fast_math=0", [](const Options& o) { return o.knobs.fast_math == false; }},
        {"fast_math=auto", [](const Options& o) { return !o.knobs.fast_math.has_value(); }},
        {"row_cache=on", [](const Options& o) { return o.knobs.row_cache == true; }},
        {"cache_rows=off", [](const Options& o) { return o.knobs.row_cache == false; }},
        {"row_cache=auto", [](const Options& o) { return !o.knobs.row_cache.has_value(); }},
    };
    for (const auto& row : table) {
        CAPTURE(row.text);
        Options options;
        set_knob(options.knobs, row.text);
        CHECK(row.holds(options));
    }
    // items and unroll replace each other instead of contradicting.
    Knobs both;
    set_knob(both, "unroll=4");
    set_knob(both, "items=8");
    CHECK((both.unroll == 0 && both.items_per_thread == 8));

    const std::pair<const char*, const char*> errors[] = {
        {"bogus=1", "unknown knob 'bogus' (knobs: block, items, unroll, vector, blocks_per_sm, registers, acc, fast_math, row_cache, row_cluster, row_prefetch, row_team)"},
        {"block", "expected KNOB=VALUE"},
        {"block=", "expected KNOB=VALUE"},
        {"block=fast", "knob block: 'fast' is not a whole number (or 'auto')"},
        {"block=96.5", "not a whole number"},
        {"block=100", "threads per block must be a multiple of 32"},
        {"acc=float16", "knob acc: 'float16' is not an accumulator (float64, float32, compensated or auto)"},
        {"fast_math=maybe", "knob fast_math: 'maybe' is not on, off or auto"},
        {"row_cache=2", "knob row_cache: '2' is not on, off or auto"},
        {"vector=3", "vector width must be 1, 4 or 8"},
        {"row_cluster=3", "blocks of a row cluster must be 1, 2, 4 or 8 (0: automatic), not 3"},
        {"row_cluster=16", "blocks of a row cluster must be 1, 2, 4 or 8"},
        {"row_team=thread", "knob row_team: 'thread' is not warp, block or auto"},
        {"registers=16", "registers a thread must be in [32, 255] (0: automatic), not 16"},
        {"registers=256", "registers a thread must be in [32, 255]"},
        {"registers=many", "knob registers: 'many' is not a whole number (or 'auto')"},
    };
    for (const auto& [text, message] : errors) {
        CAPTURE(text);
        Options options;
        CHECK_THROWS_WITH_AS(set_knob(options.knobs, text), doctest::Contains(message), UsageError);
    }
    // A list, as the C API's lossjit_options.knobs: commas or spaces, empty items skipped.
    Knobs listed;
    set_knobs(listed, "block=512, row_cache=on,,unroll=4 ");
    CHECK((listed.block_threads == 512 && listed.row_cache == true && listed.unroll == 4));
    Knobs untouched;
    CHECK_THROWS_WITH_AS(set_knobs(untouched, "block=512,vector=3"), doctest::Contains("vector width must be 1, 4 or 8"),
                         UsageError);

    Knobs described;
    CHECK(describe(described) == "defaults");
    set_knob(described, "acc=compensated");
    set_knob(described, "block=128");
    set_knob(described, "fast_math=on");
    CHECK(describe(described) == "block 128, acc compensated, fast_math on");
    set_knob(described, "row_cache=off");
    CHECK(describe(described) == "block 128, acc compensated, fast_math on, row_cache off");
    set_knob(described, "cluster=4");
    CHECK(described.row_cluster == 4);
    CHECK(describe(described) == "block 128, acc compensated, fast_math on, row_cache off, row_cluster 4");
    set_knob(described, "team=warp");
    CHECK(described.row_team == RowTeam::Warp);
    set_knob(described, "row_team=block");
    CHECK(describe(described) == "block 128, acc compensated, fast_math on, row_cache off, row_cluster 4, row_team block");
    set_knob(described, "row_team=auto");
    CHECK(described.row_team == RowTeam::Auto);
    set_knob(described, "prefetch=on");
    CHECK(described.row_prefetch == true);
    CHECK(describe(described) == "block 128, acc compensated, fast_math on, row_cache off, row_cluster 4, row_prefetch on");
    set_knob(described, "row_prefetch=auto");
    CHECK(!described.row_prefetch);
    set_knob(described, "registers=48");
    CHECK(describe(described) == "block 128, registers 48, acc compensated, fast_math on, row_cache off, row_cluster 4");
    set_knob(described, "registers=auto");
    CHECK_THROWS_WITH_AS(set_knob(described, "row_prefetch=sometimes"), "knob row_prefetch: 'sometimes' is not on, off or auto",
                         UsageError);
    // The help names the ranges validate_knobs checks.
    REQUIRE(knob_help().size() == 12);
    CHECK(knob_help()[0].values.starts_with("threads per block: a multiple of 32 in [32, 1024]; default 256, "));
    CHECK(knob_help()[0].values.ends_with("per GPU in src/codegen/kinds/defaults.cpp"));
    CHECK(knob_help()[4].values.find("[1, 32]") != std::string::npos);
}

TEST_CASE("choose: items per thread = unroll x vector width; vector 4 only where layout and alignment allow") {
    const auto mse = checked("mean((p - t)^2)");
    const auto big = contiguous_layout(mse, {1 << 20});
    const auto odd = contiguous_layout(mse, {1001, 3});  // collapses to 3003: not a multiple of 4
    alignas(16) static float buffer[64];
    const void* misaligned = buffer + 1;

    struct Row {
        const char* what;
        const Layout* layout;
        Knobs knobs;
        std::vector<const void*> data;
        int vector, unroll;
        const char* note;  // "" for none
    };
    Knobs items16;
    items16.items_per_thread = 16;
    Knobs items6;
    items6.items_per_thread = 6;
    Knobs items16v1 = items16;
    items16v1.vector_width = 1;
    Knobs v4;
    v4.vector_width = 4;
    Knobs unroll3;
    unroll3.unroll = 3;
    Knobs automatic;
    const Row table[] = {
        {"automatic: 16 loads of 16 bytes in flight for two inputs", &big, automatic, {}, 4, 8, ""},
        {"items 16 on aligned data: 4 lanes x unroll 4", &big, items16, {}, 4, 4, ""},
        {"items 6: not a multiple of 4, scalar accesses", &big, items6, {}, 1, 6, ""},
        {"items 16 with vector 1: unroll 16", &big, items16v1, {}, 1, 16, ""},
        {"items 16 where rows are 3003 long: scalar, unroll 16", &odd, items16, {}, 1, 16, ""},
        {"unroll 3 stays unroll 3", &big, unroll3, {}, 4, 3, ""},
        {"vector 4 asked for, rows of 3003", &odd, v4, {}, 1, 8, "the last dimension (3003) is not a multiple of 4"},
        {"vector 4 asked for, p misaligned", &big, v4, {misaligned, nullptr}, 1, 8,
         "the rows of 'p' do not all start 16-byte aligned"},
    };
    for (const auto& row : table) {
        CAPTURE(row.what);
        const KernelSpec spec = choose(mse, *row.layout, row.knobs, row.data);
        CHECK(spec.vector_width == row.vector);
        CHECK(spec.unroll == row.unroll);
        if (*row.note) {
            REQUIRE(spec.notes.size() == 1);
            CHECK(spec.notes[0].find(row.note) != std::string::npos);
            CHECK(spec.notes[0].find("vector width 1 is used") != std::string::npos);
        } else {
            CHECK(spec.notes.empty());
        }
    }

    // The strided loop has no tiles: such knobs are noted as not applying.
    std::vector<OperandShape> transposed{{"p", {64, 64}, {1, 64}}, {"t", {64, 64}, {}}};
    const Layout strided_layout = plan_layout(transposed, nullptr);
    const KernelSpec strided = choose(mse, strided_layout, items16);
    CHECK(strided.loop == KernelSpec::Loop::Strided);
    REQUIRE(strided.notes.size() == 1);
    CHECK(strided.notes[0].find("the strided loop has no tiles") != std::string::npos);

    // Maps sum nothing: an accumulator is noted and not used.
    const auto map = checked("x * 2");
    Knobs f32;
    f32.accumulator = Accumulator::Float32;
    const KernelSpec map_spec = choose(map, contiguous_layout(map, {1024}), f32);
    CHECK(map_spec.accumulator == Accumulator::Float64);
    REQUIRE(map_spec.notes.size() == 1);
    CHECK(map_spec.notes[0] == "a map sums nothing: the accumulator does not apply");
}

TEST_CASE("the default unroll of the five reference problems (16-byte accesses per thread per tile)") {
    struct Row {
        const char* program;
        std::vector<Shape> shapes;  // per input; the first is the full shape (rows longer than a tile)
        int unroll;
    };
    const Row table[] = {
        {"mean(max(0, 1 - p*t))", {{64, 32768}, {32768}}, 8},               // hinge: one input streams
        {"mean((p - t)^2)", {{64, 32768}, {64, 32768}}, 8},                // short program: 16 / 2
        {"d = abs(p - t); mean(d < 1 ? 0.5 * d^2 : d - 0.5)", {{64, 32768}, {64, 32768}}, 4},  // longer: 8 / 2
        {"batchmean(xlogy(t, t) - t * log(p))", {{64, 32768}, {64, 32768}}, 4},  // two logs, common path
        {"clamp(x + 3, 0, 6) / 6", {{64, 32768}}, 2},                       // a map: 4 / (input + output)
    };
    for (const auto& row : table) {
        const std::string text = row.program;
        CAPTURE(text);
        const auto program = checked(text);
        std::vector<OperandShape> shapes;
        for (std::size_t k = 0; k < program.inputs.size(); ++k) shapes.push_back({program.inputs[k], row.shapes[k], {}});
        OperandShape out{"output", row.shapes[0], {}};
        const Layout layout = plan_layout(shapes, program.is_map() ? &out : nullptr);
        CHECK(choose(program, layout, {}).unroll == row.unroll);
    }
    // Two transcendental calls without the logs' common path: 2 (fast math, other functions).
    const auto kl = checked("batchmean(xlogy(t, t) - t * log(p))");
    const auto two_exps = checked("mean(exp(p) * exp(t))");
    const std::vector<OperandShape> shapes{{"p", {64, 32768}, {}}, {"t", {64, 32768}, {}}};
    const Layout layout = plan_layout(shapes, nullptr);
    CHECK(choose(kl, layout, Knobs{.fast_math = true}).unroll == 2);
    CHECK_FALSE(choose(kl, layout, Knobs{.fast_math = true}).common_path(kl));
    CHECK(choose(kl, layout, {}).common_path(kl));
    CHECK(choose(two_exps, layout, {}).unroll == 2);
    // With the common path 512 threads per block, unless asked otherwise; without it the usual 256.
    CHECK(choose(kl, layout, {}).block_threads == 512);
    CHECK(choose(kl, layout, Knobs{.block_threads = 128}).block_threads == 128);
    CHECK(choose(kl, layout, Knobs{.fast_math = true}).block_threads == 256);
    CHECK(choose(two_exps, layout, {}).block_threads == 256);
}

TEST_CASE("inputs that repeat every row are marked, and the grid keeps each block to its columns") {
    struct Row {
        std::vector<Shape> shapes;       // p's, then t's
        std::vector<int> same_every_row;  // per read input (p, t)
    };
    const auto hinge = checked("mean(max(0, 1 - p*t))");
    const Row table[] = {
        {{{64, 32768}, {32768}}, {0, 1}},          // t [C] against [N, C]
        {{{64, 32768}, {1, 32768}}, {0, 1}},       // ... with a leading 1
        {{{64, 32768}, {64, 32768}}, {}},          // both full: nothing repeats
        {{{64, 32768}, {64, 1}}, {}},              // one value per row: loaded per tile as before
        {{{32768}, {32768}}, {}},                  // one row
        {{{8, 64, 32768}, {64, 32768}}, {0, 1}},  // [M, C] against [N, M, C]: rows of M x C
        {{{8, 64, 32768}, {32768}}, {0, 1}},
        {{{8, 64, 32768}, {8, 1, 32768}}, {}},    // [N, 1, C]: another row in every batch
    };
    for (const auto& row : table) {
        CAPTURE(format_shape(row.shapes[0]));
        CAPTURE(format_shape(row.shapes[1]));
        const std::vector<OperandShape> shapes{{"p", row.shapes[0], {}}, {"t", row.shapes[1], {}}};
        const Layout layout = plan_layout(shapes, nullptr);
        const KernelSpec spec = choose(hinge, layout, {});
        CHECK(spec.same_every_row == row.same_every_row);
        CHECK((spec.signature().find("same every row") != std::string::npos) == !row.same_every_row.empty());
        CHECK((emit_cuda(hinge, spec).find("same_every_row(int k) { return k == 1 ? true : false; }") !=
               std::string::npos) == !row.same_every_row.empty());
    }
    // The grid: a multiple of the tiles per row where that costs at most 1/16 of the blocks.
    const auto grid = [&](long long columns, int sms) {
        const std::vector<OperandShape> shapes{{"p", {4096, columns}, {}}, {"t", {columns}, {}}};
        const Layout layout = plan_layout(shapes, nullptr);
        const KernelSpec spec = choose(hinge, layout, Knobs{.block_threads = 256, .unroll = 8});  // 8192 per tile
        return plan_grid(hinge, spec, layout, Occupancy{.fits_per_sm = 2, .multiprocessors = sms}).blocks;
    };
    CHECK(grid(32768, 132) == 264);       // 4 tiles per row: 264 already a multiple
    CHECK(grid(3 * 8192, 132) == 264);    // 3 tiles: 264 = 88 x 3
    CHECK(grid(5 * 8192, 132) == 260);    // 5 tiles: 4 blocks fewer
    CHECK(grid(100 * 8192, 132) == 264);  // 100 tiles: 200 blocks would lose a quarter, so not
    CHECK(grid(500 * 8192, 132) == 264);  // rows longer than the grid
    // Nothing repeats: the resident grid as before.
    const auto mse = checked("mean((p - t)^2)");
    const std::vector<OperandShape> shapes{{"p", {4096, 5 * 8192}, {}}, {"t", {4096, 5 * 8192}, {}}};
    const Layout full = plan_layout(shapes, nullptr);
    const KernelSpec spec = choose(mse, full, Knobs{.block_threads = 256, .unroll = 8});
    CHECK(plan_grid(mse, spec, full, Occupancy{.fits_per_sm = 2, .multiprocessors = 132}).blocks == 264);
}

TEST_CASE("the default block: 512 threads for reductions over 16-bit inputs, else as before") {
    struct Row {
        const char* program;
        DType dtype;
        int block;
    };
    const Row table[] = {
        {"mean(max(0, 1 - p*t))", DType::bfloat16, 512},
        {"mean((p - t)^2)", DType::float16, 512},
        {"mean((p - t)^2)", DType::float32, 256},
        {"mean((p - t)^2)", DType::float64, 256},
        {"clamp(p + 3, 0, 6) / 6 + t", DType::bfloat16, 128},  // a map
    };
    for (const auto& row : table) {
        CAPTURE(row.program);
        CAPTURE(to_string(row.dtype));
        const auto program = checked(row.program);
        const Layout layout = contiguous_layout(program, {64, 32768});
        const KernelOperands operands = KernelOperands::unplaced(program, row.dtype);
        CHECK(KernelSpec::choose(program, layout, operands).block_threads == row.block);
        CHECK(KernelSpec::choose(program, layout, operands, Knobs{.block_threads = 64}).block_threads == 64);
    }
}

TEST_CASE("every knob changes the signature and the cache key; the defaults change neither") {
    const auto program = checked("mean((p - t)^2)");
    const auto layout = contiguous_layout(program, {1 << 20});
    const KernelSpec defaults = choose(program, layout, {});
    CHECK(defaults.signature() == "rows, rank 1, inner strides [1 1], vector 4, unroll 8, 256 threads/block");
    // Automatic knobs resolve to what the defaults spell out.
    Knobs spelled;
    spelled.block_threads = 256;
    spelled.accumulator = Accumulator::Float64;
    spelled.fast_math = false;
    CHECK(choose(program, layout, spelled).signature() == defaults.signature());

    struct Variant {
        std::string name;
        Knobs knobs;
        bool tuned = false;
    };
    std::vector<Variant> variants;
    auto add = [&](const char* name, const std::function<void(Knobs&)>& change, bool tuned = false) {
        Knobs k;
        change(k);
        variants.push_back({name, k, tuned});
    };
    add("defaults", [](Knobs&) {});
    add("block 512", [](Knobs& k) { k.block_threads = 512; });
    add("items 16", [](Knobs& k) { k.items_per_thread = 16; });
    add("unroll 2", [](Knobs& k) { k.unroll = 2; });
    add("vector 1", [](Knobs& k) { k.vector_width = 1; });
    add("float32", [](Knobs& k) { k.accumulator = Accumulator::Float32; });
    add("compensated", [](Knobs& k) { k.accumulator = Accumulator::CompensatedFloat32; });
    add("fast math", [](Knobs& k) { k.fast_math = true; });
    add("tuned", [](Knobs&) {}, true);

    std::set<std::string> signatures, keys;
    for (const auto& [name, knobs, tuned] : variants) {
        CAPTURE(name);
        const KernelSpec spec = choose(program, layout, knobs, {}, nullptr, tuned);
        CHECK(signatures.insert(spec.signature()).second);
        CHECK(keys.insert(cache_key(emit_cuda(program, spec), "sm_90", spec.fast_math)).second);
    }
    const auto fast = choose(program, layout, variants[7].knobs);
    CHECK(fast.signature().find(", fast math") != std::string::npos);
    // Fast math enters the key through the NVRTC options too, not only through the signature line.
    const std::string source = emit_cuda(program, defaults);
    CHECK(cache_key(source, "sm_90", true) != cache_key(source, "sm_90", false));
    CHECK(compile_options("sm_90", true).back() == "--use_fast_math");
    const auto plain = compile_options("sm_90", false);
    CHECK(std::find(plain.begin(), plain.end(), "--use_fast_math") == plain.end());
}

TEST_CASE("float64 kernels are the same bytes as before the knobs; other accumulators wrap the sink") {
    const auto program = checked("mean((p - t)^2)");
    const auto layout = contiguous_layout(program, {1 << 20});
    const std::string f64 = emit_cuda(program, choose(program, layout, {}));
    CHECK(f64.find("    lj::SumSink sum;\n") != std::string::npos);
    CHECK(f64.find("Accumulating") == std::string::npos);
    CHECK(f64.find("accumulators other than float64") == std::string::npos);

    Knobs k;
    k.accumulator = Accumulator::CompensatedFloat32;
    const std::string comp = emit_cuda(program, choose(program, layout, k));
    CHECK(comp.find("    lj::Accumulating<lj::AccCompensated, lj::SumSink> sum;\n") != std::string::npos);
    k.accumulator = Accumulator::Float32;
    const auto grads = differentiate(program, std::vector<int>{0}, {});
    OperandShape out{"output", {1 << 20}, {}};
    std::vector<OperandShape> shapes{{"p", {1 << 20}, {}}, {"t", {1 << 20}, {}}};
    const std::string grad = emit_cuda(grads, choose(grads, plan_layout(shapes, &out), k));
    CHECK(grad.find("    lj::Accumulating<lj::AccFloat32, lj::GradSink<Element>> sink{grads};\n") != std::string::npos);
}

TEST_CASE("a float32 accumulator leaves no float64 sum in the loop; compensation survives fast math") {
    const auto program = checked("mean((p - t)^2)");
    const auto layout = contiguous_layout(program, {1 << 20});
    auto ptx = [&](Accumulator acc, bool fast_math) {
        Knobs k;
        k.accumulator = acc;
        k.fast_math = fast_math;
        const KernelSpec spec = choose(program, layout, k);
        return compile_cuda(emit_cuda(program, spec), "compute_90", spec.fast_math).data;
    };
    // float64: one conversion per 16-byte load (4 lanes added in float32 first); unroll 8 here.
    const auto f64 = ptx(Accumulator::Float64, false);
    const auto f32 = ptx(Accumulator::Float32, false);
    CHECK(count(f64, "cvt.f64.f32") == 8);
    CHECK(count(f32, "cvt.f64.f32") == 1);  // the thread's total, once, for the block finish
    // Neumaier: two more subtractions per addition, with or without fast math.
    const auto comp = ptx(Accumulator::CompensatedFloat32, false);
    const auto comp_fast = ptx(Accumulator::CompensatedFloat32, true);
    const auto subs = [](const std::string& text) { return count(text, "sub.f32") + count(text, "sub.rn.f32") + count(text, "sub.ftz.f32") + count(text, "sub.rn.ftz.f32"); };
    CHECK(subs(comp) == subs(f64) + 2 * 8);
    CHECK(subs(comp_fast) == subs(comp));
}

TEST_CASE("every knob combination compiles with NVRTC: reductions, gradients and maps, rows and strided") {
    const auto reduction = checked("param k = 2; mean(k * (p - t)^2 / (abs(t) + 1) + sqrt(abs(p)))");
    const auto gradient = differentiate(reduction, std::vector<int>{0, 1}, {});
    const auto map = checked("clamp(x + 3, 0, 6) / 6");
    struct Job {
        std::string what;
        const ir::Program* program;
        KernelSpec spec;
    };
    std::vector<Job> jobs;
    auto rows = [](const ir::Program& program, int block, int vector, int unroll) {
        KernelSpec spec;
        spec.block_threads = block;
        spec.vector_width = vector;
        spec.unroll = unroll;
        spec.inner_strides.assign(read_inputs(program).size(), 1);
        return spec;
    };
    for (const ir::Program* program : {&reduction, &gradient, &map}) {
        const auto accs = program->is_map() ? std::vector<Accumulator>{Accumulator::Float64}
                                            : std::vector<Accumulator>{Accumulator::Float64, Accumulator::Float32,
                                                                       Accumulator::CompensatedFloat32};
        // Every accumulator with and without fast math, in both loops...
        for (Accumulator acc : accs) {
            for (bool fast : {false, true}) {
                KernelSpec tiled = rows(*program, 256, 4, 2);
                KernelSpec strided;
                strided.loop = KernelSpec::Loop::Strided;
                strided.rank = 3;
                for (KernelSpec* spec : {&tiled, &strided}) {
                    spec->accumulator = acc;
                    spec->fast_math = fast;
                    jobs.push_back({spec->signature(), program, *spec});
                }
            }
        }
        // ...and the extremes of threads per block, vector width and unroll.
        for (int block : {32, 1024})
            for (auto [vector, unroll] : {std::pair{1, 1}, std::pair{4, 16}, std::pair{1, 64}})
                jobs.push_back({"", program, rows(*program, block, vector, unroll)});
    }
    for (auto& job : jobs) job.what = job.spec.signature() + (job.program->is_map() ? " (map)" : "");
    CHECK(jobs.size() >= 40);
    // Two threads: NVRTC is thread-safe, and this machine class has two cores.
    std::atomic<std::size_t> next{0};
    std::vector<std::string> failures(jobs.size());
    auto work = [&] {
        for (std::size_t i = next++; i < jobs.size(); i = next++) {
            try {
                const auto image = compile_cuda(emit_cuda(*jobs[i].program, jobs[i].spec), "sm_90", jobs[i].spec.fast_math);
                if (image.data.compare(0, 4, "\x7f" "ELF") != 0) failures[i] = "not a CUBIN";
            } catch (const std::exception& e) {
                failures[i] = e.what();
            }
        }
    };
    std::thread other(work);
    work();
    other.join();
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        CAPTURE(jobs[i].what);
        CHECK(failures[i] == "");
    }
}

TEST_CASE("the source a Loss shows carries the knobs it was compiled with") {
    Options options;
    options.inputs = {"p", "t"};
    options.knobs.block_threads = 512;
    options.knobs.items_per_thread = 8;
    options.knobs.accumulator = Accumulator::CompensatedFloat32;
    options.knobs.fast_math = true;
    const auto loss = compile("mean((p - t)^2)", options);
    const std::vector<TensorView> views{TensorView::contiguous(nullptr, {4096, 4096}), TensorView::contiguous(nullptr, {4096, 4096})};
    const std::string source = loss.cuda_source(views);
    CHECK(source.find("// Kernel variant: rows, rank 1, inner strides [1 1], vector 4, unroll 2, 512 threads/block, "
                      "compensated float32 accumulator, fast math.\n") != std::string::npos);
    CHECK_FALSE(loss.kernel_info().has_value());  // no GPU call yet
    // compile_kernel builds with the same NVRTC options (fast math) as a launch would.
    const auto build = loss.compile_kernel(views, "sm_90");
    CHECK(build.key == cache_key(source, "sm_90", true));
}

}  // TEST_SUITE
