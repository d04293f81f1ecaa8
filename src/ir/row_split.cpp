// split_totals (pipeline.hpp): a Composite program as a program of its whole-tensor reductions, run
// a part of the rows at a time, and a program that combines their sums into its results.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "pipeline.hpp"

namespace lossjit {
namespace {

int resolved(const ir::Program& p, int id) {
    while (p.node(id).kind == ir::NodeKind::Binding) id = p.bindings[static_cast<std::size_t>(p.node(id).slot)].node;
    return id;
}

// The Total nodes the number `id` is computed from, in the order first reached.
void totals_of(const ir::Program& p, int id, std::vector<int>& out) {
    id = resolved(p, id);
    const ir::Node& n = p.node(id);
    if (n.kind == ir::NodeKind::Total) {
        if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
        return;
    }
    if (n.kind == ir::NodeKind::Apply)
        for (int i = 0; i < n.arity; ++i) totals_of(p, n.args[static_cast<std::size_t>(i)], out);
}

bool reads_input(const ir::Program& p, int id, int slot) {
    const std::vector<int> roots{id};
    const std::vector<bool> reached = reached_nodes(p, roots);
    for (std::size_t k = 0; k < p.nodes.size(); ++k)
        if (reached[k] && p.nodes[k].kind == ir::NodeKind::Input && p.nodes[k].slot == slot) return true;
    return false;
}

// Copies the number at `id` into `out`, each Total k a sum of the one-element input t<k>: the
// program's scalar expression of its reductions, with the reductions as inputs.
class CombineBuilder {
public:
    CombineBuilder(const ir::Program& from, const std::vector<int>& totals, ir::Program& out)
        : from_(from), totals_(totals), out_(out) {}

    int copy(int id) {
        id = resolved(from_, id);
        if (auto found = copied_.find(id); found != copied_.end()) return found->second;
        const ir::Node& n = from_.node(id);
        ir::Node c = n;
        switch (n.kind) {
            case ir::NodeKind::Constant: case ir::NodeKind::Param: break;
            case ir::NodeKind::Total: {
                const auto k = std::find(totals_.begin(), totals_.end(), id) - totals_.begin();
                ir::Node input;
                input.kind = ir::NodeKind::Input;
                input.type = ValueType::Float;
                input.slot = static_cast<int>(k);
                input.pos = n.pos;
                c.slot = static_cast<int>(ir::Reduction::Sum);
                c.args = {add(input), -1, -1};
                break;
            }
            case ir::NodeKind::Apply:
                for (int i = 0; i < n.arity; ++i)
                    c.args[static_cast<std::size_t>(i)] = copy(n.args[static_cast<std::size_t>(i)]);
                break;
            default:
                throw InternalError(fmt::format("split_totals: a {} node where one number is computed from reductions",
                                                static_cast<int>(n.kind)));
        }
        return copied_[id] = add(c);
    }

private:
    int add(const ir::Node& n) {
        out_.nodes.push_back(n);
        return static_cast<int>(out_.nodes.size()) - 1;
    }

    const ir::Program& from_;
    const std::vector<int>& totals_;
    ir::Program& out_;
    std::map<int, int> copied_;
};

}  // namespace

TotalsSplit split_totals(const ir::Program& program, int logits_slot) {
    if (program.reduction != ir::Reduction::Composite || !program.statistics.empty())
        throw InternalError("split_totals of a program that is not Composite, or has statistics");
    const std::vector<int> results = program.result_nodes();
    // The reductions: those the first result reaches first, the rest after.
    std::vector<int> totals;
    totals_of(program, results[0], totals);
    if (totals.empty()) {
        const ast::Pos pos = program.node(results[0]).pos;
        throw SourceError({program.source_name, pos.line, pos.column},
                          "this program's first result reduces nothing: it is a constant", program.source);
    }
    std::vector<int> through_logits;
    for (int t : totals)
        if (reads_input(program, t, logits_slot)) through_logits.push_back(t);
    if (through_logits.size() > 1) {
        const ast::Pos pos = program.node(through_logits[1]).pos;
        throw SourceError({program.source_name, pos.line, pos.column},
                          "this program cannot run a part of the rows at a time: its first result combines this "
                          "reduction of the logits with another otherwise than by +, - and constant factors, and "
                          "their factors in its gradient would be needed before the parts' gradients; write it as a "
                          "constant times sums or means, or give each reduction of the logits its own factor of "
                          "reductions that do not read them (docs/linear_loss.md)",
                          program.source);
    }
    TotalsSplit split;
    split.differentiable = !through_logits.empty();
    if (split.differentiable) {  // the one the gradient flows through, first
        totals.erase(std::find(totals.begin(), totals.end(), through_logits[0]));
        totals.insert(totals.begin(), through_logits[0]);
    }
    for (std::size_t r = 1; r < results.size(); ++r) totals_of(program, results[r], totals);
    for (int t : totals) split.shares.push_back(row_share(static_cast<ir::Reduction>(program.node(t).slot)));

    // Per chunk: the same nodes and bindings, its results the reductions.
    split.per_chunk = program;
    split.per_chunk.results.clear();
    for (std::size_t k = 0; k < totals.size(); ++k) {
        const auto slot = static_cast<int>(split.per_chunk.bindings.size());
        const ast::Pos pos = program.node(totals[k]).pos;
        split.per_chunk.bindings.push_back({fmt::format("lossjit_total{}", k), totals[k], pos});
        split.per_chunk.results.push_back({fmt::format("lossjit_total{}", k), slot, pos});
    }
    split.per_chunk.body = totals[0];

    // The combination: the program's results from the reductions' sums.
    ir::Program& c = split.combine;
    c = program.header();
    c.inputs.clear();
    for (std::size_t k = 0; k < totals.size(); ++k) c.inputs.push_back(fmt::format("t{}", k));
    c.row_dims.clear();
    CombineBuilder builder(program, totals, c);
    std::vector<int> copied;
    for (int r : results) copied.push_back(builder.copy(r));
    c.body = copied[0];
    for (std::size_t r = 0; r < program.results.size(); ++r) {
        const auto slot = static_cast<int>(c.bindings.size());
        c.bindings.push_back({program.results[r].name, copied[r], program.results[r].pos});
        c.results.push_back({program.results[r].name, slot, program.results[r].pos});
    }
    return split;
}

}  // namespace lossjit
