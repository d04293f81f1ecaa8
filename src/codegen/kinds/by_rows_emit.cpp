// by_rows_emit: the by-rows kind's source (kinds.hpp): CUDA for programs that reduce along rows (ir::Program::by_rows): row reductions
// (sum(e, -1), logsumexp(e, -1), ...), takes (x[y]) and several whole-tensor reductions. A team of
// threads (a warp, or the block) takes one row at a time and walks it once per level of nested row
// reductions; what is one value per row is computed once per row, in every thread of the team.
// The scaffolding (teams, accumulators, the finish) is templates/by_rows.cuh; this file prints the
// program's row function.
#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/emit_detail.hpp"
#include "codegen/kernel_spec.hpp"
#include "codegen/kinds/kinds.hpp"
#include "codegen/kinds/parameters.hpp"
#include "codegen/templates.hpp"
#include "ir/print.hpp"
#include "lossjit/errors.hpp"
#include "lossjit/version.hpp"
#include "pipeline.hpp"

namespace lossjit {
namespace {

constexpr std::string_view kIndent = "        ";
constexpr int kKValues = 3;  // KernelSpec::inner_strides of an input of K values per row

// A row reduction's accumulator and value, from its row of the table (RowReductionInfo).
const RowReductionInfo& reduced_by_accumulator(RowReduction how) {
    const RowReductionInfo& info = row_reduction_info(how);
    if (info.cuda_accumulator.empty())
        throw InternalError(fmt::format("'{}' should have been expanded by the checker", info.name));
    return info;
}
std::string_view accumulator_type(RowReduction how) { return reduced_by_accumulator(how).cuda_accumulator; }
std::string accumulated_value(RowReduction how, const std::string& acc) {
    return fmt::format(fmt::runtime(reduced_by_accumulator(how).cuda_result), acc);
}

// The accumulators' definitions the program's row reductions use, each once, in table order.
std::string accumulator_helpers(const ir::Program& program) {
    std::vector<bool> used(static_cast<std::size_t>(RowReduction::Count_), false);
    for (const auto& n : program.nodes)
        if (n.kind == ir::NodeKind::RowReduce) used[static_cast<std::size_t>(n.slot)] = true;
    std::string out;
    for (const auto& row : row_reduction_table())
        if (used[static_cast<std::size_t>(row.id)] && out.find(row.cuda_helper) == std::string::npos) out += row.cuda_helper;
    for (const auto& shared : shared_accumulators())
        if (used[static_cast<std::size_t>(shared.first)] && used[static_cast<std::size_t>(shared.second)])
            out += shared.cuda_helper;
    return out.empty() ? out : "// The row reductions' accumulators (src/lang/builtins.cpp, kRowReductions).\n" + out;
}

class RowEmitter {
public:
    RowEmitter(const ir::Program& program, const KernelSpec& spec)
        : program_(program), spec_(spec), slots_(read_inputs(program)),
          printer_(program, spec.compute == DType::float64 ? PrintStyle::Cuda64 : PrintStyle::Cuda),
          index_(program.index_inputs()), totals_(row_totals(program)) {
        if (spec.inner_strides.size() != slots_.size())
            throw InternalError("kernel spec and program disagree on the inputs read");
        std::vector<bool> input_per_row(program.inputs.size(), false);
        k_input_.assign(program.inputs.size(), false);
        for (std::size_t k = 0; k < slots_.size(); ++k) {
            const auto slot = static_cast<std::size_t>(slots_[k]);
            k_input_[slot] = spec.inner_strides[k] == kKValues;
            input_per_row[slot] = !k_input_[slot] && (spec.inner_strides[k] == 0 || index_[slot]);
            kernel_index_[slots_[k]] = static_cast<int>(k);
        }
        per_row_ = per_row_nodes(program, input_per_row);
        k_level_ = k_level_nodes(program, k_input_);
        mark_live();
        find_centered();
        stages();
        plan_passes();
        find_deferred_takes();
        row_values_ = find_row_values();
        for (std::size_t id = 0; id < program.nodes.size(); ++id) {
            const ir::Node& n = program.nodes[id];
            const bool named = live_[id] && (per_row_[id] || k_level_[id]) &&
                               (n.kind == ir::NodeKind::Apply || n.kind == ir::NodeKind::RowReduce ||
                                n.kind == ir::NodeKind::Take);
            if (named) printer_.name(static_cast<int>(id), fmt::format("n{}", id));
            // Derivatives' own nodes: the row's length, "this element's column is the index" and "the
            // index names a column of the row" (its integer, loaded at the row's start: row_values).
            if (n.kind == ir::NodeKind::RowLength) printer_.name(static_cast<int>(id), "((Value)C)");
            if (n.kind == ir::NodeKind::InRow) {
                const std::string index = index_name(program.node(n.args[0]).slot);
                printer_.name(static_cast<int>(id), fmt::format("({} >= 0 && {} < C)", index, index));
            }
            if (n.kind == ir::NodeKind::OneHot) {
                const int slot = program.node(n.args[0]).slot;
                printer_.name(static_cast<int>(id), hot_name(slot));
                if (live_[id]) hot_slots_.insert(slot);
            }
            // K, and what x[k] scatters back to a column: 0 where nothing is gathered, which is what
            // the element pass writes; the gathered columns are written again after it (k_scatter).
            if (n.kind == ir::NodeKind::TakeCount) printer_.name(static_cast<int>(id), "((Value)K)");
            if (n.kind == ir::NodeKind::ScatterAdd) printer_.name(static_cast<int>(id), "((Value)0)");
        }
    }

    std::string row_program() {
        std::string out = "// The program, one row at a time (templates/by_rows.cuh has the pieces it uses).\nstruct RowProgram {\n";
        out += fmt::format("    using Value = {};  // what the program computes in\n",
                           spec_.compute == DType::float64 ? "double" : "float");
        out += fmt::format("    static constexpr int kInputs = {};\n", slots_.size());
        std::vector<std::string> dtypes;
        for (DType d : spec_.input_dtypes) dtypes.emplace_back(kernel_dtype(d));
        out += fmt::format("    __host__ __device__ static constexpr int dtype(int k) {{ return {}; }}\n",
                           per_index(dtypes, "lj::kFloat32", "k"));
        out += fmt::format("    static constexpr int kResultDType = {};  // a map's output, or the result\n",
                           kernel_dtype(spec_.result_dtype));
        out += fmt::format("    static constexpr int kTotals = {};\n", std::max<std::size_t>(totals_.size(), 1));
        for (const auto& p : program_.params) out += fmt::format("    Value {};\n", cuda_param_name(p.name));
        for (const auto& p : program_.params) out += fmt::format("    double {}_f64;\n", cuda_param_name(p.name));
        out += param_reciprocals(program_);  // after every member the kernel initializes
        out += final_function();
        if (!program_.derivatives.empty()) {
            std::vector<std::string> grad_dtypes;
            for (DType d : spec_.grad_dtypes) grad_dtypes.emplace_back(kernel_dtype(d));
            out += fmt::format("    static constexpr int kGrads = {};\n", program_.derivatives.size());
            out += fmt::format("    __host__ __device__ static constexpr int grad_dtype(int g) {{ return {}; }}\n",
                               per_index(grad_dtypes, "lj::kFloat32", "g"));
        }
        out += ahead_struct();
        out += first_walk();
        out += "    template <class Team, int R, int VW, int U, class Out, class Grads>\n";
        out += "    __device__ __forceinline__ void row(const lj::Extents& e, const lj::Inputs<kInputs>& in, long long row,\n";
        out += "                                       long long C, bool active, double (&totals)[kTotals],\n";
        out += "                                       double (&row_totals)[kTotals], const Out& out,\n";
        out += "                                       const Grads& grads, Ahead<U, VW>& ahead) const {\n";
        out += row_body();
        out += "    }\n};";
        return out;
    }

    // What a row's last walk leaves for the team's next row (KernelSpec::row_walk_ahead), carried in
    // registers from row to row: the next row's first-walk accumulators, and a first tile of the
    // cached inputs loaded before the merges that come before the walk that uses it. Empty otherwise.
    std::string ahead_struct() const {
        std::string out = "    template <int U, int VW>\n    struct Ahead {";
        if (!spec_.row_walk_ahead) return out + "};\n";
        out += "  // (KernelSpec::row_walk_ahead)\n";
        for (int id : passes_.front().reductions)
            out += fmt::format("        {} a{};\n", accumulator_type(static_cast<RowReduction>(program_.node(id).slot)), id);
        out += fmt::format("        Value w[U][{}][VW];\n", cache_slot_.size());
        for (const RowValue& r : row_values()) {
            if (r.index) out += fmt::format("        long long index{};  // the row's own values (row_values_ahead)\n", r.k);
            if (r.value) out += fmt::format("        Value value{};\n", r.k);
        }
        if (!deferred_takes_.empty()) out += "        int take_parity = 0;  // which of takes_'s two slots the row's takes use (takes_by_owner)\n";
        out += "    };\n";
        // The takes' slots (takes_by_owner), one array a block that the team's first walk (which
        // picks its first row's takes, picked_take) and its rows share.
        if (!deferred_takes_.empty())
            out += fmt::format("    template <class Team>\n    __device__ __forceinline__ static Value (&take_slots())[Team::kPerBlock][2][{}] {{\n"
                               "        __shared__ Value slots[Team::kPerBlock][2][{}];\n        return slots;\n    }}\n",
                               deferred_takes_.size(), deferred_takes_.size());
        return out;
    }

    // Pieces of a row's start that row_body, row_prefetch_start and first_walk all print.
    // rows_: how many rows there are (every dimension but the last).
    static std::string rows_count(std::string_view indent) {
        return fmt::format("{}long long rows_ = 1;\n{}#pragma unroll\n{}for (int d = 0; d < R - 1; ++d) rows_ *= e.dims[d];\n",
                           indent, indent, indent);
    }
    // c and base[k]: the row's coordinates and each input's offset of its first element.
    std::string row_bases(std::string_view indent) const {
        return fmt::format("{}long long c[lj::kMaxRank];\n{}lj::coords<R - 1>(e, row, c);  // the row's coordinates: every dim but the last\n",
                           indent, indent) +
               (spec_.row_split
                    ? fmt::format("{}const lj::RunDivider runs((unsigned)e.dims[R]);  // the row's runs (templates/row_runs.cuh)\n", indent)
                    : std::string()) +
               fmt::format("{}long long base[{}];\n{}#pragma unroll\n{}for (int k = 0; k < kInputs; ++k) base[k] = lj::offset<R - 1>(c, in.strides[k]);\n",
                           indent, std::max<std::size_t>(slots_.size(), 1), indent, indent);
    }
    // cache_columns and row_cache: this team's share of the block's row cache.
    std::string row_cache_declarations(std::string_view indent) const {
        return fmt::format("{}const long long cache_columns = lj::row_cache_columns<Value, {}, Team::kPerBlock>();\n", indent,
                           cache_slot_.size()) +
               fmt::format("{}Value* const row_cache = Team::template team_cache<{}>(lj::row_cache<Value>(), cache_columns);\n",
                           indent, cache_slot_.size());
    }
    // Another row's coordinates (`coords`, of row `row`) and the offsets of its cached inputs (into
    // `bases`, declared before): the next row's, the one after it.
    std::string cached_bases(std::string_view coords, std::string_view row, std::string_view bases, std::string_view indent) const {
        std::string out = fmt::format("{}long long {}[lj::kMaxRank];\n{}lj::coords<R - 1>(e, {}, {});\n", indent, coords, indent, row, coords);
        for (const auto& [k, slot] : cache_slot_)
            out += fmt::format("{}{}[{}] = lj::offset<R - 1>({}, in.strides[{}]);\n", indent, bases, k, coords, k);
        return out;
    }
    // One vector of every cached input into Ahead's registers at u, from the row at `base`, column j.
    std::string ahead_load(std::string_view base, std::string_view indent) const {
        std::string out;
        for (const auto& [k, slot] : cache_slot_)
            out += fmt::format("{}lj::load_row<VW>(dtype({}), in.ptr[{}], {}[{}] + {}, ahead.w[u][{}]);\n", indent, k, k, base, k,
                               column(fmt::format("in.strides[{}]", k)), slot);
        return out;
    }

