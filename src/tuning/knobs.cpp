#include "tuning/knobs.hpp"

#include <algorithm>
#include <charconv>
#include <vector>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "pipeline.hpp"

namespace lossjit {
namespace {

// The ranges come from knobs.hpp's constants, as validate_knobs checks them.
const std::vector<KnobHelp>& knobs() {
    static const std::vector<KnobHelp> table{
        {"block", fmt::format("threads per block: a multiple of {} in [{}, {}]; default 256, 512 for reductions over "
                              "16-bit inputs or with logs (KL), 128 for maps, 1024 for small fused gradient kernels "
                              "(512 when summing over rows, and along rows except on an H100); by rows with a row cache 512 "
                              "(on an H200 fewer where their warps then keep whole rows), 1024 for a fused gradient kernel with exp or log whose block the cache leaves alone on "
                              "its SM; per GPU in src/codegen/kinds/defaults.cpp",
                              kWarpThreads, kWarpThreads, kMaxBlockThreads)},
        {"items", fmt::format("elements per thread per tile = unroll x vector width, [1, {}]; default per layout",
                              kMaxItemsPerThread)},
        {"unroll", fmt::format("tiles of vector loads per thread, [1, {}]; default per layout", kMaxUnroll)},
        {"vector", "elements per access: 1, 4 or 8 (loads and stores of up to 16 bytes where layout and alignment "
                   "allow); default 8 where every operand is of 16 bits or fewer, else 4, where allowed"},
        {"blocks_per_sm", fmt::format("cap on blocks per SM, [1, {}]; default: reductions what occupancy allows, "
                                      "maps none", kMaxBlocksPerSm)},
        {"registers", fmt::format("registers a thread at most, [{}, {}]: __launch_bounds__ asks ptxas for registers for "
                                  "65536 / (registers x threads per block) blocks an SM ({}: no bound); default per "
                                  "kernel and GPU (docs/tuning.md)",
                                  kMinRegisterBound, kMaxRegisters, kMaxRegisters)},
        {"acc", "reductions' per-thread sum: float64, float32 or compensated (float32, Neumaier); default float64"},
        {"fast_math", "on or off: NVRTC --use_fast_math; default off"},
        {"row_cache", "on or off: a program that walks each row more than once (a statistic, then the elements; a "
                      "value, then its gradient) keeps the row in shared memory after the first walk; default on where "
                      "the GPU's shared memory holds a row, or a large part of one"},
        {"row_cluster", "1, 2, 4 or 8: the blocks of a thread-block cluster (sm_90) that take each row together, each "
                        "walking (and with a row cache keeping) its share; default: clusters where the rows are fewer "
                        "than half the SMs (few long rows) or where a block would keep less than half its row in the "
                        "row cache, else 1 (a block a row)"},
        {"row_prefetch", "on or off: with the row cache, the last walk over a row copies the team's next row into the "
                         "cache as it goes (cp.async, sm_80), and teams take rows in turn; only where the cache keeps "
                         "the inputs as they are (of the compute type, rows not shifted, not in clusters); default on "
                         "where a block takes each row and a walk merges a mean and the squared deviations from it "
                         "(layer norm), and on an H200 where a block alone on its SM keeps its whole row, else off"},
        {"row_team", "warp or block: programs that reduce along rows take a row with a warp or with the whole block; "
                     "default a warp while rows are short (or, with the row cache, while the warps keep half their "
                     "rows), else the block, with the fewest threads that keep the SM's loads in flight where the "
                     "block size is automatic"},
    };
    return table;
}

struct Alias {
    const char* alias;
    const char* name;
};
constexpr Alias kAliases[] = {{"threads", "block"},          {"block_threads", "block"}, {"items_per_thread", "items"},
                              {"vector_width", "vector"},    {"bps", "blocks_per_sm"},   {"max_blocks_per_sm", "blocks_per_sm"},
                              {"max_registers", "registers"},
                              {"accumulator", "acc"},        {"fastmath", "fast_math"},
                              {"cache_rows", "row_cache"},   {"cluster", "row_cluster"},
                              {"team", "row_team"},          {"prefetch", "row_prefetch"}};

bool is_auto(std::string_view v) { return v == "auto" || v == "default"; }

int parse_int(std::string_view knob, std::string_view value) {
    int out = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
    if (ec != std::errc() || end != value.data() + value.size() || value.empty())
        throw UsageError(fmt::format("knob {}: '{}' is not a whole number (or 'auto')", knob, printable(value)));
    return out;
}

}  // namespace

std::string_view to_string(Accumulator accumulator) {
    switch (accumulator) {
        case Accumulator::Auto: return "auto";
        case Accumulator::Float64: return "float64";
        case Accumulator::Float32: return "float32";
        case Accumulator::CompensatedFloat32: return "compensated";
    }
    return "?";
}

std::string_view to_string(RowTeam team) {
    switch (team) {
        case RowTeam::Auto: return "auto";
        case RowTeam::Warp: return "warp";
        case RowTeam::Block: return "block";
    }
    return "?";
}

std::optional<Accumulator> parse_accumulator(std::string_view text) {
    if (is_auto(text)) return Accumulator::Auto;
    if (text == "float64" || text == "f64" || text == "double") return Accumulator::Float64;
    if (text == "float32" || text == "f32" || text == "float") return Accumulator::Float32;
    if (text == "compensated" || text == "kahan" || text == "neumaier") return Accumulator::CompensatedFloat32;
    return std::nullopt;
}

void validate_knobs(const Knobs& k) {
    if (k.block_threads != 0 &&
        (k.block_threads % kWarpThreads != 0 || k.block_threads < kWarpThreads || k.block_threads > kMaxBlockThreads))
        throw UsageError(fmt::format("threads per block must be a multiple of {} in [{}, {}], not {}", kWarpThreads,
                                     kWarpThreads, kMaxBlockThreads, k.block_threads));
    if (k.unroll < 0 || k.unroll > kMaxUnroll)
        throw UsageError(fmt::format("unroll must be in [1, {}] (0: automatic), not {}", kMaxUnroll, k.unroll));
    if (k.items_per_thread < 0 || k.items_per_thread > kMaxItemsPerThread)
        throw UsageError(fmt::format("items per thread must be in [1, {}] (0: automatic), not {}", kMaxItemsPerThread,
                                     k.items_per_thread));
    if (k.unroll > 0 && k.items_per_thread > 0)
        throw UsageError("set unroll or items per thread, not both (items per thread = unroll x vector width)");
    if (k.vector_width != 0 && k.vector_width != 1 && k.vector_width != 4 && k.vector_width != 8)
        throw UsageError(fmt::format("vector width must be 1, 4 or 8 (0: automatic), not {}", k.vector_width));
    if (k.vector_width > 1 && k.items_per_thread % k.vector_width != 0)
        throw UsageError(fmt::format("items per thread ({}) must be a multiple of the vector width ({})",
                                     k.items_per_thread, k.vector_width));
    if (k.max_blocks_per_sm < 0 || k.max_blocks_per_sm > kMaxBlocksPerSm)
        throw UsageError(fmt::format("blocks per SM must be in [1, {}] (0: automatic), not {}", kMaxBlocksPerSm,
                                     k.max_blocks_per_sm));
    if (k.max_registers != 0 && (k.max_registers < kMinRegisterBound || k.max_registers > kMaxRegisters))
        throw UsageError(fmt::format("registers a thread must be in [{}, {}] (0: automatic), not {}", kMinRegisterBound,
                                     kMaxRegisters, k.max_registers));
    if (k.row_cluster != 0 && k.row_cluster != 1 && k.row_cluster != 2 && k.row_cluster != 4 && k.row_cluster != 8)
        throw UsageError(fmt::format("blocks of a row cluster must be 1, 2, 4 or 8 (0: automatic), not {}", k.row_cluster));
    if (k.row_team != RowTeam::Auto && k.row_team != RowTeam::Warp && k.row_team != RowTeam::Block)
        throw UsageError(fmt::format("unknown row team ({})", static_cast<int>(k.row_team)));
    switch (k.accumulator) {
        case Accumulator::Auto: case Accumulator::Float64: case Accumulator::Float32:
        case Accumulator::CompensatedFloat32: break;
        default: throw UsageError(fmt::format("unknown accumulator ({})", static_cast<int>(k.accumulator)));
    }
}

std::span<const KnobHelp> knob_help() { return knobs(); }

std::optional<std::string> knob_name(std::string_view name) {
    for (const auto& k : knobs())
        if (name == k.name) return std::string(k.name);
    for (const auto& a : kAliases)
        if (name == a.alias) return std::string(a.name);
    return std::nullopt;
}

void set_knob(Knobs& knobs, std::string_view name, std::string_view value) {
    Knobs changed = knobs;
    apply_knob(changed, name, value);
    validate_knobs(changed);
    knobs = changed;
}

void apply_knob(Knobs& changed, std::string_view name, std::string_view value) {
    const auto knob = knob_name(name);
    if (!knob) {
        std::vector<std::string> names;
        for (const auto& k : knobs()) names.emplace_back(k.name);
        throw UsageError(fmt::format("unknown knob '{}' (knobs: {})", printable(name), fmt::join(names, ", ")));
    }
    if (*knob == "acc") {
        const auto acc = parse_accumulator(value);
        if (!acc)
            throw UsageError(fmt::format("knob acc: '{}' is not an accumulator (float64, float32, compensated or auto)",
                                         printable(value)));
        changed.accumulator = *acc;
    } else if (*knob == "row_team") {
        if (is_auto(value)) changed.row_team = RowTeam::Auto;
        else if (value == "warp") changed.row_team = RowTeam::Warp;
        else if (value == "block") changed.row_team = RowTeam::Block;
        else throw UsageError(fmt::format("knob row_team: '{}' is not warp, block or auto", printable(value)));
    } else if (*knob == "fast_math" || *knob == "row_cache" || *knob == "row_prefetch") {
        std::optional<bool>& knob_value = *knob == "fast_math" ? changed.fast_math
                                          : *knob == "row_cache" ? changed.row_cache
                                                                 : changed.row_prefetch;
        if (is_auto(value)) knob_value.reset();
        else if (value == "on" || value == "1" || value == "true" || value == "yes") knob_value = true;
        else if (value == "off" || value == "0" || value == "false" || value == "no") knob_value = false;
        else throw UsageError(fmt::format("knob {}: '{}' is not on, off or auto", *knob, printable(value)));
    } else {
        const int v = is_auto(value) ? 0 : parse_int(*knob, value);  // 0 is automatic, as in Knobs
        if (*knob == "block") {
            changed.block_threads = v;
        } else if (*knob == "items") {  // replaces an unroll set before it
            changed.items_per_thread = v;
            if (v != 0) changed.unroll = 0;
        } else if (*knob == "unroll") {  // replaces items set before it
            changed.unroll = v;
            if (v != 0) changed.items_per_thread = 0;
        } else if (*knob == "vector") {
            changed.vector_width = v;
        } else if (*knob == "blocks_per_sm") {
            changed.max_blocks_per_sm = v;
        } else if (*knob == "registers") {
            changed.max_registers = v;
        } else if (*knob == "row_cluster") {
            changed.row_cluster = v;
        }
    }
}

void set_knob(Knobs& knobs, std::string_view assignment) {
    const auto eq = assignment.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == assignment.size())
        throw UsageError(fmt::format("'{}': expected KNOB=VALUE, e.g. block=512", printable(assignment)));
    set_knob(knobs, assignment.substr(0, eq), assignment.substr(eq + 1));
}

