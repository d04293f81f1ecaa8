// The sweep's table and JSON, and tune's summary: for people and machines.
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipeline.hpp"
#include "tools/sweep.hpp"
#include "tools/json_text.hpp"
#include "tuning/knobs.hpp"
#include "util/units.hpp"

namespace lossjit {
namespace {

using json = nlohmann::json;

std::string occupancy_text(const KernelInfo& k) {
    return fmt::format("{:.0f}% ({}/SM)", 100.0 * k.occupancy, k.blocks_per_sm);
}

}  // namespace

const SweepRow* baseline_row(const SweepResult& result) {
    for (const auto& row : result.rows)
        if (row.baseline) return &row;
    return nullptr;
}

std::string format_sweep_table(const SweepResult& r) {
    std::string out;
    int timed = 0;
    for (const auto& row : r.rows) timed += row.failure.empty() ? 1 : 0;
    out += fmt::format("{} ({}) on {}: inputs {}, {} per call\n", r.program_name, r.kind, r.device, r.shapes,
                       util::human_bytes(r.bytes_per_call));
    out += fmt::format("{} variant{} timed{}; each the median of {} intervals of back-to-back launches, on {} input set{} "
                       "in turn; {:.1f} s in all\n",
                       timed, timed == 1 ? "" : "s",
                       timed == static_cast<int>(r.rows.size()) ? "" : fmt::format(" of {}", r.rows.size()), r.reps,
                       r.input_sets, r.input_sets == 1 ? "" : "s", r.seconds);
    out += fmt::format("roofline {:.0f} GB/s ({})\n\n", r.roofline_gbps, r.roofline_method);

    // Maps: the largest elementwise error, then the largest difference over the largest output
    // (SweepRow::error_of_largest; for a reduction the two are one number).
    const bool map = r.kind == "map";
    std::vector<std::string> header{"#", "block", "items", "vector", "unroll", "bps cap", "reg cap", "acc", "fast math", "row cache", "cluster", "ms",
                                    "GB/s", "% roof", "regs", "spill B", "occupancy", "rel. error"};
    if (map) header.push_back("of largest");
    header.push_back("");
    std::vector<std::vector<std::string>> cells;
    std::vector<std::string> notes, failures;
    int rank = 0;
    for (const auto& row : r.rows) {
        if (!row.failure.empty()) {
            failures.push_back(fmt::format("  {}: {}", row.label, row.failure));
            continue;
        }
        ++rank;
        const auto& info = row.kernel;
        const auto& k = info.knobs;
        std::string mark = row.is_default ? "default" : "";
        if (!row.baseline && row.is_default) mark = "= default";
        std::vector<std::string> line{std::to_string(rank), std::to_string(k.block_threads),
                                      info.strided ? "-" : std::to_string(k.items_per_thread),
                                      info.strided ? "-" : std::to_string(k.vector_width),
                                      info.strided ? "-" : std::to_string(k.unroll),
                                      k.max_blocks_per_sm ? std::to_string(k.max_blocks_per_sm) : "auto",
                                      k.max_registers > 0 && k.max_registers < kMaxRegisters ? std::to_string(k.max_registers) : "-",
                                      std::string(to_string(k.accumulator)), k.fast_math.value_or(false) ? "on" : "off",
                                      // on: kept; prefetch: kept, the next row copied in (row_prefetch)
                                      k.row_cache ? (*k.row_cache ? (k.row_prefetch.value_or(false) ? "prefetch" : "on") : "off")
                                                  : "-",
                                      k.row_cluster > 0 ? std::to_string(k.row_cluster) : "-",
                                      fmt::format("{:.4f}", row.ms), fmt::format("{:.0f}", row.gbps),
                                      fmt::format("{:.1f}%", 100.0 * row.roofline), std::to_string(info.registers),
                                      std::to_string(info.local_bytes), occupancy_text(info), fmt::format("{:.2e}", row.error)};
        if (map) line.push_back(fmt::format("{:.2e}", row.error_of_largest));
        line.push_back(mark);
        cells.push_back(std::move(line));
        for (const auto& note : info.notes) notes.push_back(fmt::format("  #{} ({}): {}", rank, row.label, note));
    }
    std::vector<std::size_t> width(header.size());
    for (std::size_t c = 0; c < header.size(); ++c) {
        width[c] = header[c].size();
        for (const auto& line : cells) width[c] = std::max(width[c], line[c].size());
    }
    auto print_line = [&](const std::vector<std::string>& line) {
        std::string text;
        for (std::size_t c = 0; c < line.size(); ++c) {
            // Numbers right-aligned, words and the last column left.
            const bool left = c == 7 || c == 8 || c + 1 == line.size();
            text += left ? fmt::format("{:<{}}", line[c], width[c]) : fmt::format("{:>{}}", line[c], width[c]);
            if (c + 1 < line.size()) text += "  ";
        }
        while (!text.empty() && text.back() == ' ') text.pop_back();
        out += text + "\n";
    };
    print_line(header);
    for (const auto& line : cells) print_line(line);
    if (!notes.empty()) out += "notes:\n" + fmt::format("{}\n", fmt::join(notes, "\n"));
    if (!failures.empty()) out += "not timed:\n" + fmt::format("{}\n", fmt::join(failures, "\n"));
    return out;
}

std::string format_tune_summary(const TuneResult& t) {
    std::string out;
    int timed = 0, within = 0;
    for (const auto& row : t.sweep.rows) {
        if (!row.failure.empty()) continue;
        ++timed;
        if (qualifies(row, t)) ++within;
    }
    const SweepRow* defaults = baseline_row(t.sweep);
    out += fmt::format("tune: {} of {} timed variants within the accuracy bound {:.3g} (relative error against the "
                       "float64 reference; the bound is max(tolerance, the defaults' own error))\n",
                       within, timed, t.bound);
    if (t.sweep.kind == "map")
        out += fmt::format("  and within {:.3g} of the largest output (the largest difference over the largest reference "
                           "element: max(tolerance, the defaults' own))\n",
                           t.bound_of_largest);
    if (t.winner >= 0) {
        const SweepRow& win = t.sweep.rows[static_cast<std::size_t>(t.winner)];
        out += fmt::format("winner: #{} ({}) {:.4f} ms, {:.0f} GB/s", t.winner + 1, win.label, win.ms, win.gbps);
        if (defaults) out += fmt::format("; the defaults {:.4f} ms ({:.3f}x)", defaults->ms, defaults->ms / win.ms);
        out += "\n";
        if (t.record) out += fmt::format("  knobs: {}\n", describe(t.record->knobs));
    }
    if (!t.stored_in.empty()) {
        out += fmt::format("stored in {} for {} float32 on {}\n", t.stored_in, t.sweep.shapes, t.sweep.device);
    } else {
        out += fmt::format("not stored: {}\n", t.not_stored);
    }
    if (t.check) {
        out += fmt::format("check: a new compile with automatic knobs runs \"{}\"{}, rel. error {:.2e}\n",
                           t.check->signature, t.check->tuned.empty() ? " (NOT from the tuning store)" : "",
                           t.check_error);
    }
    return out;
}

std::string sweep_json(const SweepResult& r, const TuneResult* tuned) {
    json rows = json::array();
    int rank = 0;
    for (const auto& row : r.rows) {
        const auto& info = row.kernel;
        const auto& k = info.knobs;
        json j{{"knobs", row.label}, {"input_set", row.input_set}};
        if (!row.failure.empty()) {
            j["failure"] = row.failure;
            rows.push_back(j);
            continue;
        }
        j["rank"] = ++rank;
        j["default"] = row.is_default;
        j["signature"] = info.signature;
        j["block_threads"] = k.block_threads;
        j["strided"] = info.strided;
        j["items_per_thread"] = k.items_per_thread;
        j["vector_width"] = k.vector_width;
        j["unroll"] = k.unroll;
        j["max_blocks_per_sm"] = k.max_blocks_per_sm;
        j["max_registers"] = k.max_registers;
        j["accumulator"] = std::string(to_string(k.accumulator));
        j["fast_math"] = k.fast_math.value_or(false);
        j["row_cache"] = k.row_cache ? json(*k.row_cache) : json(nullptr);  // null: the kernel keeps no row
        j["row_cluster"] = k.row_cluster > 0 ? json(k.row_cluster) : json(nullptr);
        j["row_prefetch"] = k.row_prefetch ? json(*k.row_prefetch) : json(nullptr);
        j["row_team"] = k.row_team != RowTeam::Auto ? json(to_string(k.row_team)) : json(nullptr);
        j["ms"] = row.ms;
        j["gbps"] = row.gbps;
        j["roofline_fraction"] = row.roofline;
        j["registers"] = info.registers;
        j["local_bytes"] = info.local_bytes;
        j["shared_bytes"] = info.shared_bytes;
        j["resident_blocks_per_sm"] = info.resident_blocks_per_sm;
        j["blocks_per_sm"] = info.blocks_per_sm;
        j["occupancy"] = info.occupancy;
        j["grid"] = info.grid;
        j["rel_error"] = row.error;
        j["error_of_largest"] = row.error_of_largest;
        j["launches_per_interval"] = row.launches_per_interval;
        j["notes"] = info.notes;
        rows.push_back(j);
    }
    json out{{"program", r.program_name},
             {"kind", r.kind},
             {"device", r.device},
             {"target", r.target},
             {"shapes", r.shapes},
             {"bytes_per_call", r.bytes_per_call},
             {"roofline", {{"gbps", r.roofline_gbps}, {"method", r.roofline_method}}},
             {"reps", r.reps},
             {"input_sets", r.input_sets},
             {"references", r.references},
             {"seconds", r.seconds},
             {"rows", rows}};
    if (tuned) {
        json t{{"bound", tuned->bound},
               {"bound_of_largest", tuned->bound_of_largest},
               {"winner_rank", tuned->winner >= 0 ? json(tuned->winner + 1) : json(nullptr)}};
        if (tuned->record) {
            const auto& k = tuned->record->knobs;
            t["knobs"] = {{"block_threads", k.block_threads}, {"items_per_thread", k.items_per_thread},
                          {"vector_width", k.vector_width},   {"max_blocks_per_sm", k.max_blocks_per_sm},
                          {"max_registers", k.max_registers},
                          {"accumulator", std::string(to_string(k.accumulator))}, {"fast_math", k.fast_math.value_or(false)},
                          {"row_cache", k.row_cache ? json(*k.row_cache) : json(nullptr)},
                          {"row_cluster", k.row_cluster > 0 ? json(k.row_cluster) : json(nullptr)},
                          {"row_prefetch", k.row_prefetch ? json(*k.row_prefetch) : json(nullptr)},
                          {"row_team", k.row_team != RowTeam::Auto ? json(to_string(k.row_team)) : json(nullptr)}};
            t["key"] = tuned->record->key.id();
        }
        t["stored_in"] = tuned->stored_in.empty() ? json(nullptr) : json(tuned->stored_in);
        if (!tuned->not_stored.empty()) t["not_stored"] = tuned->not_stored;
        if (tuned->check)
            t["check"] = {{"signature", tuned->check->signature}, {"tuned", tuned->check->tuned},
                          {"rel_error", tuned->check_error}, {"error_of_largest", tuned->check_error_of_largest}};
        out["tune"] = t;
    }
    return json_text(out);
}

}  // namespace lossjit