    // The team's first row's first walk (KernelSpec::row_walk_ahead), before its rows: the walk the
    // row before does for every other row; it keeps the row in the cache, leaves its accumulators in
    // Ahead and loads the next row's first tile. Empty otherwise.
    std::string first_walk() const {
        std::string out = "    template <class Team, int R, int VW, int U>\n";
        out += "    __device__ __forceinline__ void first_walk(const lj::Extents& e, const lj::Inputs<kInputs>& in, long long C,\n";
        out += "                                               Ahead<U, VW>& ahead) const {\n";
        if (!spec_.row_walk_ahead) return out + "    }\n";
        const std::string in1 = std::string(kIndent) + "    ";
        out += fmt::format("{}const long long row = Team::first_row();\n", kIndent) + rows_count(kIndent);
        out += fmt::format("{}if (row >= rows_) return;\n", kIndent);
        out += row_bases(kIndent) + row_cache_declarations(kIndent);
        out += row_values_ahead([](int k) { return fmt::format("base[{}]", k); }, kIndent);
        const PassPlan& first = passes_.front();
        for (int id : first.reductions)
            out += fmt::format("{}{} a{};\n", kIndent, accumulator_type(static_cast<RowReduction>(program_.node(id).slot)), id);
        out += walk(first, first.reductions, std::string(kIndent), true);
        for (int id : first.reductions) out += fmt::format("{}ahead.a{} = a{};\n", kIndent, id, id);
        out += fmt::format("{}const long long next_row_ = row + Team::row_step();\n", kIndent);
        out += fmt::format("{}if (next_row_ < rows_) {{  // the next row's first tile, in flight across this row's merges\n", kIndent);
        out += fmt::format("{}long long next_base_[{}] = {{}};\n", in1, std::max<std::size_t>(slots_.size(), 1));
        out += cached_bases("next_c", "next_row_", "next_base_", in1);
        out += ahead_first_tile("next_base_", in1);
        return out + fmt::format("{}}}\n    }}\n", kIndent);
    }

    std::size_t totals() const { return totals_.size(); }

    // The inputs read along the row by more than one pass (kernel indices): what a row cache would hold.
    const std::vector<int>& inputs_read_again() const { return read_again_; }
    // The inputs some pass reads along the row (kernel indices, ascending); not those only taken at
    // one column of it (class weights' `w[y]`) or at K columns.
    std::vector<int> inputs_walked() const {
        std::set<int> walked;
        for (const PassPlan& pass : passes_) walked.insert(pass.loaded.begin(), pass.loaded.end());
        return {walked.begin(), walked.end()};
    }
    int walk_count() const { return static_cast<int>(passes_.size()); }

    // Whether the row has takes and every one is picked (kinds::row_takes_picked; picked_take).
    bool takes_all_picked() const {
        bool any = false;
        for (std::size_t id = 0; id < program_.nodes.size(); ++id) {
            if (!live_[id] || program_.nodes[id].kind != ir::NodeKind::Take) continue;
            if (!picked_take(static_cast<int>(id))) return false;
            any = true;
        }
        return any;
    }

    // Whether a mean and the squared deviations from it share an accumulator (find_centered).
    bool centered() const { return !centered_.empty(); }

    // Whether the row before can do the first walk (KernelSpec::row_walk_ahead): it reduces exactly
    // the inputs the cache keeps (so its values are the ones the last walk reads for the cache) with
    // accumulators of their own, and its work at a column needs nothing of the row but the column's
    // values (no per-row value, no K values, no "this column is the index", no element work), so that
    // the row before can do it without the next row's start.
    bool walks_ahead() const {
        if (passes_.size() < 2 || spec_.side_by_side || spec_.row_split || spec_.row_shift || spec_.row_cluster > 1) return false;
        const PassPlan& first = passes_.front();
        if (first.elements || !first.hot.empty() || first.loaded != read_again_) return false;
        const AccumulatorSharing shares = sharing(first.reductions);
        if (!shares.first_of.empty() || !shares.second_of.empty()) return false;
        // Of what is one value per row only constants, parameters and the row's length, which the
        // printer writes out (first_walk, before the rows, has nothing of a row defined).
        bool of_the_row = false;
        walk_uses(pass_roots(first.reductions, false), true, [&](int id) {
            const ir::NodeKind kind = program_.node(id).kind;
            of_the_row = of_the_row || k_level_[static_cast<std::size_t>(id)] ||
                         (per_row_[static_cast<std::size_t>(id)] && kind != ir::NodeKind::Constant &&
                          kind != ir::NodeKind::Param && kind != ir::NodeKind::RowLength);
        });
        return !of_the_row;
    }

private:
    // Live: what the outputs (a map's body, the totals' arguments) need, through bindings.
    void mark_live() {
        live_.assign(program_.nodes.size(), false);
        std::vector<int> roots;
        if (program_.is_map())
            for (int r : program_.result_nodes()) roots.push_back(r);
        for (const auto& t : totals_) roots.push_back(t.argument);
        for (std::size_t g = 0; g < program_.derivatives.size(); ++g) roots.push_back(kernel_node(g));
        for (int r : roots) live_[static_cast<std::size_t>(r)] = true;
        for (std::size_t id = program_.nodes.size(); id-- > 0;) {
            if (!live_[id]) continue;
            const ir::Node& n = program_.nodes[id];
            if (n.kind == ir::NodeKind::Binding) live_[static_cast<std::size_t>(bound(static_cast<int>(id)))] = true;
            for (int i = 0; i < n.arity; ++i) live_[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])] = true;
        }
    }
    int bound(int id) const { return program_.bindings[static_cast<std::size_t>(program_.node(id).slot)].node; }

    // The stage of a node: after how many passes over the row its value (per row) or every value it
    // depends on (per element) is known. A row reduction's pass is its argument's stage + 1.
    void stages() {
        stage_.assign(program_.nodes.size(), 0);
        const auto known = [&](int arg) { return stage_[static_cast<std::size_t>(arg)]; };
        for (std::size_t id = 0; id < program_.nodes.size(); ++id) {
            int s = walk_stage(program_, static_cast<int>(id), known, k_reduction(static_cast<int>(id)));
            // Squared deviations from a mean are summed in the mean's own pass (centered_).
            if (const auto m = centered_.find(static_cast<int>(id)); m != centered_.end()) s = stage_[static_cast<std::size_t>(m->second)];
            stage_[id] = s;
        }
    }

    // What a node stands for: through bindings, and through detach where `detached` (the mean in
    // var's expansion is detach(mean(e, -1)): the same value).
    int resolved(int id, bool detached = false) const {
        for (;;) {
            const ir::Node& n = program_.node(id);
            if (n.kind == ir::NodeKind::Binding) id = bound(id);
            else if (detached && n.kind == ir::NodeKind::Apply && n.fn == Builtin::Detach) id = n.args[0];
            else return id;
        }
    }

    // Whether two nodes compute the same value: one node through bindings, or the same builtin,
    // reduction, take, input or constant of arguments that are. (Not the printed text: before the
    // per-row values are named the printer cannot print them.)
    bool same_value(int a, int b) const {
        a = resolved(a);
        b = resolved(b);
        if (a == b) return true;
        const ir::Node& x = program_.node(a);
        const ir::Node& y = program_.node(b);
        if (x.kind != y.kind || x.fn != y.fn || x.slot != y.slot || x.arity != y.arity || x.type != y.type) return false;
        if (x.kind == ir::NodeKind::Constant) return x.value == y.value || (x.value != x.value && y.value != y.value);
        if (x.kind != ir::NodeKind::Apply && x.kind != ir::NodeKind::RowReduce && x.kind != ir::NodeKind::Take &&
            x.kind != ir::NodeKind::Input && x.kind != ir::NodeKind::Param)
            return false;
        const int args = x.kind == ir::NodeKind::Apply ? x.arity : x.kind == ir::NodeKind::Take ? 2 : x.kind == ir::NodeKind::RowReduce ? 1 : 0;
        for (int i = 0; i < args; ++i)
            if (!same_value(x.args[static_cast<std::size_t>(i)], y.args[static_cast<std::size_t>(i)])) return false;
        return true;
    }

    // sum((e - m)^2, -1) and mean((e - m)^2, -1) with m = mean(e, -1) (either order of the
    // difference; the square as ^2 or d * d): computed in m's pass by one accumulator of both
    // (centered_accumulator), instead of a pass of their own after it. Not side by side (the
    // accumulator is larger than the 16 bytes a side-by-side team's shared memory holds for one).
    void find_centered() {
        if (spec_.side_by_side) return;
        std::set<int> means_taken;
        for (std::size_t i = 0; i < program_.nodes.size(); ++i) {
            const ir::Node& r = program_.nodes[i];
            if (!live_[i] || !row_walk(static_cast<int>(i))) continue;
            const auto how = static_cast<RowReduction>(r.slot);
            if (how != RowReduction::Sum && how != RowReduction::Mean) continue;
            const ir::Node& square = program_.node(resolved(r.args[0]));
            int difference = -1;
            if (square.kind == ir::NodeKind::Apply && square.fn == Builtin::Pow &&
                program_.node(square.args[1]).kind == ir::NodeKind::Constant && program_.node(square.args[1]).value == 2.0)
                difference = resolved(square.args[0]);
            if (square.kind == ir::NodeKind::Apply && square.fn == Builtin::Mul &&
                resolved(square.args[0]) == resolved(square.args[1]))
                difference = resolved(square.args[0]);
            if (difference < 0) continue;
            const ir::Node& d = program_.node(difference);
            if (d.kind != ir::NodeKind::Apply || d.fn != Builtin::Sub) continue;
            for (int side = 0; side < 2; ++side) {
                const int mean = resolved(d.args[static_cast<std::size_t>(side)], true);
                const int element = d.args[static_cast<std::size_t>(1 - side)];
                const ir::Node& m = program_.node(mean);
                // Not a mean that is itself the squared deviations from another (var((x - mean(x, -1))^2,
                // -1)): that one is summed in its own mean's walk, and this one's mean would be two
                // accumulators' at once.
                if (m.kind != ir::NodeKind::RowReduce || static_cast<RowReduction>(m.slot) != RowReduction::Mean ||
                    means_taken.count(mean) || centered_.count(mean))
                    continue;
                // The same argument: one node, or two of the same form (x written twice is two nodes).
                if (!same_value(m.args[0], element)) continue;
                centered_[static_cast<int>(i)] = mean;
                means_taken.insert(mean);
                break;
            }
        }
    }

    // One walk over the row: the row reductions it computes and whether it does the element work.
    struct PassPlan {
        int number = 0;
        std::vector<int> reductions;
        bool elements = false;
        std::vector<int> loaded;  // kernel indices of the inputs it reads along the row
        std::set<int> bindings;   // the element bindings its work at a column defines
        // With the element work: a map's body per element, the derivatives written per element
        // (indices into program.derivatives) and the totals of per-element values (into totals_).
        bool map_elements = false;
        std::vector<std::size_t> grads;
        std::vector<std::size_t> element_totals;
        std::set<int> hot;  // the index inputs whose "this column is the index" its work at a column uses
    };

    // With a row cache (a block mostly alone on its SM), per-row values of stage 0 the first pass
    // does not need (cross-entropy's x[y]: the row's result needs it) come after that pass's
    // walk, so that the index's load is in flight while the walk runs instead of holding the
    // row's start; a take among them is filled before the walk's reductions combine
    // (lj::Team::all_reduce), its own load in flight across that. H200, round 41: cross-entropy
    // value + gradient 16384 x 32768 59.8% -> 63.2% of the floor, 32768 x 4096 75.2% -> 77.9%.
    // Without a cache (several blocks an SM hide the row's start) they stay first: the forward
    // 4096 x 131072 fell from 92.0% to 88.8% of the read roofline with them after the walk.
    // `first_needs_`: what is defined before the first pass, closed under what it uses (per_row_needs
    // follows every argument): what the pass uses, and what a deferred take's argument uses
    // (`(x * s)[y]`, s one value per row), since the take is filled inside the pass; a take
    // among those is not deferred.
    void find_deferred_takes() {
        defer_takes_ = spec_.row_cache_columns > 0 && !passes_.empty();
        if (defer_takes_) first_needs_ = per_row_needs(pass_roots(passes_[0].reductions, passes_[0].elements));
        for (bool grew = true; grew;) {
            grew = false;
            deferred_takes_.clear();
            for (std::size_t i = 0; i < program_.nodes.size(); ++i)
                if (live_[i] && per_row_[i] && stage_[i] == 0 && program_.nodes[i].kind == ir::NodeKind::Take &&
                    !defined_first(static_cast<int>(i)))
                    deferred_takes_.insert(static_cast<int>(i));
            for (int id : deferred_takes_) {
                const int argument = program_.node(id).args[0];
                for (int need : per_row_needs(std::span<const int>(&argument, 1))) grew = first_needs_.insert(need).second || grew;
            }
        }
    }
    // Whether per-row value `id` is defined before the first pass (else after its walk).
    bool defined_first(int id) const { return !defer_takes_ || first_needs_.count(id) > 0; }

