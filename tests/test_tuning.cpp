// tuning: the store of `lossjit tune`'s winners. Keys tell programs, shapes and GPUs apart; records
// survive a round trip through the file; a damaged file or record is ignored with a warning, never
// fatal; writes are atomic and concurrent writers both land; knobs a caller set beat stored ones.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "pipeline.hpp"
#include "tuning/knobs.hpp"
#include "tuning/store.hpp"
#include "support.hpp"

using namespace lossjit;
namespace fs = std::filesystem;

namespace {

struct TempDir : lossjit_test::TempDir {
    TempDir() : lossjit_test::TempDir("lossjit-tuning") {}
};

TuningRecord record(const std::string& shapes, int block = 512) {
    TuningRecord r;
    r.key = {"inputs: p, t\nreduction: mean\nbody: (p - t) ^ 2\n", shapes, "float32", "NVIDIA H100 80GB HBM3 (sm_90)"};
    r.knobs.block_threads = block;
    r.knobs.items_per_thread = 16;
    r.knobs.vector_width = 4;
    r.knobs.max_blocks_per_sm = 4;
    r.knobs.accumulator = Accumulator::CompensatedFloat32;
    r.knobs.fast_math = false;
    r.ms = 0.171;
    r.default_ms = 0.175;
    r.rel_error = 3.6e-9;
    r.variants = 48;
    r.lossjit = "0.1.0";
    r.nvrtc = "13.0";
    r.when = "2026-11-22T10:00:00Z";
    return r;
}

void write(const fs::path& file, const std::string& text) { std::ofstream(file, std::ios::binary) << text; }

std::string read(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_SUITE("tuning") {

TEST_CASE("keys: the program without parameter values, the shapes with strides, the GPU") {
    auto program = [](const std::string& text) { return tuning_program_text(check(parse(text, "expr"), {})); };
    // Layout and parameter defaults do not matter; the program does.
    CHECK(program("param b = 1; mean(b * (p - t)^2)") == program("param b = 7;\nmean( b*(p-t)^2 )  # comment"));
    CHECK(program("mean((p - t)^2)") != program("sum((p - t)^2)"));
    CHECK(program("mean((p - t)^2)").find("body: (p - t) ^ 2") != std::string::npos);

    const std::vector<std::string> names{"p", "t"};
    const std::pair<std::vector<TensorView>, const char*> shapes[] = {
        {{TensorView::contiguous(nullptr, {8192, 8192}), TensorView::contiguous(nullptr, {8192, 8192})}, "p=8192x8192 t=8192x8192"},
        {{TensorView::contiguous(nullptr, {32768, 32768}), TensorView::contiguous(nullptr, {32768})}, "p=32768x32768 t=32768"},
        {{TensorView{nullptr, DType::float32, {64, 32}, {1, 64}}, TensorView::contiguous(nullptr, {64, 32})}, "p=64x32@1,64 t=64x32"},
        {{TensorView{nullptr, DType::float32, {64, 32}, {32, 1}}, TensorView::contiguous(nullptr, {})}, "p=64x32 t=scalar"},
    };
    for (const auto& [views, expected] : shapes) CHECK(tuning_shape_text(names, views, nullptr) == expected);
    const OutputView strided_out{nullptr, DType::float32, {4, 4}, {1, 4}};
    const std::vector<TensorView> one{TensorView::contiguous(nullptr, {4, 4})};
    CHECK(tuning_shape_text(std::vector<std::string>{"x"}, one, &strided_out) == "x=4x4 output=4x4@1,4");

    const TuningKey a = record("p=8x8 t=8x8").key;
    TuningKey b = a;
    CHECK(a.id() == b.id());
    CHECK(a.id().size() == 16);
    b.device = "NVIDIA H200 (sm_90)";
    CHECK(a.id() != b.id());
    b = a;
    b.shapes = "p=8x8 t=8";
    CHECK(a.id() != b.id());
}

TEST_CASE("round trip: a record written is read back, by this store and by a new one (a new process)") {
    TempDir dir;
    const fs::path file = dir.path / "sub" / "tuning.json";
    TuningStore store(file, true);
    CHECK_FALSE(store.find(record("p=8x8 t=8x8").key));  // no file yet: nothing, and no warning
    store.put(record("p=8x8 t=8x8"));
    store.put(record("p=16x16 t=16x16", 128));
    store.put(record("p=8x8 t=8x8", 1024));  // replaces the first
    CHECK(fs::exists(file));
    for (const auto& entry : fs::directory_iterator(file.parent_path()))  // no temporary file left behind
        CHECK(entry.path().filename().string().find(".tmp.") == std::string::npos);

    TuningStore later(file, false);
    std::string warning;
    const auto found = later.find(record("p=8x8 t=8x8").key, &warning);
    CHECK(warning == "");
    REQUIRE(found);
    const TuningRecord expected = record("p=8x8 t=8x8", 1024);
    CHECK(found->knobs == expected.knobs);
    CHECK(found->key == expected.key);
    CHECK(found->ms == expected.ms);
    CHECK(found->default_ms == expected.default_ms);
    CHECK(found->rel_error == expected.rel_error);
    CHECK(found->variants == 48);
    CHECK(found->when == expected.when);
    CHECK(later.find(record("p=16x16 t=16x16").key)->knobs.block_threads == 128);
    CHECK(later.has_program(expected.key.program, "p=16x16 t=16x16"));
    CHECK_FALSE(later.has_program(expected.key.program, "p=32x32 t=32x32"));
    CHECK_FALSE(later.find(record("p=32x32 t=32x32").key));
    // Read-only (LOSSJIT_CACHE=read): reads, never writes.
    CHECK_THROWS_WITH_AS(later.put(record("p=1 t=1")), doctest::Contains("read-only here (LOSSJIT_CACHE=read)"), UsageError);
    CHECK(read(file).find("\"format\": 1") != std::string::npos);
}

TEST_CASE("a file written before knobs had one type is read as it was") {
    // Byte for byte the format-1 record that earlier versions wrote: the file format did not change.
    TempDir dir;
    const fs::path file = dir.path / "tuning.json";
    const TuningRecord expected = record("p=8x8 t=8x8");
    write(file, fmt::format(R"json({{
  "about": "lossjit tune's winners per program, input shapes, dtype and GPU (docs/tuning.md)",
  "format": 1,
  "records": {{
    "{}": {{
      "default_ms": 0.175,
      "device": "NVIDIA H100 80GB HBM3 (sm_90)",
      "dtype": "float32",
      "knobs": {{
        "accumulator": "compensated",
        "block_threads": 512,
        "fast_math": false,
        "items_per_thread": 16,
        "max_blocks_per_sm": 4,
        "vector_width": 4
      }},
      "lossjit": "0.1.0",
      "ms": 0.171,
      "nvrtc": "13.0",
      "program": "inputs: p, t\nreduction: mean\nbody: (p - t) ^ 2\n",
      "rel_error": 3.6e-09,
      "shapes": "p=8x8 t=8x8",
      "variants": 48,
      "when": "2026-11-22T10:00:00Z"
    }}
  }}
}}
)json", expected.key.id()));
    TuningStore store(file, false);
    std::string warning;
    const auto found = store.find(expected.key, &warning);
    CHECK(warning == "");
    REQUIRE(found);
    CHECK(found->knobs == expected.knobs);
    CHECK(found->knobs.unroll == 0);  // items carry it
    // And what this version writes is that format still.
    TuningStore rewritten(dir.path / "again.json", true);
    rewritten.put(expected);
    CHECK(read(dir.path / "again.json") == read(file));
}

TEST_CASE("a damaged file is ignored with one warning, never fatal; the next tune replaces it") {
    TempDir dir;
    const fs::path file = dir.path / "tuning.json";
    const std::pair<std::string, const char*> table[] = {
        {"{ not json", "is not valid JSON"},
        {"", "is not valid JSON"},
        {"[1, 2, 3]", "is not a format-1 tuning file"},
        {R"({"format": 2, "records": {}})", "is not a format-1 tuning file"},
        {R"({"format": 1})", "is not a format-1 tuning file"},
    };
    for (const auto& [text, message] : table) {
        CAPTURE(text);
        write(file, text);
        TuningStore store(file, true);
        std::string warning;
        CHECK_FALSE(store.find(record("p=8x8 t=8x8").key, &warning));
        CHECK(warning.find(file.string()) != std::string::npos);
        CHECK(warning.find(message) != std::string::npos);
        std::string again;
        CHECK_FALSE(store.find(record("p=8x8 t=8x8").key, &again));
        CHECK(again == "");  // once per store
        store.put(record("p=8x8 t=8x8"));
        CHECK(TuningStore(file, false).find(record("p=8x8 t=8x8").key));
    }
}

TEST_CASE("a bad record is ignored with a warning naming it; the others are used") {
    TempDir dir;
    const fs::path file = dir.path / "tuning.json";
    TuningStore(file, true).put(record("p=8x8 t=8x8"));
    TuningStore(file, true).put(record("p=16x16 t=16x16"));
    const std::string good_id = record("p=8x8 t=8x8").key.id();
    const std::string bad_id = record("p=16x16 t=16x16").key.id();
    const std::pair<std::pair<std::string, std::string>, const char*> damage[] = {
        {{"\"block_threads\": 512", "\"block_threads\": 100"}, "threads per block must be a multiple of 32"},
        {{"\"accumulator\": \"compensated\"", "\"accumulator\": \"float16\""}, "the accumulator is not"},
        {{"\"vector_width\": 4", "\"vector_width\": \"four\""}, "type must be number"},
        {{"\"shapes\": \"p=16x16 t=16x16\"", "\"shapes\": \"p=17x17 t=17x17\""}, "its id does not match its key"},
    };
    const std::string original = read(file);
    for (const auto& [edit, message] : damage) {
        CAPTURE(message);
        // Damage only the second record (the file lists records by id, so find it by id).
        std::string text = original;
        const auto at = text.find("\"" + bad_id + "\"");
        REQUIRE(at != std::string::npos);
        const auto field = text.find(edit.first, at);
        REQUIRE(field != std::string::npos);
        text.replace(field, edit.first.size(), edit.second);
        write(file, text);
        TuningStore store(file, true);
        std::string warning;
        CHECK(store.find(record("p=8x8 t=8x8").key, &warning));
        CHECK(warning.find("ignored record " + bad_id) != std::string::npos);
        CHECK(warning.find(message) != std::string::npos);
        CHECK(warning.find(good_id) == std::string::npos);
    }
}

TEST_CASE("a writer's stale temporary files are cleaned, fresh ones left to their writer") {
    TempDir dir;
    const fs::path file = dir.path / "tuning.json";
    const fs::path stale = dir.path / "tuning.json.tmp.1.0badf00d", fresh = dir.path / "tuning.json.tmp.2.0badf00d";
    write(stale, "{");
    write(fresh, "{");
    fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));
    TuningStore(file, true).put(record("p=8x8 t=8x8"));
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(fresh));
}

