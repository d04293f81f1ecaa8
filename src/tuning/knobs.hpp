// knobs: the kernel variant knobs (lossjit::Knobs: threads per block, items per thread, vector
// width, unroll, blocks per SM, accumulator, fast math): checking them (the only place that does),
// reading them from text as the CLI and sweeps spell them ("block=512"), filling the automatic ones
// from a tuning record, and describing them. docs/tuning.md.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "lossjit/knobs.hpp"

namespace lossjit {

// Throws UsageError naming the knob and its valid values for any knob out of range, or knobs that
// contradict each other. compile() calls it, so a bad knob fails there, not at the first launch;
// the tuning store calls it on every record it reads.
void validate_knobs(const Knobs& knobs);

struct KnobHelp {
    const char* name;    // as written in --knob / --sweep: "block", "items", ...
    std::string values;  // what it takes, for messages and --help
};
std::span<const KnobHelp> knob_help();

// The canonical name of a knob ("threads" -> "block"), or nullopt.
std::optional<std::string> knob_name(std::string_view name);

// Sets one knob from text without checking the whole (apply several, then validate_knobs once):
// UsageError only for an unknown knob or a value that is not of the knob's kind.
void apply_knob(Knobs& knobs, std::string_view name, std::string_view value);

// Sets one knob from text: ("block", "512"), ("items", "16"), ("vector", "4"), ("unroll", "8"),
// ("blocks_per_sm", "4"), ("acc", "compensated"), ("fast_math", "on"). "auto" resets a knob to
// automatic. Throws UsageError for an unknown knob or a value it cannot take (validate_knobs' rules).
void set_knob(Knobs& knobs, std::string_view name, std::string_view value);
// The same for "NAME=VALUE".
void set_knob(Knobs& knobs, std::string_view assignment);
// Several "KNOB=VALUE" separated by commas or spaces ("block=512, row_cache=on": the C API's
// lossjit_options.knobs), each as set_knob.
void set_knobs(Knobs& knobs, std::string_view list);

// The knobs that are set, in a fixed order and as --knob names them: "block 512, items 16, acc
// float32"; "defaults" if none.
std::string describe(const Knobs& knobs);

// Knobs of `asked` left automatic take `tuned`'s values (a tuning record's resolved knobs); knobs
// that are set stay. Returns whether any came from `tuned`.
bool apply_tuned(Knobs& asked, const Knobs& tuned);

std::optional<Accumulator> parse_accumulator(std::string_view text);

}  // namespace lossjit