    // The passes over the row, in order, and which of their inputs more than one reads (the row
    // cache's, kept by the first pass that reads them where the spec has a cache).
    void plan_passes() {
        int last_pass = 0;
        for (std::size_t id = 0; id < program_.nodes.size(); ++id)
            if (live_[id] && row_walk(static_cast<int>(id))) last_pass = std::max(last_pass, stage_[id]);
        const int elements = element_pass();
        last_pass = std::max(last_pass, elements);
        std::map<int, int> reads;  // kernel index -> passes reading it
        for (int p = 1; p <= last_pass; ++p) {
            PassPlan plan;
            plan.number = p;
            plan.elements = elements == p;
            for (std::size_t id = 0; id < program_.nodes.size(); ++id)
                if (live_[id] && row_walk(static_cast<int>(id)) && stage_[id] == p)
                    plan.reductions.push_back(static_cast<int>(id));
            if (plan.reductions.empty() && !plan.elements) continue;
            std::set<int> inputs;
            const std::vector<int> roots = pass_roots(plan.reductions, plan.elements);
            element_needs(roots, inputs, plan.bindings);
            walk_uses(roots, false, [&](int id) {
                if (program_.node(id).kind == ir::NodeKind::OneHot) plan.hot.insert(program_.node(program_.node(id).args[0]).slot);
            });
            plan.loaded.assign(inputs.begin(), inputs.end());
            if (plan.elements) {
                plan.map_elements = program_.is_map() && !per_row_[static_cast<std::size_t>(program_.body)];
                plan.grads = element_gradients();
                for (std::size_t k = 0; k < totals_.size(); ++k)
                    if (per_element(totals_[k].argument)) plan.element_totals.push_back(k);
            }
            for (int k : plan.loaded) {
                if (reads[k]++ == 0) first_pass_[k] = p;
                last_pass_[k] = p;
            }
            passes_.push_back(std::move(plan));
        }
        for (const auto& [k, count] : reads)
            if (count > 1) read_again_.push_back(k);
        if (spec_.row_cache_columns > 0) {
            if (static_cast<int>(read_again_.size()) != spec_.row_cache_inputs)
                throw InternalError("the kernel spec's row cache does not match the program's passes");
            for (std::size_t i = 0; i < read_again_.size(); ++i) cache_slot_[read_again_[i]] = static_cast<int>(i);
            // The row prefetch: the last walk to read a cached input copies the next row into every
            // slot (each slot is free once its input's last walk has read it).
            if (spec_.row_prefetch) {
                if (spec_.side_by_side || spec_.row_split || spec_.row_shift)
                    throw InternalError("a row prefetch for rows side by side, of two strides or shifted");
                for (int k : read_again_) {
                    if (spec_.inner_strides[static_cast<std::size_t>(k)] != 1 ||
                        (!spec_.input_dtypes.empty() && spec_.input_dtypes[static_cast<std::size_t>(k)] != spec_.compute))
                        throw InternalError("a row prefetch of an input the cache does not keep as it is");
                    refill_pass_ = std::max(refill_pass_, last_pass_.at(k));
                }
            }
        } else if (spec_.row_prefetch) {
            throw InternalError("a row prefetch without a row cache");
        }
        if (spec_.row_walk_ahead && (!spec_.row_prefetch || !walks_ahead()))
            throw InternalError("a walk ahead where the row before cannot do the first walk");
    }

    // What a pass evaluates at each column: its reductions' arguments and, with the element work,
    // the gradients written per element, a map's body, the totals of per-element values.
    std::vector<int> pass_roots(const std::vector<int>& reductions, bool elements) const {
        std::vector<int> roots;
        for (int id : reductions)
            if (!centered_.count(id)) roots.push_back(program_.node(id).args[0]);  // a centered one adds its mean's
        if (!elements) return roots;
        for (std::size_t g : element_gradients()) roots.push_back(program_.derivatives[g].node);
        if (program_.is_map() && !per_row_[static_cast<std::size_t>(program_.body)]) roots.push_back(program_.body);
        for (const auto& t : totals_)
            if (per_element(t.argument)) roots.push_back(t.argument);
        return roots;
    }

    // Element-level work (a map's per-element body, per-element totals) goes into the first pass
    // after everything it needs: a pass of row reductions if there is one then, else a pass of its own.
    int element_pass() const {
        int pass = 0;
        bool any = false;
        if (program_.is_map() && !per_row_[static_cast<std::size_t>(program_.body)]) {
            any = true;
            pass = std::max(pass, stage_[static_cast<std::size_t>(program_.body)] + 1);
        }
        for (const auto& t : totals_) {
            if (!per_element(t.argument)) continue;
            any = true;
            pass = std::max(pass, stage_[static_cast<std::size_t>(t.argument)] + 1);
        }
        for (std::size_t g : element_gradients()) {  // written per element, even where one per row
            any = true;
            pass = std::max(pass, stage_[static_cast<std::size_t>(program_.derivatives[g].node)] + 1);
        }
        return any ? pass : 0;
    }

    // How derivative g is written (KernelSpec::row_gradients; a spec made by hand may leave it empty).
    RowGradient written(std::size_t g) const {
        return g < spec_.row_gradients.size() ? spec_.row_gradients[g] : RowGradient::Elements;
    }
    // What the kernel computes for derivative g: a scattered one's value per row, else its node.
    int kernel_node(std::size_t g) const {
        const ir::Derivative& d = program_.derivatives[g];
        if (written(g) != RowGradient::Scattered) return d.node;
        if (!d.scatters()) throw InternalError("a scattered gradient whose derivative has no per-row form");
        return d.scatter_node;
    }

    // The derivatives written at every element (the others once per row: KernelSpec::row_gradients).
    std::vector<std::size_t> element_gradients() const {
        std::vector<std::size_t> out;
        for (std::size_t g = 0; g < program_.derivatives.size(); ++g)
            if (written(g) == RowGradient::Elements) out.push_back(g);
        return out;
    }

    std::string final_function() const {
        std::string out = "    // The results from the totals (each already divided by its divisor), in float64.\n";
        out += fmt::format("    static constexpr int kResults = {};\n", program_.result_count());
        out += "    __device__ __forceinline__ void final(const double (&t)[kTotals], double (&r)[kResults]) const {\n";
        if (program_.reduction != ir::Reduction::Composite) {
            out += "        r[0] = t[0];\n    }\n";
            return out;
        }
        ExpressionPrinter final_printer(program_, PrintStyle::Cuda64);
        for (std::size_t k = 0; k < totals_.size(); ++k) final_printer.name(totals_[k].node, fmt::format("t[{}]", k));
        for (const auto& p : program_.params)
            out += fmt::format("        const double {} = {}_f64;\n", cuda_param_name(p.name), cuda_param_name(p.name));
        // Bindings the results use, in order (those of per-row values are never reached from here).
        const std::vector<int> results = program_.result_nodes();
        std::vector<bool> used(program_.bindings.size(), false);
        std::vector<int> stack{program_.body};
        stack.insert(stack.end(), results.begin(), results.end());
        std::vector<bool> seen(program_.nodes.size(), false);
        while (!stack.empty()) {
            const int id = stack.back();
            stack.pop_back();
            if (seen[static_cast<std::size_t>(id)]) continue;
            seen[static_cast<std::size_t>(id)] = true;
            const ir::Node& n = program_.node(id);
            if (n.kind == ir::NodeKind::Total) continue;
            if (n.kind == ir::NodeKind::Binding) {
                used[static_cast<std::size_t>(n.slot)] = true;
                stack.push_back(bound(id));
            }
            for (int i = 0; i < n.arity; ++i) stack.push_back(n.args[static_cast<std::size_t>(i)]);
        }
        for (const auto& r : program_.results) used[static_cast<std::size_t>(r.binding)] = true;
        for (std::size_t slot = 0; slot < program_.bindings.size(); ++slot) {
            const auto& b = program_.bindings[slot];
            if (!used[slot]) continue;
            // print, not define: a binding of a whole-tensor reduction (`a = mean(x)`) is its total, named t[k].
            out += fmt::format("        const double {} = {};\n", cuda_binding_name(b.name),
                               without_outer_parens(final_printer.print(b.node)));
        }
        if (program_.results.empty()) {
            out += fmt::format("        r[0] = {};\n", without_outer_parens(final_printer.print(program_.body)));
        } else {
            for (std::size_t k = 0; k < program_.results.size(); ++k)
                out += fmt::format("        r[{}] = {};\n", k,
                                   cuda_binding_name(program_.bindings[static_cast<std::size_t>(program_.results[k].binding)].name));
        }
        out += "    }\n";
        return out;
    }

    // Column j's offset from the row's first element along `strides` (an array of the rank's
    // strides): j times the last one, or in a row of two strides lj::column_offset.
    std::string column(std::string_view strides) const {
        if (spec_.row_split) return fmt::format("lj::column_offset<R>(j, runs, {})", strides);
        return fmt::format("j * {}[R - 1]", strides);
    }
    // Column j of a row the walk writes (output, gradients) or copies into the row cache (not a
    // take's column): stride 1 where the kernel walks vectors (lj::along_row).
    std::string walked_column(std::string_view strides) const {
        if (spec_.row_split) return column(strides);
        return fmt::format("lj::along_row<VW>(j, {}[R - 1])", strides);
    }

    std::string value_type(int id) const { return program_.node(id).type == ValueType::Bool ? "bool" : "Value"; }
    std::string print(int id) const { return without_outer_parens(printer_.print(id)); }

    // Every node the expressions `roots` use, each once, through bindings; `visit(id)` for each. Past
    // a per-row value only where `through_per_row` (an element's work stops there: the row has it).
    template <class Visit>
    void walk_uses(std::span<const int> roots, bool through_per_row, const Visit& visit) const {
        std::vector<bool> seen(program_.nodes.size(), false);
        std::vector<int> stack(roots.begin(), roots.end());
        while (!stack.empty()) {
            const int id = stack.back();
            stack.pop_back();
            const bool beside = per_row_[static_cast<std::size_t>(id)] || k_level_[static_cast<std::size_t>(id)];
            if (seen[static_cast<std::size_t>(id)] || (!through_per_row && beside)) continue;
            seen[static_cast<std::size_t>(id)] = true;
            visit(id);
            const ir::Node& n = program_.node(id);
            // What x[k] scatters back is a value at the column (0 in the element pass); its K values
            // are the scatter's own work (k_scatter).
            if (!through_per_row && n.kind == ir::NodeKind::ScatterAdd) continue;
            if (n.kind == ir::NodeKind::Binding) stack.push_back(bound(id));
            for (int i = 0; i < n.arity; ++i) stack.push_back(n.args[static_cast<std::size_t>(i)]);
        }
    }

    // The element inputs (kernel indices) and element bindings the expressions `roots` need at one
    // column, stopping at per-row values.
    void element_needs(std::span<const int> roots, std::set<int>& inputs, std::set<int>& bindings) const {
        walk_uses(roots, false, [&](int id) {
            const ir::Node& n = program_.node(id);
            if (n.kind == ir::NodeKind::Input) inputs.insert(kernel_index_.at(n.slot));
            if (n.kind == ir::NodeKind::Binding) bindings.insert(id);
        });
    }

    // The per-row nodes the expressions `roots` use, through bindings and per-row values alike.
    std::set<int> per_row_needs(std::span<const int> roots) const {
        std::set<int> out;
        walk_uses(roots, true, [&](int id) {
            if (per_row_[static_cast<std::size_t>(id)]) out.insert(id);
        });
        return out;
    }

    // Definitions of the element bindings among `binding_nodes`, in program order (each binding once:
    // several Binding nodes may name it).
    std::string element_bindings(const std::set<int>& binding_nodes, std::string_view indent) const {
        std::set<int> slots;
        for (int id : binding_nodes) slots.insert(program_.node(id).slot);
        std::string out;
        for (int slot : slots) {
            const auto& b = program_.bindings[static_cast<std::size_t>(slot)];
            out += fmt::format("{}const {} {} = {};\n", indent, value_type(b.node), cuda_binding_name(b.name),
                               print(b.node));
        }
        return out;
    }

    // The row's own values (stage 0): an index, loaded as an integer for its takes and as a value
    // too where the program also computes with it (y != -100); an [N, 1] input's value. K inputs are
    // loaded at each of the K (k_values).
    struct RowValue {
        int k;  // the kernel's input
        bool index, value;
    };
    const std::vector<RowValue>& row_values() const { return row_values_; }
    std::vector<RowValue> row_values_;  // (found once, by the constructor)
    std::vector<RowValue> find_row_values() const {
        std::vector<bool> value_use(program_.inputs.size(), false);
        auto use_value = [&](int id) {
            const ir::Node& node = program_.node(id);
            if (node.kind == ir::NodeKind::Input) value_use[static_cast<std::size_t>(node.slot)] = true;
        };
        for (std::size_t id = 0; id < program_.nodes.size(); ++id) {
            if (!live_[id]) continue;
            const ir::Node& user = program_.nodes[id];
            // OneHot and InRow compare the integer index.
            if (user.kind == ir::NodeKind::OneHot || user.kind == ir::NodeKind::InRow) continue;
            for (int a = 0; a < user.arity; ++a)
                if (!(user.kind == ir::NodeKind::Take && a == 1)) use_value(user.args[static_cast<std::size_t>(a)]);
        }
        for (const auto& b : program_.bindings) use_value(b.node);
        if (program_.is_map())
            for (int r : program_.result_nodes()) use_value(r);
        for (const auto& t : totals_) use_value(t.argument);
        std::vector<RowValue> values;
        for (std::size_t k = 0; k < slots_.size(); ++k) {
            const auto slot = static_cast<std::size_t>(slots_[k]);
            if (k_input_[slot]) continue;
            const bool per_row = spec_.inner_strides[k] == 0 || index_[slot];
            if (index_[slot] || (per_row && value_use[slot]))
                values.push_back({static_cast<int>(k), static_cast<bool>(index_[slot]), per_row && value_use[slot]});
        }
        return values;
    }
    // Walked ahead (KernelSpec::row_walk_ahead), the row before loads a row's own values into Ahead,
    // so that they are in registers at the row's start: loaded there, an index held the row's
    // gradient walk (each tile finds its column) and its take's load behind it (H200, round 182: the
    // hand-written schedule with the index loaded at the row's start and the take read from memory
    // 80.3-80.7% of the copy rate, 94.0-94.9% without). `offset(k)`: input k's offset of that row.
    template <class Offset>
    std::string row_values_ahead(Offset offset, std::string_view indent) const {
        std::string out;
        for (const RowValue& r : row_values()) {
            if (r.index)
                out += fmt::format("{}ahead.index{} = lj::load_index(dtype({}), in.ptr[{}], {});\n", indent, r.k, r.k, r.k, offset(r.k));
            if (r.value)
                out += fmt::format("{}ahead.value{} = lj::load1<Value>(dtype({}), in.ptr[{}], {});\n", indent, r.k, r.k, r.k,
                                   offset(r.k));
        }
        return out;
    }