TEST_CASE("concurrent tuners both land their records") {
    TempDir dir;
    const fs::path file = dir.path / "tuning.json";
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            TuningStore store(file, true);  // a store per thread: as separate processes would have
            for (int i = 0; i < 10; ++i) store.put(record(fmt::format("p={} t={}", t, i)));
        });
    }
    for (auto& t : threads) t.join();
    TuningStore reader(file, false);
    for (int t = 0; t < 4; ++t)
        for (int i = 0; i < 10; ++i) CHECK(reader.find(record(fmt::format("p={} t={}", t, i)).key));
}

TEST_CASE("stored knobs fill only the knobs left automatic") {
    const Knobs stored = record("").knobs;
    Knobs automatic;
    CHECK(apply_tuned(automatic, stored));
    CHECK(automatic.block_threads == 512);
    CHECK(automatic.items_per_thread == 16);
    CHECK(automatic.vector_width == 4);
    CHECK(automatic.max_blocks_per_sm == 4);
    CHECK(automatic.accumulator == Accumulator::CompensatedFloat32);
    CHECK(automatic.fast_math == false);

    Knobs mine;
    mine.block_threads = 128;
    mine.unroll = 2;
    mine.accumulator = Accumulator::Float64;
    CHECK(apply_tuned(mine, stored));  // vector width, blocks per SM and fast math were automatic
    CHECK(mine.block_threads == 128);
    CHECK(mine.unroll == 2);
    CHECK(mine.items_per_thread == 0);
    CHECK(mine.accumulator == Accumulator::Float64);
    CHECK(mine.max_blocks_per_sm == 4);

    Knobs odd_items;  // vector 4 cannot make up 6 items: the vector width stays automatic
    odd_items.items_per_thread = 6;
    apply_tuned(odd_items, stored);
    CHECK(odd_items.vector_width == 0);

    Knobs all;
    all.block_threads = 256;
    all.unroll = 8;
    all.vector_width = 1;
    all.max_blocks_per_sm = 2;
    all.accumulator = Accumulator::Float32;
    all.fast_math = true;
    CHECK_FALSE(apply_tuned(all, stored));  // nothing automatic: not tuned

    CHECK(describe(stored) == "block 512, items 16, vector 4, blocks_per_sm 4, acc compensated, fast_math off");

    // The row cache: a record that has it gives it; one without it (from before the knob, or of a
    // kernel that keeps no row) was timed without one, and replays its other knobs without one;
    // where it gives nothing else, it leaves the knob automatic and the call untuned.
    Knobs cached_record = stored;
    cached_record.row_cache = true;
    Knobs takes_cache;
    CHECK(apply_tuned(takes_cache, cached_record));
    CHECK(takes_cache.row_cache == true);
    Knobs old_record;
    CHECK(apply_tuned(old_record, stored));
    CHECK(old_record.row_cache == false);
    Knobs all_but_cache = all;
    CHECK_FALSE(apply_tuned(all_but_cache, stored));
    CHECK_FALSE(all_but_cache.row_cache.has_value());
    CHECK(apply_tuned(all_but_cache, cached_record));
    CHECK(all_but_cache.row_cache == true);
    Knobs mine_cache;
    mine_cache.row_cache = false;
    apply_tuned(mine_cache, cached_record);
    CHECK(mine_cache.row_cache == false);  // set knobs win

    // The row cluster alike: a record's cluster is replayed (alone where everything else is set); a
    // record without one was timed with a block a row.
    Knobs clustered_record = cached_record;
    clustered_record.row_cluster = 2;
    Knobs takes_cluster;
    CHECK(apply_tuned(takes_cluster, clustered_record));
    CHECK(takes_cluster.row_cluster == 2);
    Knobs before_clusters;
    CHECK(apply_tuned(before_clusters, cached_record));
    CHECK(before_clusters.row_cluster == 1);
    Knobs all_but_cluster = all;
    all_but_cluster.row_cache = true;
    CHECK_FALSE(apply_tuned(all_but_cluster, cached_record));
    CHECK(all_but_cluster.row_cluster == 0);
    CHECK(apply_tuned(all_but_cluster, clustered_record));
    CHECK(all_but_cluster.row_cluster == 2);
    Knobs mine_cluster;
    mine_cluster.row_cluster = 4;
    apply_tuned(mine_cluster, clustered_record);
    CHECK(mine_cluster.row_cluster == 4);

    // The row team: a record's is replayed (alone too); a record from before the knob leaves it
    // automatic (its block size decides, as it did); a set knob wins.
    Knobs teamed_record = cached_record;
    teamed_record.row_team = RowTeam::Block;
    Knobs takes_team;
    CHECK(apply_tuned(takes_team, teamed_record));
    CHECK(takes_team.row_team == RowTeam::Block);
    Knobs before_teams;
    CHECK(apply_tuned(before_teams, cached_record));
    CHECK(before_teams.row_team == RowTeam::Auto);
    Knobs all_but_team = all_but_cluster;
    all_but_team.row_cluster = 1;
    CHECK(apply_tuned(all_but_team, teamed_record));
    CHECK(all_but_team.row_team == RowTeam::Block);
    Knobs mine_team;
    mine_team.row_team = RowTeam::Warp;
    apply_tuned(mine_team, teamed_record);
    CHECK(mine_team.row_team == RowTeam::Warp);

    // The row prefetch as the cache: a record's is replayed; a record from before the knob was timed
    // without it; a set knob wins.
    Knobs prefetched_record = teamed_record;
    prefetched_record.row_prefetch = true;
    Knobs takes_prefetch;
    CHECK(apply_tuned(takes_prefetch, prefetched_record));
    CHECK(takes_prefetch.row_prefetch == true);
    Knobs before_prefetch;
    CHECK(apply_tuned(before_prefetch, teamed_record));
    CHECK(before_prefetch.row_prefetch == false);
    Knobs mine_prefetch;
    mine_prefetch.row_prefetch = false;
    apply_tuned(mine_prefetch, prefetched_record);
    CHECK(mine_prefetch.row_prefetch == false);

    // The register bound: a record's is replayed (255: none); a record from before the knob leaves it
    // automatic, the defaults bounding the kernel as they did; a set knob wins.
    Knobs bounded_record = prefetched_record;
    bounded_record.max_registers = 255;
    Knobs takes_bound;
    CHECK(apply_tuned(takes_bound, bounded_record));
    CHECK(takes_bound.max_registers == 255);
    Knobs before_bound;
    CHECK(apply_tuned(before_bound, prefetched_record));
    CHECK(before_bound.max_registers == 0);
    Knobs mine_bound;
    mine_bound.max_registers = 64;
    apply_tuned(mine_bound, bounded_record);
    CHECK(mine_bound.max_registers == 64);
}

