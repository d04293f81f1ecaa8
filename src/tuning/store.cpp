#include "tuning/store.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "jit/cache.hpp"
#include "cuda/driver.hpp"
#include "tuning/knobs.hpp"
#include "lossjit/errors.hpp"
#include "pipeline.hpp"
#include "util/atomic_file.hpp"

namespace lossjit {
namespace {

using json = nlohmann::json;
constexpr int kFormat = 1;

// Strides given that are not the row-major ones.
bool strided(const Dims& shape, const Dims& strides) {
    return !strides.empty() && !(strides == contiguous_strides(shape));
}

std::string shape_text(const Dims& shape, const Dims& strides) {
    std::string text = format_shape(shape);
    if (strided(shape, strides)) text += fmt::format("@{}", fmt::join(strides, ","));
    return text;
}

json to_json(const TuningRecord& r) {
    json j{{"program", r.key.program},
                {"shapes", r.key.shapes},
                {"dtype", r.key.dtype},
                {"device", r.key.device},
                {"knobs",
                 {{"block_threads", r.knobs.block_threads},
                  {"items_per_thread", r.knobs.items_per_thread},
                  {"vector_width", r.knobs.vector_width},
                  {"max_blocks_per_sm", r.knobs.max_blocks_per_sm},
                  {"accumulator", std::string(to_string(r.knobs.accumulator))},
                  {"fast_math", r.knobs.fast_math.value_or(false)}}},
                {"ms", r.ms},
                {"default_ms", r.default_ms},
                {"rel_error", r.rel_error},
                {"variants", r.variants},
                {"lossjit", r.lossjit},
                {"nvrtc", r.nvrtc},
                {"when", r.when}};
    // Written only where known: a record from before the knob reads and writes back as it was.
    if (r.knobs.max_registers > 0) j["knobs"]["max_registers"] = r.knobs.max_registers;
    if (r.knobs.row_cache) j["knobs"]["row_cache"] = *r.knobs.row_cache;
    if (r.knobs.row_cluster > 0) j["knobs"]["row_cluster"] = r.knobs.row_cluster;
    if (r.knobs.row_prefetch) j["knobs"]["row_prefetch"] = *r.knobs.row_prefetch;
    if (r.knobs.row_team != RowTeam::Auto) j["knobs"]["row_team"] = to_string(r.knobs.row_team);
    return j;
}

// Throws (json's exceptions or UsageError) for a record that does not make sense.
TuningRecord from_json(const json& j) {
    TuningRecord r;
    r.key.program = j.at("program").get<std::string>();
    r.key.shapes = j.at("shapes").get<std::string>();
    r.key.dtype = j.at("dtype").get<std::string>();
    r.key.device = j.at("device").get<std::string>();
    const json& k = j.at("knobs");
    r.knobs.block_threads = k.at("block_threads").get<int>();
    r.knobs.items_per_thread = k.at("items_per_thread").get<int>();
    r.knobs.vector_width = k.at("vector_width").get<int>();
    r.knobs.max_blocks_per_sm = k.at("max_blocks_per_sm").get<int>();
    const auto acc = parse_accumulator(k.at("accumulator").get<std::string>());
    if (!acc || *acc == Accumulator::Auto) throw UsageError("the accumulator is not float64, float32 or compensated");
    r.knobs.accumulator = *acc;
    r.knobs.fast_math = k.at("fast_math").get<bool>();
    if (k.contains("row_cache") && !k.at("row_cache").is_null()) r.knobs.row_cache = k.at("row_cache").get<bool>();
    if (k.contains("max_registers")) r.knobs.max_registers = k.at("max_registers").get<int>();
    if (k.contains("row_cluster")) r.knobs.row_cluster = k.at("row_cluster").get<int>();
    if (k.contains("row_prefetch") && !k.at("row_prefetch").is_null()) r.knobs.row_prefetch = k.at("row_prefetch").get<bool>();
    if (k.contains("row_team")) apply_knob(r.knobs, "row_team", k.at("row_team").get<std::string>());
    if (r.knobs.block_threads == 0) throw UsageError("threads per block are 0");
    Knobs applied;  // the same rules as the knobs a caller sets, on what the record would set
    apply_tuned(applied, r.knobs);
    validate_knobs(applied);
    r.ms = j.value("ms", 0.0);
    r.default_ms = j.value("default_ms", 0.0);
    r.rel_error = j.value("rel_error", 0.0);
    r.variants = j.value("variants", 0);
    r.lossjit = j.value("lossjit", "");
    r.nvrtc = j.value("nvrtc", "");
    r.when = j.value("when", "");
    return r;
}

// Parses the file's text into records; `warning` says what was ignored.
std::map<std::string, TuningRecord> parse_store(const std::string& text, const std::filesystem::path& file,
                                                std::string& warning) {
    std::map<std::string, TuningRecord> records;
    json doc;
    try {
        doc = json::parse(text);
    } catch (const json::exception& e) {
        warning = fmt::format("the tuning store {} is not valid JSON ({}); it is ignored", file.string(), e.what());
        return records;
    }
    if (!doc.is_object() || doc.value("format", 0) != kFormat || !doc.contains("records") || !doc["records"].is_object()) {
        warning = fmt::format("the tuning store {} is not a format-{} tuning file; it is ignored", file.string(), kFormat);
        return records;
    }
    std::vector<std::string> bad;
    for (const auto& [id, value] : doc["records"].items()) {
        try {
            TuningRecord r = from_json(value);
            if (r.key.id() != id) throw UsageError("its id does not match its key");
            records.emplace(id, std::move(r));
        } catch (const std::exception& e) {
            bad.push_back(fmt::format("{} ({})", id, e.what()));
        }
    }
    if (!bad.empty())
        warning = fmt::format("the tuning store {}: ignored record{} {}", file.string(), bad.size() == 1 ? "" : "s",
                              fmt::join(bad, "; "));
    return records;
}

bool read_text(const std::filesystem::path& file, std::string& text) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return false;
    std::stringstream s;
    s << in.rdbuf();
    text = s.str();
    return true;
}

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

std::string TuningKey::id() const {
    XXH3_state_t* state = XXH3_createState();
    if (!state) throw std::bad_alloc();
    XXH3_64bits_reset(state);
    for (const std::string* field : {&program, &shapes, &dtype, &device}) {
        const std::uint64_t length = field->size();  // length-prefixed: fields cannot run into each other
        XXH3_64bits_update(state, &length, sizeof length);
        XXH3_64bits_update(state, field->data(), field->size());
    }
    const auto hash = XXH3_64bits_digest(state);
    XXH3_freeState(state);
    return fmt::format("{:016x}", hash);
}

std::string tuning_program_text(const ir::Program& program) {
    ir::Program copy = program;
    for (auto& p : copy.params) p.default_value = 0.0;
    return dump_checked(copy);
}

std::string tuning_shape_text(std::span<const std::string> names, std::span<const TensorView> inputs,
                              const OutputView* output) {
    std::vector<std::string> parts;
    for (std::size_t k = 0; k < inputs.size(); ++k)
        parts.push_back(fmt::format("{}={}", k < names.size() ? names[k] : "?", shape_text(inputs[k].shape, inputs[k].strides)));
    if (output && strided(output->shape, output->strides))
        parts.push_back(fmt::format("output={}", shape_text(output->shape, output->strides)));
    return fmt::format("{}", fmt::join(parts, " "));
}

std::string tuning_dtype_text(std::span<const TensorView> inputs, const OutputView* output, DType default_output) {
    bool all_float32 = true;
    std::vector<std::string_view> names;
    for (const auto& v : inputs) {
        names.push_back(to_string(v.dtype));
        all_float32 = all_float32 && v.dtype == DType::float32;
    }
    std::string text = all_float32 ? std::string("float32") : fmt::format("{}", fmt::join(names, ","));
    if (output && output->dtype != default_output) text += fmt::format(" -> {}", to_string(output->dtype));
    return text;
}

std::string tuning_device_text(int ordinal) {
    CUdevice device = 0;
    LOSSJIT_CU(cuDeviceGet(&device, ordinal));
    char name[256] = {};
    LOSSJIT_CU(cuDeviceGetName(name, sizeof name, device));
    const int major = cuda::attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    const int minor = cuda::attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    return fmt::format("{} (sm_{}{})", name, major, minor);
}

TuningStore::TuningStore(std::filesystem::path file, bool writable) : file_(std::move(file)), writable_(writable) {}

std::unique_ptr<TuningStore> TuningStore::for_settings(const CacheSettings& settings) {
    if (settings.disk == CacheSettings::Mode::Off || settings.directory.empty()) return nullptr;
    return std::make_unique<TuningStore>(settings.directory / "tuning.json",
                                         settings.disk == CacheSettings::Mode::ReadWrite);
}

TuningStore* TuningStore::process() {
    static const std::unique_ptr<TuningStore> store = for_settings(KernelCache::process().settings());
    return store.get();
}

void TuningStore::load_locked() {
    if (loaded_) return;
    loaded_ = true;
    std::string text;
    if (!read_text(file_, text)) return;  // no file yet: no records
    records_ = parse_store(text, file_, warning_);
}

std::optional<TuningRecord> TuningStore::find(const TuningKey& key, std::string* warning) {
    std::lock_guard lock(mutex_);
    load_locked();
    if (warning && !warning_.empty()) *warning = std::exchange(warning_, std::string());
    const auto it = records_.find(key.id());
    if (it == records_.end() || !(it->second.key == key)) return std::nullopt;
    return it->second;
}

bool TuningStore::has_program(const std::string& program, const std::string& shapes) {
    std::lock_guard lock(mutex_);
    load_locked();
    for (const auto& [id, r] : records_)
        if (r.key.program == program && r.key.shapes == shapes) return true;
    return false;
}

void TuningStore::put(const TuningRecord& record) {
    if (!writable_)
        throw UsageError(fmt::format("the tuning store {} is read-only here (LOSSJIT_CACHE=read)", file_.string()));
    std::lock_guard lock(mutex_);
    const auto fail = [&](const std::string& what) {
        return Error(fmt::format("could not write the tuning store {}: {} ({})", file_.string(), what,
                                 std::strerror(errno)));
    };
    std::error_code ec;
    std::filesystem::create_directories(file_.parent_path(), ec);

    // Read-modify-write under an exclusive lock, so that two tuners at once both land their record.
    Fd lock_file{::open((file_.string() + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)};
    if (lock_file.fd < 0) throw fail("cannot create its lock file");
    while (::flock(lock_file.fd, LOCK_EX) != 0)
        if (errno != EINTR) throw fail("cannot lock it");

    std::string text, ignored;
    std::map<std::string, TuningRecord> records;
    if (read_text(file_, text)) records = parse_store(text, file_, ignored);  // a damaged file is replaced
    records[record.key.id()] = record;

    json doc{{"format", kFormat},
             {"about", "lossjit tune's winners per program, input shapes, dtype and GPU (docs/tuning.md)"},
             {"records", json::object()}};
    for (const auto& [id, r] : records) doc["records"][id] = to_json(r);
    const std::string out = doc.dump(2) + "\n";

    const util::WriteOutcome written = util::try_write_file_atomically(file_, {out});
    if (!written.ok())
        throw Error(fmt::format("could not write the tuning store {}: {}", file_.string(), util::describe(written)));
    records_ = std::move(records);
    loaded_ = true;
    // Temporary files of writers that died mid-write (the kernel cache's rule: over an hour old).
    const std::string prefix = file_.filename().string() + ".tmp.";
    const auto stale_before = std::filesystem::file_time_type::clock::now() - kStaleTempAge;
    for (std::filesystem::directory_iterator it(file_.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code stat_ec;
        if (it->path().filename().string().rfind(prefix, 0) == 0 && it->last_write_time(stat_ec) < stale_before && !stat_ec)
            std::filesystem::remove(it->path(), stat_ec);
    }
}

}  // namespace lossjit
