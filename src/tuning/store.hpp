// tuning: the store of `lossjit tune`'s winners, a JSON file next to the kernel cache entries
// (tuning.json in the cache directory). Compiles whose knobs are automatic look here first, per
// (program, input shapes, dtype, GPU). docs/tuning.md describes the file and the rules.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "jit/cache.hpp"
#include "lossjit/lossjit.hpp"
#include "ir/program.hpp"

namespace lossjit {

// What a tuning record is filed under.
struct TuningKey {
    std::string program;  // canonical text: the checked program (parameter defaults left out)
    std::string shapes;   // "p=8192x8192 t=8192x8192"; strides where not contiguous: "p=64x32@1,64"
    std::string dtype = "float32";
    std::string device;   // "NVIDIA H100 80GB HBM3 (sm_90)"
    std::string id() const;  // 16 hex digits: XXH3-64 over the four fields
    bool operator==(const TuningKey&) const = default;
};

// The program's part of the key. Parameter values are left out: they are kernel arguments, not code.
std::string tuning_program_text(const ir::Program& program);
// The shapes' part: every input (and a map's output, where it is not contiguous) in program order.
std::string tuning_shape_text(std::span<const std::string> names, std::span<const TensorView> inputs,
                              const OutputView* output);
// The dtypes' part: "float32" when every input is float32 (what records written before other dtypes
// existed say), else each input's dtype, in program order ("bfloat16,int64"). A map's output dtype
// is added where it is not the default one (output_dtype).
std::string tuning_dtype_text(std::span<const TensorView> inputs, const OutputView* output = nullptr,
                              DType default_output = DType::float32);
// "NAME (sm_XY)" of a CUDA device, from the driver without creating a context. Throws CudaError.
std::string tuning_device_text(int ordinal);

struct TuningRecord {
    TuningKey key;
    Knobs knobs;            // resolved, as knobs.hpp says of a tuning record
    double ms = 0;          // the winner's median time
    double default_ms = 0;  // the default knobs' median time in the same run
    double rel_error = 0;   // the winner's error against the float64 reference (largest over the input sets)
    int variants = 0;       // how many variants the run timed
    std::string lossjit, nvrtc, when;  // versions and UTC time of the run, for people reading the file
};

class TuningStore {
public:
    TuningStore(std::filesystem::path file, bool writable);
    // The store beside the process's kernel cache (KernelCache::process()), or nullptr when the
    // cache is off (LOSSJIT_CACHE=off) or has no directory: then nothing is read or written.
    static TuningStore* process();
    // The same for given settings (tests, tools): nullptr when the disk cache is off; read-only in `read` mode.
    static std::unique_ptr<TuningStore> for_settings(const CacheSettings& settings);

    // The record for `key`, reading the file on first use. A file that cannot be parsed, or a
    // record that does not make sense, is ignored: `warning` (if given) then says so, once per store.
    std::optional<TuningRecord> find(const TuningKey& key, std::string* warning = nullptr);
    // Whether any record has this program and these shapes (on any GPU): lets a caller skip asking
    // the driver which GPU it has when the answer cannot matter.
    bool has_program(const std::string& program, const std::string& shapes);
    // Adds or replaces the record for its key: the file is re-read under a lock (tuning.json.lock),
    // written to a temporary file and renamed over, so readers see the old or the new file whole.
    // Throws Error when the store is read-only (LOSSJIT_CACHE=read) or the file cannot be written.
    void put(const TuningRecord& record);

    const std::filesystem::path& file() const { return file_; }
    bool writable() const { return writable_; }

private:
    void load_locked();

    std::filesystem::path file_;
    bool writable_;
    std::mutex mutex_;
    bool loaded_ = false;
    std::string warning_;  // from loading; handed out once
    std::map<std::string, TuningRecord> records_;  // by key id
};

}  // namespace lossjit