    std::string input_name(int kernel_index) const {
        return cuda_input_name(program_.inputs[static_cast<std::size_t>(slots_[static_cast<std::size_t>(kernel_index)])]);
    }
    std::string index_name(int slot) const { return "i_" + program_.inputs[static_cast<std::size_t>(slot)]; }
    // "This element's column is index `slot`'s" (OneHot), a bool each place that prints element work
    // declares (hot_columns): in a tile from the index's offset in it (tile_offsets), else from `col`.
    std::string hot_name(int slot) const { return "hot_" + program_.inputs[static_cast<std::size_t>(slot)]; }
    std::string tile_offset_name(int slot) const { return "tile_" + program_.inputs[static_cast<std::size_t>(slot)]; }
    std::string tile_offsets(const std::set<int>& slots, std::string_view indent, std::string_view vw, std::string_view tiles) const {
        std::string out;
        for (int slot : slots)
            out += fmt::format("{}const int {} = lj::offset_in_tile({}, j0, (long long){} * Team::kTeam * {});\n", indent,
                               tile_offset_name(slot), index_name(slot), tiles, vw);
        return out;
    }
    std::string hot_columns(const std::set<int>& slots, std::string_view indent, std::string_view tile_vw = {}) const {
        std::string out;
        for (int slot : slots) {
            const std::string is = tile_vw.empty() ? fmt::format("col == {}", index_name(slot))
                                                   : fmt::format("{} == (int)(u * Team::kTeam * {} + q)", tile_offset_name(slot), tile_vw);
            out += fmt::format("{}const bool {} = {};\n{}(void){};\n", indent, hot_name(slot), is, indent, hot_name(slot));
        }
        return out;
    }

    // Per-row values of stage `s`, in node order: takes, reduced values (`reduced` holds their
    // accumulators' names) and what is computed from them; those `only` allows, if given.
    std::string stage_definitions(int s, const std::map<int, std::string>& reduced,
                                  const std::function<bool(int)>& only = {}) const {
        std::string out;
        for (std::size_t i = 0; i < program_.nodes.size(); ++i) {
            const int id = static_cast<int>(i);
            if (!live_[i] || !per_row_[i] || stage_[i] != s || (only && !only(id))) continue;
            const ir::Node& n = program_.node(id);
            switch (n.kind) {
                case ir::NodeKind::Apply:
                    out += fmt::format("{}const {} n{} = {};\n", kIndent, value_type(id), id, without_outer_parens(printer_.define(id)));
                    break;
                case ir::NodeKind::Binding: {
                    const auto& b = program_.bindings[static_cast<std::size_t>(n.slot)];
                    if (defined_bindings_.insert(n.slot).second)
                        out += fmt::format("{}const {} {} = {};\n", kIndent, value_type(id), cuda_binding_name(b.name), print(b.node));
                    break;
                }
                case ir::NodeKind::RowReduce:
                    out += k_reduction(id) ? k_reduce(id) : fmt::format("{}const Value n{} = {};\n", kIndent, id, reduced.at(id));
                    break;
                case ir::NodeKind::Take: out += deferred_takes_.count(id) ? std::string() : take(id); break;
                default: break;
            }
        }
        return out;
    }

    // A row reduction of K values per row (sum(q * x[k], -1)): a walk over the K with the team's lanes,
    // not a pass over the row. row_walk: one that is a pass.
    bool k_reduction(int id) const {
        const ir::Node& n = program_.node(id);
        return n.kind == ir::NodeKind::RowReduce && k_level_[static_cast<std::size_t>(n.args[0])];
    }
    bool row_walk(int id) const { return program_.node(id).kind == ir::NodeKind::RowReduce && !k_reduction(id); }
    bool per_element(int id) const { return !per_row_[static_cast<std::size_t>(id)] && !k_level_[static_cast<std::size_t>(id)]; }

    std::string k_walk_begin(std::string_view indent) const {
        return fmt::format("{}for (long long jk = (long long)Team::lane(); jk < K; jk += Team::kTeam) {{\n", indent);
    }
    // Where value `j` (a variable of the kernel: jk) of this row's K lies in kernel input k (its stride
    // between K values is carried one past the last dimension: plans.cpp).
    static std::string k_offset(int k, std::string_view j = "jk") {
        return fmt::format("base[{}] + {} * in.strides[{}][R]", k, j, k);
    }

    // Inside a walk over the K values (jk): the K-level nodes `roots` use, in node order: indices
    // loaded as integers, inputs of K values at jk, takes filled from their columns (nan outside
    // [0, C)), the rest computed. Per-row values are the row's, defined before.
    std::string k_values(std::span<const int> roots, std::string_view indent) const {
        std::set<int> needed, indices, as_values;
        std::vector<int> stack(roots.begin(), roots.end());
        for (int r : roots)
            if (program_.node(r).kind == ir::NodeKind::Input) as_values.insert(r);
        while (!stack.empty()) {
            const int id = stack.back();
            stack.pop_back();
            if (!k_level_[static_cast<std::size_t>(id)] || !needed.insert(id).second) continue;
            const ir::Node& n = program_.node(id);
            if (n.kind == ir::NodeKind::Binding) {
                stack.push_back(bound(id));
                if (program_.node(bound(id)).kind == ir::NodeKind::Input) as_values.insert(bound(id));
            }
            if (n.kind == ir::NodeKind::Take) {  // its argument is evaluated at the column
                indices.insert(program_.node(n.args[1]).slot);
                continue;
            }
            for (int i = 0; i < n.arity; ++i) {
                const int a = n.args[static_cast<std::size_t>(i)];
                stack.push_back(a);
                if (program_.node(a).kind == ir::NodeKind::Input) as_values.insert(a);
            }
        }
        std::string out;
        std::set<int> loaded, bound_slots;  // input and binding slots (a program may hold several nodes of one)
        for (int slot : indices) {
            const int k = kernel_index_.at(slot);
            out += fmt::format("{}const long long {} = lj::load_index(dtype({}), in.ptr[{}], {});\n", indent,
                               index_name(slot), k, k, k_offset(k));
        }
        for (int id : needed) {
            const ir::Node& n = program_.node(id);
            switch (n.kind) {
                case ir::NodeKind::Input:
                    if (as_values.count(id) && loaded.insert(n.slot).second) {
                        const int k = kernel_index_.at(n.slot);
                        out += fmt::format("{}const Value {} = lj::load1<Value>(dtype({}), in.ptr[{}], {});\n", indent,
                                           input_name(k), k, k, k_offset(k));
                    }
                    break;
                case ir::NodeKind::Take:
                    out += fmt::format("{}Value n{} = (Value)__int_as_float(0x7fffffff);  // nan: no such column\n", indent, id);
                    out += take_fill(id, indent);
                    break;
                case ir::NodeKind::Apply:
                    out += fmt::format("{}const {} n{} = {};\n", indent, value_type(id), id, without_outer_parens(printer_.define(id)));
                    break;
                case ir::NodeKind::Binding: {
                    if (!bound_slots.insert(n.slot).second) break;
                    const auto& b = program_.bindings[static_cast<std::size_t>(n.slot)];
                    out += fmt::format("{}const {} {} = {};\n", indent, value_type(id), cuda_binding_name(b.name), print(b.node));
                    break;
                }
                default: break;
            }
        }
        return out;
    }

    // The row reduction of K values `id`, defined as n<id> for what follows.
    std::string k_reduce(int id) const {
        const ir::Node& n = program_.node(id);
        const auto how = static_cast<RowReduction>(n.slot);
        const std::string in1 = std::string(kIndent) + "    ", in2 = in1 + "    ";
        const int root = n.args[0];
        std::string out = fmt::format("{}Value r{}_;\n{}{{  // {} over the row's K values\n", kIndent, id, kIndent,
                                      row_reduction_info(how).name);
        out += fmt::format("{}{} a{};\n", in1, accumulator_type(how), id);
        out += k_walk_begin(in1);
        out += k_values(std::span<const int>(&root, 1), in2);
        out += fmt::format("{}a{}.add((Value)({}), jk);\n{}}}\n", in2, id, print(root), in1);
        out += fmt::format("{}a{} = Team::all_reduce(a{});\n", in1, id, id);
        out += fmt::format("{}r{}_ = {};\n{}}}\n", in1, id, accumulated_value(how, fmt::format("a{}", id)), kIndent);
        out += fmt::format("{}const Value n{} = r{}_;\n", kIndent, id, id);
        return out;
    }

    // After the row's last stage: totals of K values per row (each lane adds its own, as per-element
    // totals), and the gradients of inputs of K values per row (RowGradient::PerK: row r's K at
    // r * K in the input's own contiguous shape).
    std::string k_tail() const {
        std::vector<int> roots;
        std::string body;
        const std::string in1 = std::string(kIndent) + "    ";
        for (std::size_t k = 0; k < totals_.size(); ++k)
            if (k_level_[static_cast<std::size_t>(totals_[k].argument)]) {
                roots.push_back(totals_[k].argument);
                body += fmt::format("{}totals[{}] += (double)({});\n", in1, k, print(totals_[k].argument));
            }
        for (std::size_t g = 0; g < program_.derivatives.size(); ++g)
            if (written(g) == RowGradient::PerK) {
                const int node = program_.derivatives[g].node;
                roots.push_back(node);
                body += fmt::format("{}lj::store1<Value>(grad_dtype({}), grads.ptr[{}], row * K + jk, (Value)({}));\n", in1,
                                    g, g, print(node));
            }
        if (body.empty()) return {};
        return fmt::format("{}// the row's K values: totals and gradients of them\n", kIndent) + k_walk_begin(kIndent) +
               k_values(roots, in1) + body + fmt::format("{}}}\n", kIndent);
    }

    // x[k]'s gradient, scattered back along the row (ir::NodeKind::ScatterAdd): the element pass
    // wrote every column as if nothing were gathered (the scatter as 0); once every lane's stores are
    // done (Team::barrier), the lane of the first of each gathered column's K values adds that
    // column's values (repeated columns in index order) and writes the derivatives there again.
    std::string k_scatter() {
        std::vector<int> scatters;
        for (std::size_t id = 0; id < program_.nodes.size(); ++id)
            if (live_[id] && program_.nodes[id].kind == ir::NodeKind::ScatterAdd) scatters.push_back(static_cast<int>(id));
        if (scatters.empty()) return {};
        std::vector<std::size_t> grads;
        std::vector<int> roots;
        for (std::size_t g : element_gradients()) {
            const int node = program_.derivatives[g].node;
            const std::vector<int> one{node};
            const auto reached = reached_nodes(program_, one);
            if (std::any_of(scatters.begin(), scatters.end(), [&](int id) { return reached[static_cast<std::size_t>(id)]; })) {
                grads.push_back(g);
                roots.push_back(node);
            }
        }
        const int slot = program_.node(program_.node(scatters.front()).args[1]).slot;  // one index (choose_by_rows)
        const int k = kernel_index_.at(slot);
        const std::string index = index_name(slot);
        const std::string in1 = std::string(kIndent) + "    ", in2 = in1 + "    ", in3 = in2 + "    ";
        std::string out = fmt::format("{}// x[k]'s gradient at the gathered columns (k_scatter)\n{}Team::barrier();\n",
                                      kIndent, kIndent);
        out += k_walk_begin(kIndent);
        out += fmt::format("{}const long long at = lj::load_index(dtype({}), in.ptr[{}], {});\n", in1, k, k, k_offset(k));
        out += fmt::format("{}if (at < 0 || at >= C) continue;\n", in1);
        // Whether an earlier value gathers this column too (its lane writes it) or a later one (added
        // here): every index of the row read once, the loads independent of each other.
        const std::string index_at = fmt::format("lj::load_index(dtype({}), in.ptr[{}], {})", k, k, k_offset(k, "jj"));
        out += fmt::format("{}bool first = true, repeated = false;\n{}#pragma unroll 8\n", in1, in1);
        out += fmt::format("{}for (long long jj = 0; jj < K; ++jj) {{\n{}const bool same = {} == at;\n", in1, in2, index_at);
        out += fmt::format("{}first = first && !(same && jj < jk);\n{}repeated = repeated || (same && jj > jk);\n{}}}\n",
                           in2, in2, in1);
        out += fmt::format("{}if (!first) continue;\n", in1);
        std::vector<int> values;
        for (int id : scatters) values.push_back(program_.node(id).args[0]);
        for (int id : scatters) out += fmt::format("{}Value s{} = 0;\n", in1, id);
        // This value's contributions, then those of the later values of the same column, in order.
        out += fmt::format("{}{{\n", in1);
        out += k_values(values, in2);
        for (int id : scatters) out += fmt::format("{}s{} += (Value)({});\n", in2, id, print(program_.node(id).args[0]));
        out += fmt::format("{}}}\n", in1);
        out += fmt::format("{}if (repeated) {{\n{}for (long long jj = jk + 1; jj < K; ++jj) {{\n", in1, in2);
        out += fmt::format("{}if ({} != at) continue;\n", in3, index_at);
        out += fmt::format("{}const long long jk = jj;  // the column's next value\n", in3);
        out += k_values(values, in3);
        for (int id : scatters) out += fmt::format("{}s{} += (Value)({});\n", in3, id, print(program_.node(id).args[0]));
        out += fmt::format("{}}}\n{}}}\n", in2, in1);
        for (int id : scatters) printer_.name(id, fmt::format("s{}", id));
        std::set<int> inputs, bindings;
        element_needs(roots, inputs, bindings);
        out += fmt::format("{}{{\n{}const long long j = at, col = j;\n", in1, in2);
        out += hot_columns(hot_slots_, in2);
        for (int i : inputs)
            out += fmt::format("{}const Value {} = lj::load1<Value>(dtype({}), in.ptr[{}], base[{}] + {});\n", in2,
                               input_name(i), i, i, i, column(fmt::format("in.strides[{}]", i)));
        out += element_bindings(bindings, in2);
        for (std::size_t g : grads)
            out += fmt::format("{}lj::store1<Value>(grad_dtype({}), grads.ptr[{}], grad_base + {}, (Value)({}));\n", in2, g,
                               g, column("grads.strides"), print(program_.derivatives[g].node));
        out += fmt::format("{}}}\n{}}}\n", in1, kIndent);
        return out;
    }

