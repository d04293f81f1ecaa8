// sweep: axes are read and checked before anything runs, their product is enumerated in a fixed
// order with contradicting combinations marked (not run), a sweep without a GPU fails cleanly, and
// the table and JSON present rows sorted by time with their failures and notes.
#include <doctest/doctest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "lossjit/errors.hpp"
#include "tools/host.hpp"
#include "tools/sweep.hpp"

using namespace lossjit;

TEST_SUITE("sweep") {

TEST_CASE("axes: knob names and aliases, values checked one by one") {
    const std::pair<const char*, SweepAxis> table[] = {
        {"block=128,256,512", {"block", {"128", "256", "512"}}},
        {"threads=64", {"block", {"64"}}},
        {"items=4,8,16,32", {"items", {"4", "8", "16", "32"}}},
        {"acc=float64,kahan,float32", {"acc", {"float64", "kahan", "float32"}}},
        {"fast_math=off,on", {"fast_math", {"off", "on"}}},
        {"bps=auto,2,4", {"blocks_per_sm", {"auto", "2", "4"}}},
        {"vector=1,4,auto", {"vector", {"1", "4", "auto"}}},
    };
    for (const auto& [text, expected] : table) {
        CAPTURE(text);
        const SweepAxis axis = parse_sweep_axis(text);
        CHECK(axis.knob == expected.knob);
        CHECK(axis.values == expected.values);
    }
    const std::pair<const char*, const char*> errors[] = {
        {"block", "expected KNOB=VALUE,VALUE,..."},
        {"=1,2", "expected KNOB=VALUE,VALUE,..."},
        {"block=", "expected KNOB=VALUE,VALUE,..."},
        {"block=128,,256", "an empty value"},
        {"block=128,", "an empty value"},
        {"warps=1,2", "unknown knob 'warps'"},
        {"block=128,100", "threads per block must be a multiple of 32 in [32, 1024], not 100"},
        {"items=0.5", "knob items: '0.5' is not a whole number"},
        {"acc=half", "'half' is not an accumulator"},
        {"blocks_per_sm=64", "blocks per SM must be in [1, 32]"},
    };
    for (const auto& [text, message] : errors) {
        CAPTURE(text);
        CHECK_THROWS_WITH_AS(parse_sweep_axis(text), doctest::Contains(message), UsageError);
    }
}

TEST_CASE("the product: first axis slowest, tuning off, contradictions marked instead of run") {
    Knobs base;
    base.accumulator = Accumulator::CompensatedFloat32;  // a knob every variant shares
    const std::vector<SweepAxis> axes{parse_sweep_axis("block=128,256"), parse_sweep_axis("items=2,8"),
                                      parse_sweep_axis("vector=1,4")};
    const auto variants = expand_sweep(base, axes);
    REQUIRE(variants.size() == 8);
    const char* expected[] = {"block=128 items=2 vector=1", "block=128 items=2 vector=4", "block=128 items=8 vector=1",
                              "block=128 items=8 vector=4", "block=256 items=2 vector=1", "block=256 items=2 vector=4",
                              "block=256 items=8 vector=1", "block=256 items=8 vector=4"};
    for (std::size_t i = 0; i < variants.size(); ++i) {
        CAPTURE(i);
        CHECK(variants[i].label == expected[i]);
        CHECK(variants[i].knobs.accumulator == Accumulator::CompensatedFloat32);
        const bool contradicts = variants[i].label.find("items=2 vector=4") != std::string::npos;
        CHECK(variants[i].error.empty() == !contradicts);
        if (contradicts) CHECK(variants[i].error == "items per thread (2) must be a multiple of the vector width (4)");
    }
    CHECK(variants[3].knobs.block_threads == 128);
    CHECK(variants[3].knobs.items_per_thread == 8);
    CHECK(variants[3].knobs.vector_width == 4);

    const auto alone = expand_sweep(base, {});
    REQUIRE(alone.size() == 1);
    CHECK(alone[0].label == "base");
    CHECK_THROWS_WITH_AS(expand_sweep(base, std::vector<SweepAxis>{parse_sweep_axis("block=64"), parse_sweep_axis("threads=128")}),
                         "two --sweep axes set the knob block", UsageError);
    std::vector<SweepAxis> huge;
    for (const char* knob : {"block=32,64,96,128,160,192,224,256", "items=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16",
                             "blocks_per_sm=1,2,3,4,5,6,7,8,9,10"})
        huge.push_back(parse_sweep_axis(knob));
    CHECK_THROWS_WITH_AS(expand_sweep(base, huge), "the axes make more than 1000 variants", UsageError);

    const auto tune_axes = default_tune_axes();
    CHECK(expand_sweep(Knobs{}, tune_axes).size() == 48);
    // Programs that reduce along rows: threads x items x the row cache x the team x the row cluster.
    const auto row_axes = default_tune_axes(true);
    CHECK(expand_sweep(Knobs{}, row_axes).size() == 96);
    for (const char* knob : {"row_cluster", "row_team", "row_cache"})
        CHECK(std::any_of(row_axes.begin(), row_axes.end(), [&](const SweepAxis& a) { return a.knob == knob; }));
    CHECK(std::none_of(row_axes.begin(), row_axes.end(), [](const SweepAxis& a) { return a.knob == "blocks_per_sm"; }));
}

TEST_CASE("bad requests fail before the GPU is needed; without a GPU the message says so") {
    SweepRequest request;
    request.program = "mean((p - t)^2)";
    request.base.inputs = {"p", "t"};
    request.input_sets = {{generate(parse_generator("64x4:uniform"), 1), generate(parse_generator("64x4:uniform"), 2)}};
    request.axes = {parse_sweep_axis("block=128,256")};

    SweepRequest few_reps = request;
    few_reps.reps = 5;
    CHECK_THROWS_WITH_AS(run_sweep(few_reps), "a sweep times at least 10 intervals per variant, not 5", UsageError);
    SweepRequest one_input = request;
    one_input.input_sets[0].pop_back();
    CHECK_THROWS_WITH_AS(run_sweep(one_input), "the program takes 2 inputs (p, t), but a set has 1", UsageError);
    SweepRequest mismatch = request;
    mismatch.input_sets.push_back({generate(parse_generator("64x4:uniform"), 3), generate(parse_generator("64x5:uniform"), 4)});
    CHECK_THROWS_WITH_AS(run_sweep(mismatch), "'t' has shape 64x5 in one input set and 64x4 in another", UsageError);
    SweepRequest no_broadcast = request;
    no_broadcast.input_sets[0][1] = generate(parse_generator("3:uniform"), 4);
    CHECK_THROWS_AS(run_sweep(no_broadcast), UsageError);
    SweepRequest typo = request;
    typo.program = "mean((p - t)^^2)";
    CHECK_THROWS_AS(run_sweep(typo), SourceError);
    SweepRequest no_sets = request;
    no_sets.input_sets.clear();
    CHECK_THROWS_WITH_AS(run_sweep(no_sets), "a sweep needs at least one set of inputs", UsageError);

    std::string why;
    if (!cuda_available(&why)) {  // on the GPU machine the gpu suite runs real sweeps instead
        CHECK_THROWS_WITH_AS(run_sweep(request), doctest::Contains(doctest::String(("no CUDA device: " + why).c_str())), CudaError);
        CHECK_THROWS_WITH_AS(tune(request, {}), doctest::Contains("no CUDA device"), CudaError);
    }
}

TEST_CASE("the table: sorted by time, defaults marked, notes and failures listed; the JSON says the same") {
    SweepResult r;
    r.program_name = "mse.loss";
    r.kind = "mean";
    r.device = "NVIDIA H100 80GB HBM3 (sm_90)";
    r.target = "sm_90";
    r.shapes = "p=8192x8192 t=8192x8192";
    r.input_sets = 2;
    r.reps = 20;
    r.bytes_per_call = 536870912.0;
    r.roofline_gbps = 3000;
    r.roofline_method = "streaming read: a read-only kernel over 512.0 MiB, the best of 7 launch shapes";
    r.seconds = 3.5;
    auto row = [](const char* knobs, int block, int items, double ms, bool is_default) {
        SweepRow x;
        x.label = knobs;
        x.is_default = is_default;
        x.kernel.knobs.block_threads = block;
        x.kernel.knobs.items_per_thread = items;
        x.kernel.knobs.vector_width = 4;
        x.kernel.knobs.unroll = items / 4;
        x.kernel.knobs.accumulator = Accumulator::Float64;
        x.kernel.knobs.fast_math = false;
        x.kernel.knobs.max_registers = kMaxRegisters;  // no launch bound: "-"
        x.kernel.registers = 40;
        x.kernel.occupancy = 1.0;
        x.kernel.blocks_per_sm = 2048 / block;
        x.ms = ms;
        x.gbps = 536870912.0 / (ms * 1e6);
        x.roofline = x.gbps / 3000;
        x.error = 3.6e-9;
        return x;
    };
    r.rows = {row("block=512 items=16", 512, 16, 0.1790, false), row("default", 256, 32, 0.1801, true),
              row("block=256 items=32", 256, 32, 0.1802, true), row("block=128 items=4", 128, 4, 0.2500, false)};
    r.rows[1].baseline = true;  // the row timed as the defaults; row 2 resolved to the same kernel
    r.rows[3].kernel.knobs.max_registers = 64;  // a bound: registers for 8 blocks of 128
    r.rows[3].kernel.notes = {"vector width 4 was asked for, but the rows of 'p' do not all start 16-byte aligned: vector width 1 is used"};
    SweepRow failed;
    failed.label = "block=1024 items=2 vector=4";
    failed.failure = "items per thread (2) must be a multiple of the vector width (4)";
    r.rows.push_back(failed);

    const std::string table = format_sweep_table(r);
    CAPTURE(table);
    CHECK(table.find("mse.loss (mean) on NVIDIA H100 80GB HBM3 (sm_90): inputs p=8192x8192 t=8192x8192, 512.0 MiB per call\n") == 0);
    CHECK(table.find("4 variants timed of 5; each the median of 20 intervals") != std::string::npos);
    CHECK(table.find("roofline 3000 GB/s (streaming read") != std::string::npos);
    // Compare with runs of spaces as one: the columns' widths follow their contents.
    std::string words;
    for (char c : table)
        if (c != ' ' || (!words.empty() && words.back() != ' ' && words.back() != '\n')) words += c;
    CAPTURE(words);
    CHECK(words.find("\n# block items vector unroll bps cap reg cap acc fast math row cache cluster ms GB/s % roof regs spill B occupancy rel. error\n") != std::string::npos);
    CHECK(words.find("\n1 512 16 4 4 auto - float64 off - - 0.1790 2999 100.0% 40 0 100% (4/SM) 3.60e-09\n") != std::string::npos);
    CHECK(words.find("\n2 256 32 4 8 auto - float64 off - - 0.1801 2981 99.4% 40 0 100% (8/SM) 3.60e-09 default\n") != std::string::npos);
    CHECK(words.find("\n3 256 32 4 8 auto - float64 off - - 0.1802 2979 99.3% 40 0 100% (8/SM) 3.60e-09 = default\n") != std::string::npos);
    CHECK(words.find("\n4 128 4 4 1 auto 64 float64 off - - 0.2500 2147 71.6% 40 0 100% (16/SM) 3.60e-09\n") != std::string::npos);
    CHECK(table.find("notes:\n  #4 (block=128 items=4): vector width 4 was asked for") != std::string::npos);
    CHECK(table.find("not timed:\n  block=1024 items=2 vector=4: items per thread (2) must be") != std::string::npos);

    const auto j = nlohmann::json::parse(sweep_json(r));
    CHECK(j["rows"].size() == 5);
    CHECK(j["rows"][0]["rank"] == 1);
    CHECK(j["rows"][0]["block_threads"] == 512);
    CHECK(j["rows"][1]["default"] == true);
    CHECK(j["rows"][4]["failure"] == failed.failure);
    CHECK(j["rows"][0]["row_cache"].is_null());  // an MSE kernel keeps no row
    CHECK(j["rows"][0]["max_registers"] == kMaxRegisters);
    CHECK(j["rows"][3]["max_registers"] == 64);
    CHECK(j["roofline"]["gbps"] == 3000.0);
    CHECK(j["device"] == r.device);
    CHECK_FALSE(j.contains("tune"));

    TuneResult t;
    t.sweep = r;
    t.bound = 1e-7;
    t.winner = 0;
    t.not_stored = "not asked to (--dry-run)";
    const std::string summary = format_tune_summary(t);
    CHECK(summary.find("tune: 4 of 4 timed variants within the accuracy bound 1e-07") == 0);
    CHECK(summary.find("winner: #1 (block=512 items=16) 0.1790 ms, 2999 GB/s; the defaults 0.1801 ms (1.006x)") != std::string::npos);
    CHECK(summary.find("not stored: not asked to (--dry-run)") != std::string::npos);
    const auto tj = nlohmann::json::parse(sweep_json(t.sweep, &t));
    CHECK(tj["tune"]["winner_rank"] == 1);
    CHECK(tj["tune"]["stored_in"].is_null());

    // A map whose outputs cross 0 (a layer norm): every variant's elementwise error is large, so the
    // bound made of the defaults' would pass anything; the error of the largest output decides too.
    TuneResult m;
    m.sweep = r;
    m.sweep.kind = "map";
    m.sweep.rows.resize(4);
    const double elementwise[] = {3.1, 3.7, 3.7, 0.9}, of_largest[] = {4e-3, 1.2e-7, 1.2e-7, 9e-8};
    for (std::size_t i = 0; i < 4; ++i) {
        m.sweep.rows[i].error = elementwise[i];
        m.sweep.rows[i].error_of_largest = of_largest[i];
    }
    m.bound = 3.7;
    m.bound_of_largest = 1.2e-7;
    CHECK_FALSE(qualifies(m.sweep.rows[0], m));  // fastest, but 4e-3 of the largest output off
    CHECK(qualifies(m.sweep.rows[1], m));
    CHECK(qualifies(m.sweep.rows[3], m));
    const std::string map_summary = format_tune_summary(m);
    CHECK(map_summary.find("tune: 3 of 4 timed variants within the accuracy bound 3.7") == 0);
    CHECK(map_summary.find("and within 1.2e-07 of the largest output") != std::string::npos);
    std::string map_words;
    for (char c : format_sweep_table(m.sweep))
        if (c != ' ' || (!map_words.empty() && map_words.back() != ' ' && map_words.back() != '\n')) map_words += c;
    CHECK(map_words.find("occupancy rel. error of largest\n") != std::string::npos);
    CHECK(map_words.find("3.10e+00 4.00e-03\n") != std::string::npos);
    CHECK(nlohmann::json::parse(sweep_json(m.sweep, &m))["rows"][0]["error_of_largest"] == 4e-3);
}

}  // TEST_SUITE
