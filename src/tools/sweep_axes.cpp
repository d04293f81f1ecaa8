// --sweep axes and their product.
#include <set>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "pipeline.hpp"
#include "tools/sweep.hpp"
#include "tools/sweep_run.hpp"
#include "tuning/knobs.hpp"

namespace lossjit {
namespace {

std::vector<std::string> split(std::string_view text, char separator) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (true) {
        const auto end = text.find(separator, start);
        parts.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
        if (end == std::string_view::npos) break;
        start = end + 1;
    }
    return parts;
}

}  // namespace

SweepAxis parse_sweep_axis(std::string_view text) {
    const auto eq = text.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
        throw UsageError(fmt::format("--sweep '{}': expected KNOB=VALUE,VALUE,... (e.g. block=128,256,512)", printable(text)));
    const auto name = knob_name(text.substr(0, eq));
    SweepAxis axis;
    Knobs probe;
    apply_knob(probe, text.substr(0, eq), "auto");  // an unknown knob throws, naming the knobs
    axis.knob = *name;
    for (auto& value : split(text.substr(eq + 1), ',')) {
        if (value.empty()) throw UsageError(fmt::format("--sweep '{}': an empty value", printable(text)));
        Knobs alone;
        set_knob(alone, axis.knob, value);  // a value this knob can never take throws here
        axis.values.push_back(std::move(value));
    }
    return axis;
}

std::vector<SweepVariant> expand_sweep(const Knobs& base, std::span<const SweepAxis> axes) {
    std::set<std::string> seen;
    std::size_t total = 1;
    for (const auto& axis : axes) {
        if (!seen.insert(axis.knob).second) throw UsageError(fmt::format("two --sweep axes set the knob {}", axis.knob));
        if (axis.values.empty()) throw UsageError(fmt::format("the --sweep axis {} has no values", axis.knob));
        total *= axis.values.size();
        if (total > static_cast<std::size_t>(kMaxSweepVariants))
            throw UsageError(fmt::format("the axes make more than {} variants", kMaxSweepVariants));
    }
    std::vector<SweepVariant> out;
    for (std::size_t t = 0; t < total; ++t) {
        SweepVariant v{base, "", ""};
        std::vector<std::string> parts;
        std::size_t rest = t;
        std::vector<std::size_t> index(axes.size());
        for (std::size_t a = axes.size(); a-- > 0;) {  // the last axis varies fastest
            index[a] = rest % axes[a].values.size();
            rest /= axes[a].values.size();
        }
        for (std::size_t a = 0; a < axes.size(); ++a) {
            const auto& value = axes[a].values[index[a]];
            apply_knob(v.knobs, axes[a].knob, value);
            parts.push_back(fmt::format("{}={}", axes[a].knob, value));
        }
        v.label = parts.empty() ? "base" : fmt::format("{}", fmt::join(parts, " "));
        try {
            validate_knobs(v.knobs);
        } catch (const UsageError& e) {
            v.error = e.what();
        }
        out.push_back(std::move(v));
    }
    return out;
}

std::vector<SweepAxis> default_tune_axes(bool by_rows) {
    // Rows: both teams, since a block size set by hand takes the automatic team (H100, round 118: softmax,
    // log_softmax and RMS norm forward over 32768 x 4096 at 94-96% of the copy rate as a block of 256
    // a row, 82-88% as the default's warps, which block=256 alone also gives); clusters of 2 and 4 or
    // the automatic choice (a block a row where the rows are enough: "1" is what auto gives there).
    if (by_rows)
        return {{"block", {"128", "256", "512", "1024"}}, {"items", {"8", "16"}}, {"row_cache", {"auto", "off"}},
                {"row_team", {"warp", "block"}}, {"row_cluster", {"auto", "2", "4"}}};
    return {{"block", {"128", "256", "512", "1024"}}, {"items", {"4", "8", "16", "32"}}, {"blocks_per_sm", {"auto", "2", "4"}}};
}

}  // namespace lossjit