    // The takes of a row walked ahead (KernelSpec::row_walk_ahead): the row before kept the row in the
    // cache, each lane its own columns, so the lane whose columns hold y reads x[y] there (its own
    // stores: no barrier needed) and leaves the take in shared memory for the team, before the
    // merges; the others read it after them (takes_from_owners). Read from memory by every lane at
    // the row's start instead (stop 60's walk ahead), the take waited on memory once a row: H200,
    // cross-entropy value + gradient 16384 x 32768 at 1024 threads, a hand-written kernel with that
    // read 80.3-80.7% of the copy rate, with the take picked out of the walk 94.0-94.9% (round 182,
    // docs/results/issue-31/stop61). A slot a take and a row parity: the owner of the row after
    // next writes it only after the next row's merges, which every lane reaches after its read.
    // The parity is carried in Ahead, flipped a row: as `row / row_step & 1`, a 64-bit division's
    // call made every lane wait at each row's start for its loads in flight (the index; ncu, round
    // 188, docs/results/issue-31/stop62).
    // The lane of column y: vectors of VW columns go to the team's lanes in turn (walk, tile).
    std::string takes_by_owner(std::string_view indent) const {
        const std::string in1 = std::string(indent) + "    ";
        std::string out = fmt::format("{}auto& takes_ = take_slots<Team>();  // (takes_by_owner)\n", indent);
        out += fmt::format("{}const int take_parity_ = ahead.take_parity;  // this row's among the team's\n", indent);
        int t = 0;
        for (int id : deferred_takes_) {
            if (picked_take(id)) {  // picked by the row before (ahead_work) or the first walk
                ++t;
                continue;
            }
            const std::string index = take_index(id);
            out += fmt::format("{}if ({} >= 0 && {} < C && Team::lane() == (int)({} / VW % Team::kTeam)) {{\n", indent, index,
                               index, index);
            out += take_value(id, in1, true);
            out += fmt::format("{}takes_[Team::team_in_block()][take_parity_][{}] = n{};\n{}}}\n", in1, t++, id, indent);
        }
        return out;
    }
    // A take picked out of the walk ahead, as the hand-written kernel does: as the row before reads
    // the next row in (ahead_work; the team's first row in first_walk), the lane whose tile holds
    // the next row's column y keeps x[y] in the next row's slot, so that nothing at a row's start
    // waits on the index (round 190, docs/results/issue-31/stop62: 88.2-88.6% of the copy rate
    // against 85.6-86.7%). Where the take is of a cached input itself and its index is loaded a row
    // ahead (row_values_ahead); else its owner reads it at the row's start.
    struct Pick {
        int k;      // the cached input's kernel index
        int index;  // the index's kernel index
    };
    std::optional<Pick> picked_take(int id) const {
        if (!spec_.row_walk_ahead || !deferred_takes_.count(id)) return std::nullopt;
        const ir::Node& take = program_.node(id);
        const ir::Node& argument = program_.node(take.args[0]);
        const ir::Node& index = program_.node(take.args[1]);
        if (argument.kind != ir::NodeKind::Input || index.kind != ir::NodeKind::Input) return std::nullopt;
        std::optional<Pick> pick;
        for (std::size_t k = 0; k < slots_.size(); ++k)
            if (slots_[k] == argument.slot && cache_slot_.count(static_cast<int>(k))) pick = Pick{static_cast<int>(k), -1};
        if (!pick) return std::nullopt;
        for (const RowValue& r : row_values())
            if (r.index && slots_[static_cast<std::size_t>(r.k)] == index.slot) pick->index = r.k;
        if (pick->index < 0) return std::nullopt;
        return pick;
    }
    // The picks at a tile's element (`value(k)`: cached input k's value there), into the row at
    // `parity`'s slots: a whole tile compares the offset in the tile (pick_offsets, before its
    // vectors), a row's last tile the column.
    template <class Value_>
    std::string picks(bool whole, std::string_view parity, Value_ value, std::string_view indent) const {
        std::string out;
        int t = 0;
        for (int id : deferred_takes_) {
            if (const auto pick = picked_take(id))
                out += fmt::format("{}if ({}) take_slots<Team>()[Team::team_in_block()][{}][{}] = {};\n", indent,
                                   whole ? fmt::format("pick{}_ == (int)(u * Team::kTeam * VW + q)", t)
                                         : fmt::format("col == ahead.index{}", pick->index),
                                   parity, t, value(pick->k));
            ++t;
        }
        return out;
    }
    std::string pick_offsets(std::string_view indent) const {
        std::string out;
        int t = 0;
        for (int id : deferred_takes_) {
            if (const auto pick = picked_take(id))
                out += fmt::format("{}const int pick{}_ = lj::offset_in_tile(ahead.index{}, j0, (long long)U * Team::kTeam * VW);\n",
                                   indent, t, pick->index);
            ++t;
        }
        return out;
    }
    std::string takes_from_owners(std::string_view indent) const {
        std::string out = fmt::format("{}Team::after_all_reduce();  // the owners' takes are seen\n", indent);
        int t = 0;
        for (int id : deferred_takes_) {
            const std::string index = take_index(id);
            out += fmt::format("{}if ({} >= 0 && {} < C) n{} = takes_[Team::team_in_block()][take_parity_][{}];\n", indent, index,
                               index, id, t++);
        }
        return out + fmt::format("{}ahead.take_parity ^= 1;  // the team's next row\n", indent);
    }

    // x[y]: the argument evaluated at column y of this row; nan where y is outside [0, C).
    std::string take(int id) const { return take_declaration(id) + take_fill(id, kIndent); }
    std::string take_declaration(int id) const {
        return fmt::format("{}Value n{} = (Value)__int_as_float(0x7fffffff);  // nan: no such column\n", kIndent, id);
    }
    // The index of take `id` as the row names it (i_y).
    std::string take_index(int id) const { return index_name(program_.node(program_.node(id).args[1]).slot); }
    std::string take_fill(int id, std::string_view indent) const {
        const std::string index = take_index(id);
        std::string out = fmt::format("{}if ({} >= 0 && {} < C) {{\n", indent, index, index);
        out += take_value(id, std::string(indent) + "    ", false);
        return out + fmt::format("{}}}\n", indent);
    }
    // Take `id`'s argument at column y (in range) into n`id`. `from_cache`: the cached inputs' values
    // from the row cache where it holds column y (walked ahead: takes_by_owner), the rest from memory.
    std::string take_value(int id, std::string_view indent, bool from_cache) const {
        std::set<int> inputs, bindings;
        const int root = program_.node(id).args[0];
        element_needs(std::span<const int>(&root, 1), inputs, bindings);
        std::string out = fmt::format("{}const long long j = {}, col = j;\n", indent, take_index(id));
        if (from_cache) out += fmt::format("{}const long long jc = Team::template block_column<VW>(j);\n", indent);
        for (int k : inputs) {
            const std::string load =
                fmt::format("lj::load1<Value>(dtype({}), in.ptr[{}], base[{}] + {})", k, k, k, column(fmt::format("in.strides[{}]", k)));
            const auto slot = cache_slot_.find(k);
            if (from_cache && slot != cache_slot_.end())
                out += fmt::format("{}const Value {} = jc < cache_columns ? *Team::cache_at(row_cache, {}, cache_columns, jc) : {};\n",
                                   indent, input_name(k), slot->second, load);
            else
                out += fmt::format("{}const Value {} = {};\n", indent, input_name(k), load);
        }
        out += element_bindings(bindings, indent);
        return out + fmt::format("{}n{} = {};\n", indent, id, print(root));
    }

    // How a tile walks: its vector width and tiles per thread as the kernel names them, where the
    // columns it walks end, and whether the row cache takes part. A row's vectors: VW, U, C (Cb_ in a
    // shifted row, KernelSpec::row_shift). A shifted row's edges: 1, 1, C, without the cache (a few
    // columns, read from memory in every walk).
    struct Walk {
        std::string_view vw = "VW", u = "U", end = "C";
        bool cached = true;
        bool picks = false;  // the team's first walk: its row's picked takes (picked_take)
    };