void set_knobs(Knobs& knobs, std::string_view list) {
    while (!list.empty()) {
        const std::size_t end = list.find_first_of(", ");
        if (end != 0) set_knob(knobs, list.substr(0, end));
        list = end == std::string_view::npos ? std::string_view{} : list.substr(end + 1);
    }
}

std::string describe(const Knobs& k) {
    std::vector<std::string> parts;
    if (k.block_threads) parts.push_back(fmt::format("block {}", k.block_threads));
    if (k.items_per_thread) parts.push_back(fmt::format("items {}", k.items_per_thread));
    if (k.unroll) parts.push_back(fmt::format("unroll {}", k.unroll));
    if (k.vector_width) parts.push_back(fmt::format("vector {}", k.vector_width));
    if (k.max_blocks_per_sm) parts.push_back(fmt::format("blocks_per_sm {}", k.max_blocks_per_sm));
    if (k.max_registers) parts.push_back(fmt::format("registers {}", k.max_registers));
    if (k.accumulator != Accumulator::Auto) parts.push_back(fmt::format("acc {}", to_string(k.accumulator)));
    if (k.fast_math) parts.push_back(fmt::format("fast_math {}", *k.fast_math ? "on" : "off"));
    if (k.row_cache) parts.push_back(fmt::format("row_cache {}", *k.row_cache ? "on" : "off"));
    if (k.row_cluster) parts.push_back(fmt::format("row_cluster {}", k.row_cluster));
    if (k.row_prefetch) parts.push_back(fmt::format("row_prefetch {}", *k.row_prefetch ? "on" : "off"));
    if (k.row_team != RowTeam::Auto) parts.push_back(fmt::format("row_team {}", to_string(k.row_team)));
    return parts.empty() ? std::string("defaults") : fmt::format("{}", fmt::join(parts, ", "));
}