TEST_CASE("a record's register bound, row cache, row cluster, row prefetch and row team are written where known and read back") {
    TempDir dir;
    TuningRecord with = record("p=8x8 t=8x8");
    with.knobs.max_registers = 64;
    with.knobs.row_cache = false;  // off is a choice too, not "automatic"
    with.knobs.row_cluster = 1;
    with.knobs.row_prefetch = false;
    with.knobs.row_team = RowTeam::Block;
    TuningStore store(dir.path / "tuning.json", true);
    store.put(with);
    CHECK(read(dir.path / "tuning.json").find("\"row_cache\": false") != std::string::npos);
    CHECK(read(dir.path / "tuning.json").find("\"row_cluster\": 1") != std::string::npos);
    CHECK(read(dir.path / "tuning.json").find("\"row_team\": \"block\"") != std::string::npos);
    CHECK(read(dir.path / "tuning.json").find("\"row_prefetch\": false") != std::string::npos);
    CHECK(read(dir.path / "tuning.json").find("\"max_registers\": 64") != std::string::npos);
    TuningStore reader(dir.path / "tuning.json", false);
    const auto found = reader.find(with.key);
    REQUIRE(found);
    CHECK(found->knobs == with.knobs);
}

TEST_CASE("the store follows the kernel cache's settings") {
    TempDir dir;
    CacheSettings settings;
    settings.directory = dir.path;
    settings.disk = CacheSettings::Mode::Off;
    CHECK(TuningStore::for_settings(settings) == nullptr);  // LOSSJIT_CACHE=off: no store at all
    settings.disk = CacheSettings::Mode::Read;
    auto read_only = TuningStore::for_settings(settings);
    REQUIRE(read_only);
    CHECK_FALSE(read_only->writable());
    CHECK(read_only->file() == dir.path / "tuning.json");
    settings.disk = CacheSettings::Mode::ReadWrite;
    CHECK(TuningStore::for_settings(settings)->writable());
    settings.directory.clear();
    CHECK(TuningStore::for_settings(settings) == nullptr);
}

}  // TEST_SUITE