    // One tile of a pass: U loads of VW columns of each input the pass reads (from the row cache where
    // it holds them), then the element work at each column. `whole`: every u lies in the row (no
    // test per u; the reductions' arguments kept for the whole tile and added at once). `reductions`:
    // the pass's reductions with accumulators of their own (a reduction sharing another's has none).
    std::string tile(const PassPlan& plan, bool whole, const std::string& in3, const std::vector<int>& reductions,
                     const Walk& walk) const {
        const int number = plan.number;
        const std::vector<int>& loaded = plan.loaded;
        const bool map_elements = plan.map_elements;
        const std::vector<std::size_t>& grads = plan.grads;
        const std::vector<std::size_t>& element_totals = plan.element_totals;
        const std::set<int>& bindings = plan.bindings;
        const std::string in4 = in3 + "    ", in5 = in4 + "    ";
        std::string out;
        const auto [vw, tiles, end, cached, first_picks] = walk;
        // The row cache's index of column j: j itself (from the first aligned column in a shifted
        // row), unless blocks of a cluster share the row.
        const std::string_view shifted = spec_.row_shift ? " - shift_" : "";
        auto cached_at = [&](std::string_view indent) {
            return fmt::format("{}const long long jc = Team::template block_column<VW>(j{});\n", indent, shifted);
        };
        // The first walk to read a cached input keeps it in the cache, the later ones read it there;
        // with the row prefetch's copies every walk reads it there (the previous row's last walk
        // copied it in). A walk ahead (KernelSpec::row_walk_ahead) runs the first walk only in the
        // team's first row, which keeps the row as without the prefetch.
        const bool copies = !cache_slot_.empty() && spec_.row_prefetch && !spec_.row_walk_ahead;
        // (walk.cached, not the binding: clang 14 does not capture structured bindings.)
        const auto reads_cache = [&](int k) {
            return walk.cached && cache_slot_.count(k) && (copies || first_pass_.at(k) != number);
        };
        const auto keeps_in_cache = [&](int k) {
            return walk.cached && cache_slot_.count(k) && !copies && first_pass_.at(k) == number;
        };
        const bool refills = cached && copies && number == refill_pass_;
        const bool walks_ahead_here = cached && spec_.row_walk_ahead && number == refill_pass_;
        const bool any_cached = std::any_of(loaded.begin(), loaded.end(), reads_cache);
        const bool any_kept = std::any_of(loaded.begin(), loaded.end(), keeps_in_cache);
        out += tile_offsets(plan.hot, in3, vw, tiles);
        // A whole tile's loads of the next row before its own work; the row's last tile (tested per u)
        // after it: its own loads' tests and the next row's held together cost the kernel registers.
        if (walks_ahead_here && whole) out += ahead_loads(whole, in3);
        // The tile's loads. `all_in_cache`: the whole tile's columns lie in the cache (tested once a
        // tile), so a cached input is read there without a test per u — with the test, the compiler
        // computed each u's address in memory too, predicated off but issued: 14 of the 81
        // instructions a vector of cross-entropy's gradient walk (H200, round 154's SASS).
        auto loads = [&](const std::string& at, bool all_in_cache) {
            const std::string in_at = at + "    ", in_load = whole ? in_at : in_at + "    ";
            // A loop over the tile's U vectors (each in the row, unless the tile is whole) around
            // `body`, printed at in_load.
            // (walk's members, not the bindings: clang 14 does not capture structured bindings.)
            auto each_vector = [&](const std::string& body) {
                std::string text = fmt::format("{}#pragma unroll\n{}for (int u = 0; u < {}; ++u) {{\n", at, at, walk.u);
                text += fmt::format("{}const long long j = j0 + (long long)u * Team::kTeam * {};\n", in_at, walk.vw);
                if (!whole) text += fmt::format("{}if (j < {}) {{\n", in_at, walk.end);
                text += body;
                if (!whole) text += fmt::format("{}}}\n", in_at);
                return text + fmt::format("{}}}\n", at);
            };
            std::string body;
            if (any_cached) {
                body += cached_at(in_load);
                // The row's first walk: this vector's copies (and those before it) have arrived.
                if (copies && number == passes_.front().number)
                    body += fmt::format("{}lj::cache_prefetch_wait_for((C - 1 - j0) / ((long long)Team::kTeam * VW * U) * U + (U - 1 - u));\n",
                                        in_load);
            }
            for (std::size_t s = 0; s < loaded.size(); ++s) {
                const int k = loaded[s];
                const bool run_constant = spec_.inner_strides[static_cast<std::size_t>(k)] == 2;
                // (column, not walked_column: with j alone ptxas spilled a warp's forward cross-entropy
                // at unroll 8, 16 bytes, and it ran 8% slower on an H100, rounds 160-161.)
                const std::string from_memory =
                    fmt::format("lj::{}<{}>(dtype({}), in.ptr[{}], base[{}] + {}, v[u][{}]);",
                                run_constant ? "load_run_constant" : "load_row", walk.vw, k, k, k,
                                column(fmt::format("in.strides[{}]", k)), s);
                const std::string from_cache =
                    reads_cache(k) ? fmt::format("lj::cache_load<VW>(Team::cache_at(row_cache, {}, cache_columns, jc), v[u][{}]);",
                                                 cache_slot_.at(k), s)
                                   : std::string();
                if (!reads_cache(k)) body += fmt::format("{}{}\n", in_load, from_memory);
                else if (all_in_cache) body += fmt::format("{}{}\n", in_load, from_cache);
                else body += fmt::format("{}if (jc < cache_columns) {}\n{}else {}\n", in_load, from_cache, in_load, from_memory);
            }
            std::string text = each_vector(body);
            if (!any_kept) return text;
            // The first pass to read an input the row cache holds keeps its columns there, once they
            // have arrived (the tile's element work waits for them all anyway): each thread later
            // reads back the columns it wrote itself (the same j in every pass), so no barrier.
            std::string stores = cached_at(in_load);
            for (std::size_t s = 0; s < loaded.size(); ++s)
                if (keeps_in_cache(loaded[s]))
                    stores += fmt::format("{}{}lj::cache_store<VW>(Team::cache_at(row_cache, {}, cache_columns, jc), v[u][{}]);\n",
                                          in_load, all_in_cache ? "" : "if (jc < cache_columns) ", cache_slot_.at(loaded[s]), s);
            return text + each_vector(stores);
        };
        if (whole && (any_cached || any_kept)) {  // a thread's columns keep their order in the cache: its last is its largest
            out += fmt::format("{}if (Team::template block_column<VW>(j0{} + (long long)({} - 1) * Team::kTeam * {}) < cache_columns) {{\n",
                               in3, shifted, tiles, vw);
            out += loads(in4, true);
            out += fmt::format("{}}} else {{\n", in3);
            out += loads(in4, false);
            out += fmt::format("{}}}\n", in3);
        } else {
            out += loads(in3, false);
        }
        // Each reduction's argument at the VW columns, added as one group after them (add_group); in
        // a whole tile, kept for the tile's U x VW columns where the accumulator adds them at once
        // after the tile (add_tile; lj::add_tile_group adds the others' groups as before).
        if (whole)
            for (int id : reductions) out += fmt::format("{}Value e{}[U][VW];\n", in3, id);
        if (whole && first_picks) out += pick_offsets(in3);
        out += fmt::format("{}#pragma unroll\n{}for (int u = 0; u < {}; ++u) {{\n", in3, in3, tiles);
        out += fmt::format("{}const long long j = j0 + (long long)u * Team::kTeam * {};\n", in4, vw);
        if (!whole) {
            if (refills) out += fmt::format("{}if (j >= {}) {{\n{}    lj::cache_prefetch_commit();  // a group a vector\n{}    continue;\n{}}}\n",
                                            in4, end, in4, in4, in4);
            else out += fmt::format("{}if (j >= {}) continue;\n", in4, end);
        }
        if (refills) out += cached_at(in4);
        if (!whole)
            for (int id : reductions) out += fmt::format("{}Value e{}[{}];\n", in4, id, vw);
        if (map_elements) out += fmt::format("{}Value r[{}];\n", in4, vw);
        if (!grads.empty()) out += fmt::format("{}Value rg[{}][{}];\n", in4, grads.size(), vw);
        out += fmt::format("{}#pragma unroll\n{}for (int q = 0; q < {}; ++q) {{\n", in4, in4, vw);
        out += fmt::format("{}const long long col = j + q;\n{}(void)col;\n", in5, in5);
        out += hot_columns(plan.hot, in5, vw);
        for (std::size_t s = 0; s < loaded.size(); ++s)
            out += fmt::format("{}const Value {} = v[u][{}][q];\n", in5, input_name(loaded[s]), s);
        if (first_picks)
            out += picks(whole, "ahead.take_parity", [&](int k) {
                const auto s = std::find(loaded.begin(), loaded.end(), k);
                if (s == loaded.end()) throw InternalError("a picked take of an input the first walk does not load");
                return fmt::format("v[u][{}][q]", s - loaded.begin());
            }, in5);
        out += element_bindings(bindings, in5);
        for (int id : reductions)
            out += fmt::format("{}e{}{}[q] = (Value)({});\n", in5, id, whole ? "[u]" : "", print(program_.node(id).args[0]));
        if (map_elements) out += fmt::format("{}r[q] = {};\n", in5, print(program_.body));
        for (std::size_t k : element_totals)
            out += fmt::format("{}totals[{}] += (double)({});\n", in5, k, print(totals_[k].argument));
        for (std::size_t i = 0; i < grads.size(); ++i)
            out += fmt::format("{}rg[{}][q] = (Value)({});\n", in5, i, print(program_.derivatives[grads[i]].node));
        out += fmt::format("{}}}\n", in4);
        for (int id : reductions)
            out += whole ? fmt::format("{}lj::add_tile_group(a{}, e{}[u], j);\n", in4, id, id)
                         : fmt::format("{}lj::add_group(a{}, e{}, j, 0);\n", in4, id, id);
        if (map_elements)
            out += fmt::format("{}lj::store_row<{}>(kResultDType, out.ptr, out_base + {}, r);\n", in4, vw, walked_column("out.strides"));
        for (std::size_t i = 0; i < grads.size(); ++i)
            out += fmt::format("{}lj::store_row<{}>(grad_dtype({}), grads.ptr[{}], grad_base + {}, rg[{}]);\n", in4, vw,
                               grads[i], grads[i], walked_column("grads.strides"), i);
        // After the column's values are used (its stores wait for them): the next row's columns into
        // the slots they were read from.
        if (refills) {
            out += fmt::format("{}if (refill_ && jc < cache_columns) {{  // the next row into the cache\n", in4);
            for (const auto& [k, slot] : cache_slot_)
                out += fmt::format("{}    lj::cache_prefetch<VW>(Team::cache_at(row_cache, {}, cache_columns, jc), "
                                   "static_cast<const Value*>(in.ptr[{}]) + next_base_[{}] + {});\n",
                                   in4, slot, k, k, walked_column(fmt::format("in.strides[{}]", k)));
            out += fmt::format("{}}}\n{}lj::cache_prefetch_commit();  // a group a vector\n", in4, in4);
        }
        out += fmt::format("{}}}\n", in3);
        if (whole)
            for (int id : reductions) out += fmt::format("{}lj::add_tile<(long long)Team::kTeam * VW>(a{}, e{}, j0);\n", in3, id, id);
        if (walks_ahead_here && !whole) out += ahead_loads(whole, in3);
        if (walks_ahead_here) out += ahead_work(whole, in3);
        return out;
    }

    // The walk ahead (KernelSpec::row_walk_ahead) in the last walk's tile: its start loads the next
    // row's columns of the tile (all but its first tile's, loaded before this row's merges) into
    // RowProgram::Ahead's registers, so that they are in flight while this row's work runs.
    std::string ahead_loads(bool whole, const std::string& in3) const {
        const std::string in4 = in3 + "    ", in5 = in4 + "    ", in_load = whole ? in5 : in5 + "    ";
        // (A thread's first tile, where whole, came before the merges: ahead_first_tile.)
        std::string out = whole ? fmt::format("{}if (refill_ && j0 != (long long)Team::lane() * VW) {{  // the next row's columns\n", in3)
                                : fmt::format("{}if (refill_) {{  // the next row's columns\n", in3);
        out += fmt::format("{}#pragma unroll\n{}for (int u = 0; u < U; ++u) {{\n", in4, in4);
        out += fmt::format("{}const long long j = j0 + (long long)u * Team::kTeam * VW;\n", in5);
        if (!whole) out += fmt::format("{}if (j < C) {{\n", in5);
        out += ahead_load("next_base_", in_load);
        if (!whole) out += fmt::format("{}}}\n", in5);
        return out + fmt::format("{}}}\n{}}}\n", in4, in3);
    }
    // Its end: the next row's first walk at the tile's columns, into Ahead's accumulators, and its
    // values into the cache (each slot after this row's read of it, in program order: a thread's own).
    std::string ahead_work(bool whole, const std::string& in3) const {
        const PassPlan& first = passes_.front();
        const std::string in4 = in3 + "    ", in5 = in4 + "    ", in6 = in5 + "    ";
        std::string out = fmt::format("{}if (refill_) {{  // the next row's first walk, and the next row into the cache\n", in3);
        if (whole) out += pick_offsets(in4);
        if (whole)
            for (int id : first.reductions) out += fmt::format("{}Value e{}[U][VW];\n", in4, id);
        out += fmt::format("{}#pragma unroll\n{}for (int u = 0; u < U; ++u) {{\n", in4, in4);
        out += fmt::format("{}const long long j = j0 + (long long)u * Team::kTeam * VW;\n", in5);
        if (!whole) out += fmt::format("{}if (j >= C) continue;\n", in5);
        out += fmt::format("{}const long long jc = Team::template block_column<VW>(j);\n{}if (jc < cache_columns) {{\n", in5, in5);
        for (const auto& [k, slot] : cache_slot_)
            out += fmt::format("{}lj::cache_store<VW>(Team::cache_at(row_cache, {}, cache_columns, jc), ahead.w[u][{}]);\n", in6,
                               slot, slot);
        out += fmt::format("{}}}\n", in5);
        if (!whole)
            for (int id : first.reductions) out += fmt::format("{}Value e{}[VW];\n", in5, id);
        out += fmt::format("{}#pragma unroll\n{}for (int q = 0; q < VW; ++q) {{\n", in5, in5);
        out += fmt::format("{}const long long col = j + q;\n{}(void)col;\n", in6, in6);
        for (int k : first.loaded) out += fmt::format("{}const Value {} = ahead.w[u][{}][q];\n", in6, input_name(k), cache_slot_.at(k));
        // (the next row's parity: flipped after this row's takes were read)
        out += picks(whole, "ahead.take_parity", [&](int k) { return fmt::format("ahead.w[u][{}][q]", cache_slot_.at(k)); }, in6);
        out += element_bindings(first.bindings, in6);
        for (int id : first.reductions)
            out += fmt::format("{}e{}{}[q] = (Value)({});\n", in6, id, whole ? "[u]" : "", print(program_.node(id).args[0]));
        out += fmt::format("{}}}\n", in5);
        for (int id : first.reductions)
            out += whole ? fmt::format("{}lj::add_tile_group(ahead.a{}, e{}[u], j);\n", in5, id, id)
                         : fmt::format("{}lj::add_group(ahead.a{}, e{}, j, 0);\n", in5, id, id);
        out += fmt::format("{}}}\n", in4);
        if (whole)
            for (int id : first.reductions) out += fmt::format("{}lj::add_tile<(long long)Team::kTeam * VW>(ahead.a{}, e{}, j0);\n", in4, id, id);
        return out + fmt::format("{}}}\n", in3);
    }
    // A row's first tile of the cached inputs into Ahead's registers, from the row at `base`: the next
    // row's (after the team's first row's first walk), or the one after it (after the last walk),
    // in flight across the merges that come before the walk that uses them. Only a whole tile: the
    // row's last tile loads its own (a partial tile that might find its values in Ahead kept them
    // live through the whole walk's last tile, 17 more registers).
    std::string ahead_first_tile(std::string_view base, std::string_view indent) const {
        const std::string in1 = std::string(indent) + "    ", in2 = in1 + "    ";
        std::string out = fmt::format("{}if ((long long)Team::lane() * VW + (long long)(U - 1) * Team::kTeam * VW < C) {{  // a whole tile\n",
                                      indent);
        out += fmt::format("{}#pragma unroll\n{}for (int u = 0; u < U; ++u) {{\n", in1, in1);
        out += fmt::format("{}const long long j = (long long)Team::lane() * VW + (long long)u * Team::kTeam * VW;\n", in2);
        out += ahead_load(base, in2);
        return out + fmt::format("{}}}\n{}}}\n", in1, indent);
    }