bool apply_tuned(Knobs& asked, const Knobs& tuned) {
    bool used = false;
    if (asked.block_threads == 0) {
        asked.block_threads = tuned.block_threads;
        used = true;
    }
    if (asked.unroll == 0 && asked.items_per_thread == 0) {
        asked.items_per_thread = tuned.items_per_thread;  // 0 (strided loop): stays automatic
        used = true;
    }
    if (asked.vector_width == 0) {
        // A vector width that the caller's own items per thread cannot be made of stays automatic.
        if (tuned.vector_width <= 1 || asked.items_per_thread % tuned.vector_width == 0)
            asked.vector_width = tuned.vector_width;
        used = true;
    }
    if (asked.max_blocks_per_sm == 0) {
        asked.max_blocks_per_sm = tuned.max_blocks_per_sm;
        used = true;
    }
    // A record from before the knob leaves it automatic: the defaults bound the kernel as they did.
    if (asked.max_registers == 0 && tuned.max_registers > 0) {
        asked.max_registers = tuned.max_registers;
        used = true;
    }
    if (asked.accumulator == Accumulator::Auto) {
        asked.accumulator = tuned.accumulator;
        used = true;
    }
    if (!asked.fast_math) {
        asked.fast_math = tuned.fast_math;
        used = true;
    }
    if (!asked.row_cache) {
        if (tuned.row_cache) {
            asked.row_cache = tuned.row_cache;
            used = true;
        } else if (used) {
            // A record from before the knob (or of a kernel that keeps no row) was timed without a row
            // cache: its threads and unroll are replayed without one too.
            asked.row_cache = false;
        }
    }
    if (asked.row_cluster == 0) {
        if (tuned.row_cluster > 0) {
            asked.row_cluster = tuned.row_cluster;
            used = true;
        } else if (used) {
            asked.row_cluster = 1;  // a record from before the knob was timed with a block a row
        }
    }
    if (!asked.row_prefetch) {
        if (tuned.row_prefetch) {
            asked.row_prefetch = tuned.row_prefetch;
            used = true;
        } else if (used) {
            asked.row_prefetch = false;  // a record from before the knob was timed without the prefetch
        }
    }
    // A record from before row_team leaves it automatic: its block size decides the team as it did.
    if (asked.row_team == RowTeam::Auto && tuned.row_team != RowTeam::Auto) {
        asked.row_team = tuned.row_team;
        used = true;
    }
    return used;
}

}  // namespace lossjit
