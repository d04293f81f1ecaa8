// tune: the fastest accurate variant of a sweep, stored for later compiles.
#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "jit/compile.hpp"
#include "lossjit/errors.hpp"
#include "lossjit/version.hpp"
#include "tools/sweep.hpp"
#include "tools/sweep_run.hpp"

namespace lossjit {
namespace {

std::string utc_now() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char text[32] = {};
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

}  // namespace

bool qualifies(const SweepRow& row, const TuneResult& result) {
    return row.failure.empty() && row.error <= result.bound && row.error_of_largest <= result.bound_of_largest;
}

TuneResult tune(SweepRequest request, const TuneOptions& options) {
    if (request.axes.empty()) request.axes = default_tune_axes(checked_program(request).by_rows());
    request.include_default = true;
    if (!(options.tolerance >= 0)) throw UsageError("the tolerance must be a non-negative number");
    SweepRunner runner(request);
    TuneResult r;
    r.sweep = runner.run();

    const SweepRow* defaults = baseline_row(r.sweep);
    int timed = 0;
    for (const auto& row : r.sweep.rows)
        if (row.failure.empty()) ++timed;
    // Tuning may not make results worse than the project's bound, or than the defaults already are
    // (a map's elementwise error, or a hard reduction): whichever is larger.
    // Both of a map's errors (SweepRow): the elementwise one alone would be as loose as the
    // defaults' is where outputs cross 0 (3.7 for a layer norm).
    const bool default_timed = defaults && defaults->failure.empty();
    const double default_error = default_timed && std::isfinite(defaults->error) ? defaults->error : 0.0;
    const double default_of_largest =
        default_timed && std::isfinite(defaults->error_of_largest) ? defaults->error_of_largest : 0.0;
    r.bound = std::max(options.tolerance, default_error);
    r.bound_of_largest = std::max(options.tolerance, default_of_largest);
    for (std::size_t i = 0; i < r.sweep.rows.size(); ++i) {
        const auto& row = r.sweep.rows[i];
        if (qualifies(row, r)) {
            r.winner = static_cast<int>(i);
            break;
        }
    }
    if (r.winner < 0) {
        r.not_stored = fmt::format("no variant was within the accuracy bounds ({:.3g} elementwise, {:.3g} of the largest) "
                                   "of {} timed", r.bound, r.bound_of_largest, timed);
        return r;
    }
    const SweepRow& win = r.sweep.rows[static_cast<std::size_t>(r.winner)];
    TuningRecord record;
    record.key = runner.key();
    // A record keeps items and vector width (unroll follows), none where the kernel had no tiles.
    record.knobs = win.kernel.knobs;
    record.knobs.unroll = 0;
    if (win.kernel.strided) record.knobs.items_per_thread = record.knobs.vector_width = 0;
    record.ms = win.ms;
    record.default_ms = defaults && defaults->failure.empty() ? defaults->ms : 0.0;
    record.rel_error = win.error;
    record.variants = timed;
    record.lossjit = kVersion;
    record.nvrtc = nvrtc_version();
    record.when = utc_now();
    r.record = record;

    TuningStore* store = TuningStore::process();
    if (!options.store) {
        r.not_stored = "not asked to (--dry-run)";
    } else if (!store) {
        r.not_stored = "the kernel cache is off (LOSSJIT_CACHE=off, or no cache directory), and the tuning store with it";
    } else if (!store->writable()) {
        r.not_stored = fmt::format("the tuning store {} is read-only here (LOSSJIT_CACHE=read)", store->file().string());
    } else {
        store->put(record);
        r.stored_in = store->file().string();
        // What a later compile with automatic knobs does now; this also puts its kernel in the disk
        // cache, so the next process starts with a disk hit.
        Options fresh = request.base;
        fresh.use_tuning = true;
        r.check = runner.check(fresh, r.check_error, r.check_error_of_largest);
    }
    return r;
}

}  // namespace lossjit