    // Reductions of one argument that share an accumulator (shared_accumulators): the second's
    // value comes from the first's. Not side by side: a shared accumulator is larger than the
    // 16 bytes a side-by-side team's shared memory is budgeted for (choose_by_rows).
    // A mean and the squared deviations from it (centered_) share one the same way.
    struct AccumulatorSharing {
        struct First {
            std::string_view accumulator, result;
        };
        struct Second {
            int first;
            std::string result;
        };
        std::map<int, First> first_of;
        std::map<int, Second> second_of;
    };
    AccumulatorSharing sharing(const std::vector<int>& reductions) const {
        AccumulatorSharing out;
        auto& first_of = out.first_of;
        auto& second_of = out.second_of;
        for (const auto& shared : spec_.side_by_side ? std::span<const SharedAccumulator>{} : shared_accumulators())
            for (int a : reductions)
                for (int b : reductions) {
                    const ir::Node& na = program_.node(a);
                    const ir::Node& nb = program_.node(b);
                    // The same argument: one node, or two of the same form (x written twice is two nodes).
                    if (static_cast<RowReduction>(na.slot) != shared.first || static_cast<RowReduction>(nb.slot) != shared.second ||
                        first_of.count(a) || second_of.count(b) || !same_value(na.args[0], nb.args[0]))
                        continue;
                    first_of[a] = {shared.cuda_accumulator, shared.first_result};
                    second_of[b] = {a, std::string(shared.second_result)};
                }
        const CenteredAccumulator& centered = centered_accumulator();
        for (int id : reductions)
            if (const auto mean = centered_.find(id); mean != centered_.end()) {
                if (first_of.count(mean->second) || second_of.count(mean->second))
                    throw InternalError("a mean shares two accumulators");
                first_of[mean->second] = {centered.cuda_accumulator, centered.mean_result};
                const bool divided = static_cast<RowReduction>(program_.node(id).slot) == RowReduction::Mean;
                second_of[id] = {mean->second, divided ? fmt::format("(Value)({} / (double)C)", centered.squares_result)
                                                       : fmt::format("(Value){}", centered.squares_result)};
            }
        return out;
    }

    // A pass's walk over the row (its tiles; a shifted row's edges), at indent in1; the pass's
    // accumulators (those of `accumulated`) and the row's bases, cache and C are in scope.
    std::string walk(const PassPlan& plan, const std::vector<int>& accumulated, const std::string& in1, bool picks = false) const {
        const std::size_t slots = std::max<std::size_t>(plan.loaded.size(), 1);
        const std::string in2 = in1 + "    ";
        const std::string in3 = in2 + "    ";
        // A shifted row's edges, a column a lane: the first columns before the vectors, the last after
        // them, so that each lane still adds its columns in increasing order (argmax's first column).
        const Walk vectors{"VW", "U", spec_.row_shift ? "Cb_" : "C", true, picks}, edge{"1", "1", "C", false};
        auto edge_columns = [&](std::string_view count, std::string_view first) {
            return fmt::format("{}if ((long long)Team::lane() < {}) {{  // a shifted row's edge\n"
                               "{}const long long j0 = {} + (long long)Team::lane();\n{}Value v[1][{}][1];\n{}{}}}\n",
                               in1, count, in2, first, in2, slots, tile(plan, false, in2, accumulated, edge), in1);
        };
        std::string out;
        if (spec_.row_shift) out += edge_columns("shift_", "0");
        out += fmt::format("{}for (long long j0 = {}(long long)Team::lane() * VW; j0 < {}; j0 += (long long)Team::kTeam * VW * U) {{\n",
                           in1, spec_.row_shift ? "shift_ + " : "", vectors.end);
        out += fmt::format("{}Value v[U][{}][VW];\n", in2, slots);
        // A whole tile (every u in the row: all but a row's last) is written without a test per u, so
        // that the compiler interleaves its U x VW elements' arithmetic (and an accumulator that adds
        // a whole tile at once, lj::add_tile, tests its reference once a tile); the row's last tile tests each.
        out += fmt::format("{}if (j0 + (long long)(U - 1) * Team::kTeam * VW < {}) {{  // a whole tile\n", in2, vectors.end);
        out += tile(plan, true, in3, accumulated, vectors);
        out += fmt::format("{}}} else {{\n", in2);
        out += tile(plan, false, in3, accumulated, vectors);
        out += fmt::format("{}}}\n{}}}\n", in2, in1);
        if (spec_.row_shift) out += edge_columns("C - Cb_", "Cb_");
        return out;
    }

    // One pass over the row: the row reductions `reductions` and, if `elements`, the element work.
    std::string pass(const PassPlan& plan, std::map<int, std::string>& reduced) {
        const std::vector<int>& reductions = plan.reductions;
        std::string out = fmt::format("{}// pass {} over the row\n{}{{\n", kIndent, plan.number, kIndent);
        const std::string in1 = std::string(kIndent) + "    ";
        const AccumulatorSharing shares = sharing(reductions);
        const std::map<int, AccumulatorSharing::First>& first_of = shares.first_of;
        const std::map<int, AccumulatorSharing::Second>& second_of = shares.second_of;
        auto own = [&](int id) { return !second_of.count(id); };
        std::vector<int> accumulated;  // the reductions with accumulators of their own
        std::copy_if(reductions.begin(), reductions.end(), std::back_inserter(accumulated), own);
        for (int id : reductions) {
            if (!own(id)) continue;
            const std::string acc = fmt::format("a{}", id);
            reduced[id] = acc;
            const auto shared = first_of.find(id);
            out += fmt::format("{}{} {};\n", in1,
                               shared != first_of.end() ? shared->second.accumulator
                                                        : accumulator_type(static_cast<RowReduction>(program_.node(id).slot)),
                               acc);
        }
        const std::string in2 = in1 + "    ";
        if (spec_.row_walk_ahead && plan.number == refill_pass_)
            for (int id : passes_.front().reductions)
                out += fmt::format("{}ahead.a{} = {{}};  // the next row's first walk starts\n", in1, id);
        const bool first_pass = &plan == &passes_.front();
        // The row before did the first walk (KernelSpec::row_walk_ahead); the team's first row's,
        // first_walk before the rows (a branch for it here cost registers the whole loop long).
        if (spec_.row_walk_ahead && first_pass)
            for (int id : accumulated) out += fmt::format("{}a{} = ahead.a{};\n", in1, id, id);
        else
            out += walk(plan, accumulated, in1);
        if (spec_.row_walk_ahead && plan.number == refill_pass_) {
            // The next row's walks start at its merges: its first tile for the last walk is the row after's.
            out += fmt::format("{}if (after_next_row_ < rows_) {{  // the row after next's first tile, in flight across the next row's merges\n{}{}}}\n",
                               in1, ahead_first_tile("after_next_base_", in2), in1);
        }
        // Every copy of the row has arrived (the first walk waited for each; this for the walks after).
        if (spec_.row_prefetch && !spec_.row_walk_ahead && first_pass) out += fmt::format("{}lj::cache_prefetch_wait();\n", in1);
        // Walked ahead, the row is in the cache before this pass: a take is read there by the lane
        // whose columns hold it (takes_by_owner), not from memory by every lane.
        const bool owners_take = spec_.row_walk_ahead && first_pass && !deferred_takes_.empty();
        if (owners_take && accumulated.empty()) throw InternalError("a walk ahead whose first pass merges nothing");
        if (owners_take) out += takes_by_owner(in1);
        else if (first_pass)
            for (int id : deferred_takes_) out += take_fill(id, in1);
        // The walk's accumulators merged together where there are several (one pair of block
        // barriers for all: lj::Team::all_reduce_each).
        std::vector<std::string> merged;
        for (int id : reductions)
            if (own(id)) merged.push_back(fmt::format("a{}", id));
        if (merged.size() == 1)
            out += fmt::format("{}{} = Team::all_reduce({});\n", in1, merged[0], merged[0]);
        else if (merged.size() > 1)
            out += fmt::format("{}Team::all_reduce_each({});\n", in1, fmt::join(merged, ", "));
        if (owners_take) out += takes_from_owners(in1);
        // The accumulators leave the block scope as values.
        std::string values;
        for (int id : reductions) {
            std::string value;
            if (const auto second = second_of.find(id); second != second_of.end())
                value = fmt::format(fmt::runtime(second->second.result), fmt::format("a{}", second->second.first));
            else if (const auto first = first_of.find(id); first != first_of.end())
                value = fmt::format(fmt::runtime(first->second.result), fmt::format("a{}", id));
            else
                value = accumulated_value(static_cast<RowReduction>(program_.node(id).slot), fmt::format("a{}", id));
            values += fmt::format("{}r{}_ = {};\n", in1, id, value);
        }
        std::string declarations;
        for (int id : reductions) {
            declarations += fmt::format("{}Value r{}_;\n", kIndent, id);
            reduced[id] = fmt::format("r{}_", id);
        }
        return declarations + out + values + fmt::format("{}}}\n", kIndent);
    }

    // The row prefetch's start of a row (KernelSpec::row_prefetch): where the team's next row lies
    // (pass refill_pass_ copies it in), and the team's first row copied in here and waited for. The
    // rows after it arrive while the first walk runs (it waits for each vector's copy group, tile).
    std::string row_prefetch_start() const {
        const std::string in1 = std::string(kIndent) + "    ";
        std::string out =
            spec_.row_walk_ahead
                ? fmt::format("{}// The walk ahead: pass {} reads the team's next row, does its first walk and keeps it in the cache.\n",
                              kIndent, refill_pass_)
                : fmt::format("{}// The row prefetch: pass {} copies the team's next row into the cache.\n", kIndent, refill_pass_);
        out += rows_count(kIndent);
        out += fmt::format("{}const long long next_row_ = row + Team::row_step();\n{}const bool refill_ = next_row_ < rows_;\n",
                           kIndent, kIndent);
        out += fmt::format("{}long long next_base_[{}] = {{}};\n{}if (refill_) {{\n", kIndent,
                           std::max<std::size_t>(slots_.size(), 1), kIndent);
        out += cached_bases("next_c", "next_row_", "next_base_", in1);
        // The next row's own values (an index, an [N, 1] input): walked ahead, loaded now, into Ahead
        // (row_values_ahead). Else loaded at its start, where the walk that follows waits on nothing
        // else (its vectors come from the cache): asked of L2 now, the load there waits on L2, not on memory.
        if (spec_.row_walk_ahead)
            out += row_values_ahead([](int k) { return fmt::format("lj::offset<R - 1>(next_c, in.strides[{}])", k); }, in1);
        for (std::size_t k = 0; k < slots_.size() && !spec_.row_walk_ahead; ++k) {
            const auto slot = static_cast<std::size_t>(slots_[k]);
            if (k_input_[slot] || cache_slot_.count(static_cast<int>(k)) > 0) continue;
            if (spec_.inner_strides[k] == 0 || index_[slot])
                out += fmt::format("{}lj::prefetch_l2(dtype({}), in.ptr[{}], lj::offset<R - 1>(next_c, in.strides[{}]));\n",
                                   in1, k, k, k);
        }
        out += fmt::format("{}}}\n", kIndent);
        if (spec_.row_walk_ahead) {
            out += fmt::format("{}const long long after_next_row_ = next_row_ + Team::row_step();\n", kIndent);
            out += fmt::format("{}long long after_next_base_[{}] = {{}};\n{}if (after_next_row_ < rows_) {{\n", kIndent,
                               std::max<std::size_t>(slots_.size(), 1), kIndent);
            out += cached_bases("after_c", "after_next_row_", "after_next_base_", in1);
            return out + fmt::format("{}}}\n", kIndent);
        }
        out += fmt::format("{}if (row == Team::first_row()) {{\n", kIndent);
        for (const auto& [k, slot] : cache_slot_)
            out += fmt::format("{}lj::prefetch_row<Team, VW>(Team::cache_at(row_cache, {}, cache_columns, 0), cache_columns, "
                               "static_cast<const Value*>(in.ptr[{}]) + base[{}], in.strides[{}][R - 1], C);\n",
                               in1, slot, k, k, k);
        out += fmt::format("{}lj::cache_prefetch_wait();\n{}}}\n", in1, kIndent);
        // A first walk that reads no cached input waits for the whole row here; else it waits for
        // each vector as it comes to it (tile).
        const PassPlan& first = passes_.front();
        if (std::none_of(first.loaded.begin(), first.loaded.end(), [&](int k) { return cache_slot_.count(k) > 0; }))
            out += fmt::format("{}lj::cache_prefetch_wait();\n", kIndent);
        return out;
    }

    std::string row_body() {
        std::string out;
        out += row_bases(kIndent);
        if (std::any_of(k_input_.begin(), k_input_.end(), [](bool k) { return k; }))
            out += fmt::format("{}const long long K = e.dims[R];  // values per row of x[k] (plans.cpp)\n", kIndent);
        const bool map = program_.is_map();
        if (map) out += fmt::format("{}const long long out_base = lj::offset<R - 1>(c, out.strides);\n", kIndent);
        if (!program_.derivatives.empty()) {
            if (!element_gradients().empty())
                out += fmt::format("{}const long long grad_base = lj::offset<R - 1>(c, grads.strides);\n", kIndent);
            // The derivatives' seeds (ir::NodeKind::Seed), one per reduction differentiated: upstream /
            // its divisor, times its factor.
            const std::size_t seeds = std::max<std::size_t>(program_.gradient_totals.size(), 1);
            for (std::size_t j = 0; j < seeds; ++j)
                out += fmt::format("{}const Value {} = (Value)grads.total_scale({});\n", kIndent,
                                   cuda_seed_name(static_cast<int>(j)), j);
        }
        if (spec_.row_shift) {
            // Every operand walked along the row starts it at the same column of a vector (choose_by_rows).
            // Not one only taken at a column, nor one no walk reads (a [C] vector the same in every
            // row): the planner does not check those, and their row's start is not the walked rows'.
            std::string start;
            for (int k : inputs_walked())
                if (start.empty() && spec_.inner_strides[static_cast<std::size_t>(k)] == 1) start = fmt::format("base[{}]", k);
            if (start.empty()) start = map ? "out_base" : "grad_base";
            out += fmt::format("{}const long long shift_ = lj::row_shift({}, C);  // columns before the first vector\n"
                               "{}const long long Cb_ = shift_ + (C - shift_) / 4 * 4;  // after the last\n",
                               kIndent, start, kIndent);
        }
        // Stage 0: per-row inputs and indices, loaded at the row's start or, walked ahead, by the row
        // before (row_values_ahead).
        for (const RowValue& r : row_values()) {
            const std::string k = std::to_string(r.k);
            if (r.index)
                out += fmt::format("{}const long long {} = {};\n", kIndent, index_name(slots_[static_cast<std::size_t>(r.k)]),
                                   spec_.row_walk_ahead ? "ahead.index" + k
                                                        : fmt::format("lj::load_index(dtype({}), in.ptr[{}], base[{}])", k, k, k));
            if (r.value)
                out += fmt::format("{}const Value {} = {};\n", kIndent, input_name(r.k),
                                   spec_.row_walk_ahead ? "ahead.value" + k
                                                        : fmt::format("lj::load1<Value>(dtype({}), in.ptr[{}], base[{}])", k, k, k));
        }
        std::map<int, std::string> reduced;
        auto needed_first = [&](int id) { return defined_first(id); };
        for (int id : deferred_takes_) out += take_declaration(id);
        out += stage_definitions(0, reduced, needed_first);
        if (!cache_slot_.empty()) {
            out += fmt::format("{}// The row cache: this team's share of the block's (templates/by_rows.cuh).\n", kIndent);
            out += row_cache_declarations(kIndent);
            if (spec_.row_prefetch) out += row_prefetch_start();
        }
        for (const PassPlan& plan : passes_) {
            out += pass(plan, reduced);
            if (&plan == &passes_.front())
                out += stage_definitions(0, reduced, [&](int id) { return !needed_first(id); });
            out += stage_definitions(plan.number, reduced);
        }
        out += k_tail();
        out += k_scatter();
        // Per-row outputs, once per row.
        std::string once;
        if (map && per_row_[static_cast<std::size_t>(program_.body)]) {
            // Several results: result r at r times the output's stride along the row (plan_program_layout).
            const std::vector<int> results = program_.result_nodes();
            for (std::size_t r = 0; r < results.size(); ++r)
                once += fmt::format("{}    lj::store1<Value>(kResultDType, out.ptr, out_base{}, (Value)({}));\n", kIndent,
                                    r == 0 ? std::string() : fmt::format(" + {} * out.strides[R - 1]", r), print(results[r]));
        }
        for (std::size_t k = 0; k < totals_.size(); ++k)
            if (per_row_[static_cast<std::size_t>(totals_[k].argument)])
                once += fmt::format("{}    row_totals[{}] += (double)({});\n", kIndent, k, print(totals_[k].argument));
        // A gradient of an input of one value for each row: summed along the row by its derivative,
        // at the row's index in the input's own (contiguous) shape. A scattered one: the row's value
        // and its index, for the scatter kernels (the launch points grads.ptr[g] at their scratch).
        for (std::size_t g = 0; g < program_.derivatives.size(); ++g) {
            if (written(g) == RowGradient::Elements || written(g) == RowGradient::PerK) continue;
            const int node = kernel_node(g);
            if (!per_row_[static_cast<std::size_t>(node)])
                throw InternalError("a derivative written once per row is not one value per row");
            if (written(g) == RowGradient::Scattered)
                once += fmt::format("{}    lj::store_scattered(grads.ptr[{}], row, {}, (double)({}));\n", kIndent, g,
                                    index_name(program_.derivatives[g].scatter_index), print(node));
            else
                once += fmt::format("{}    lj::store1<Value>(grad_dtype({}), grads.ptr[{}], row, (Value)({}));\n", kIndent,
                                    g, g, print(node));
        }
        // `active`: false only for a side-by-side team's lanes past the last row (by_rows.cu).
        if (!once.empty()) out += fmt::format("{}if (active && Team::lane() == 0) {{\n{}{}}}\n", kIndent, once, kIndent);
        else out += fmt::format("{}(void)active;\n", kIndent);
        if (!map) out += fmt::format("{}(void)out;\n", kIndent);
        if (program_.derivatives.empty()) out += fmt::format("{}(void)grads;\n", kIndent);
        return out;
    }

    std::map<int, int> centered_;  // sum or mean of (e - m)^2 -> m = mean(e, -1): computed in m's pass
    const ir::Program& program_;
    const KernelSpec& spec_;
    std::vector<int> slots_;
    ExpressionPrinter printer_;
    std::vector<bool> index_;
    std::vector<RowTotal> totals_;
    std::map<int, int> kernel_index_;  // program input slot -> kernel input index
    std::set<int> hot_slots_;          // the index inputs whose "this column is the index" (OneHot) is live (PassPlan::hot: a pass's)
    std::vector<bool> per_row_;
    std::vector<bool> k_input_;   // per input slot: K values per row (KernelSpec::inner_strides kKValues)
    std::vector<bool> k_level_;   // per node: K values per row (k_level_nodes)
    std::vector<bool> live_;
    std::vector<int> stage_;
    std::vector<PassPlan> passes_;
    std::map<int, int> first_pass_;   // kernel input index -> the first pass that reads it along the row
    std::vector<int> read_again_;     // kernel input indices read along the row by more than one pass
    std::map<int, int> cache_slot_;   // of those, where the spec has a row cache: kernel index -> its slot
    std::map<int, int> last_pass_;    // kernel input index -> the last pass that reads it along the row
    int refill_pass_ = 0;             // with the row prefetch: the pass that copies the next row in (0: none)
    mutable std::set<int> defined_bindings_;  // per-row bindings already defined (by slot)
    std::set<int> deferred_takes_;  // takes of stage 0 filled after the first pass's walk (find_deferred_takes)
    std::set<int> first_needs_;     // per-row values defined before the first pass (find_deferred_takes)
    bool defer_takes_ = false;      // with a row cache: what the first pass does not need comes after its walk
};

}  // namespace

kinds::RowWalks kinds::row_walks(const ir::Program& program, const KernelSpec& spec) {
    KernelSpec without = spec;
    without.row_cache_columns = 0;
    without.row_prefetch = false;
    without.row_walk_ahead = false;
    const RowEmitter emitter(program, without);
    return {emitter.inputs_read_again(), emitter.inputs_walked(), emitter.centered(), emitter.walks_ahead(),
            emitter.walk_count()};
}

bool kinds::row_takes_picked(const ir::Program& program, const KernelSpec& spec) {
    KernelSpec ahead = spec;
    ahead.row_walk_ahead = true;
    return RowEmitter(program, ahead).takes_all_picked();
}

std::string kinds::emit_by_rows(const ir::Program& program, const KernelSpec& spec) {
    if (spec.loop != KernelSpec::Loop::ByRow) throw InternalError("emit_by_rows needs a by-row kernel spec");
    if (spec.vector_width != 1 && spec.vector_width != 4) throw InternalError("vector width must be 1 or 4");
    if (!spec.side_by_side && spec.team != 32 && spec.team != spec.block_threads)
        throw InternalError("a team is a warp or the whole block");
    if (spec.row_cluster != 1 && (spec.side_by_side || spec.team != spec.block_threads ||
                                  (spec.row_cluster != 2 && spec.row_cluster != 4 && spec.row_cluster != 8)))
        throw InternalError("a cluster of 2, 4 or 8 blocks takes a row with whole blocks");
    if (spec.side_by_side && (spec.block_threads % spec.team != 0 || (spec.block_threads / spec.team) % 32 != 0))
        throw InternalError("a side-by-side block takes whole warps of rows");
    RowEmitter emitter(program, spec);
    if (emitter.totals() > static_cast<std::size_t>(kMaxTotals))
        throw InternalError("more totals than the kernel ABI holds");  // choose_by_rows refuses these first

    // RowProgram holds each parameter twice: in the compute type, then as passed (for the final value).
    std::vector<std::string> parameter_values;
    for (const auto& p : program.params) parameter_values.push_back(fmt::format("(RowProgram::Value){}", parameter_source(p)));
    for (const auto& p : program.params) parameter_values.push_back(parameter_source(p));
    std::string prelude = kernel_prelude(program);
    // A reduction's value: each block's totals, then the last block's results. A map's gradient
    // program has none to finish (ir::Program::gradients_only).
    const bool finishes = !program.is_map() && !program.gradients_only;
    if (finishes) prelude += templates::finish_cuh;
    prelude += templates::by_rows_cuh;
    if (spec.row_split) prelude += templates::row_runs_cuh;
    if (spec.scatters()) prelude += templates::scatter_cuh;
    prelude += accumulator_helpers(program);
    if (emitter.centered()) prelude += centered_accumulator().cuda_helper;

    const std::string finish =
        !finishes ? std::string()
                  : fmt::format("    lj::finish_totals<{}, RowProgram::kTotals, RowProgram::kResults, {}, RowProgram::kResultDType>(totals, out, "
                                "[&](const double (&t)[RowProgram::kTotals], double (&r)[RowProgram::kResults]) {{ program.final(t, r); }});\n",
                                spec.block_threads, spec.one_block ? "true" : "false");
    std::string what;
    if (program.gradients_only) what = "the gradients of a map that reduces along rows (upstream gradient given)";
    else if (!program.derivatives.empty()) what = fmt::format("a {} reduction and its gradients", ir::to_string(program.reduction));
    else if (program.is_map()) what = "an elementwise map with reductions along rows";
    else if (program.reduction == ir::Reduction::Composite) what = fmt::format("{} whole-tensor reductions combined", emitter.totals());
    else what = fmt::format("a {} reduction", ir::to_string(program.reduction));
    const std::map<std::string, std::string> values{
        {"VERSION", kVersion},
        {"WHAT", what},
        {"SIGNATURE", spec.signature()},
        {"PRELUDE", prelude},
        {"PROGRAM", emitter.row_program()},
        {"BLOCK_THREADS", std::to_string(spec.block_threads)},
        {"LAUNCH_BOUNDS", launch_bounds(spec)},
        {"TEAM", spec.side_by_side    ? fmt::format("lj::SideTeam<{}, {}>", spec.block_threads, spec.team)
                 : spec.row_cluster > 1 ? fmt::format("lj::Team<{}, {}, {}>", spec.block_threads, spec.team, spec.row_cluster)
                                        : fmt::format("lj::Team<{}, {}>", spec.block_threads, spec.team)},
        // Blocks of a cluster share each row (sm_90): the cluster's size is the kernel's own.
        {"CLUSTER_DIMS", spec.row_cluster > 1 ? fmt::format("__cluster_dims__({}, 1, 1) ", spec.row_cluster) : std::string()},
        {"RANK", std::to_string(spec.rank)},
        {"VECTOR", std::to_string(spec.vector_width)},
        {"UNROLL", std::to_string(spec.unroll)},
        {"PARAMETER_LIST", parameter_list(kernel_parameters(program, spec), program, "RowProgram")},
        {"PARAMETER_VALUES", fmt::format("{}", fmt::join(parameter_values, ", "))},
        {"FINISH", finish},
        {"GRADS", program.derivatives.empty() ? "0" : "grads"},
    };
    return substitute(templates::by_rows_cu, values);
}

}  // namespace lossjit
