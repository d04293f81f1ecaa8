// statistics: the two-phase rule. A whole-tensor reduction is one number; where a program uses it per
// element, per row or inside another reduction (`x / sqrt(sum(x^2))`, `mean((x - mean(x))^2)`), the
// number must be known before the pass over the data that uses it starts. Each such use becomes a
// statistic: a program of its own (a reduction, or a Composite expression of reductions) that runs
// first and leaves its value, in float64, where the kernels of the program read it as a parameter
// (ParamDecl::statistic). Each statistic is one more pass over its inputs.
#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "ir/print.hpp"
#include "lossjit/errors.hpp"
#include "pipeline.hpp"

namespace lossjit {
namespace {

using Level = ValueLevel;

// The statistics split off so far, shared by the splits of a program and of its statistics.
struct Statistics {
    std::string prefix;  // their parameters' names: prefix + index, colliding with no name of the user's
    std::vector<std::shared_ptr<const ir::Program>> programs;
    std::vector<std::string> keys;  // each program's text: the same statistic written twice is computed once
};

class Splitter {
public:
    Splitter(const ir::Program& program, Statistics& statistics)
        : p_(program), statistics_(statistics), levels_(value_levels(program)) {}

    ir::Program run() {
        const std::vector<bool> escapes = escaping();
        if (std::none_of(escapes.begin(), escapes.end(), [](bool e) { return e; })) return p_;
        // Each escaping node's statistic, in node order (an inner one's program is split in turn).
        std::map<int, int> statistic_of;  // node -> index in statistics_
        for (std::size_t id = 0; id < p_.nodes.size(); ++id)
            if (escapes[id]) statistic_of[static_cast<int>(id)] = add_statistic(static_cast<int>(id));
        return rebuilt(statistic_of);
    }

private:
    int resolved(int id) const {
        while (p_.node(id).kind == ir::NodeKind::Binding) id = p_.bindings[static_cast<std::size_t>(p_.node(id).slot)].node;
        return id;
    }
    Level level(int id) const { return levels_[static_cast<std::size_t>(id)]; }

    // Total-level nodes whose number is used where it is not one number among others: by a value per
    // element or row, by a row reduction or take, reduced again, or as the argument of the program's
    // own reduction. Every binding counts, used or not (the kernels evaluate each).
    std::vector<bool> escaping() const {
        std::vector<int> roots{p_.body};
        for (const auto& b : p_.bindings) roots.push_back(b.node);
        const std::vector<bool> live = reached_nodes(p_, roots);

        std::vector<bool> escapes(p_.nodes.size(), false);
        auto mark = [&](int arg) {
            const int id = resolved(arg);
            if (level(id) == Level::Total) escapes[static_cast<std::size_t>(id)] = true;
        };
        for (std::size_t id = 0; id < p_.nodes.size(); ++id) {
            const ir::Node& n = p_.nodes[id];
            if (!live[id] || n.kind == ir::NodeKind::Binding || n.kind == ir::NodeKind::Constant) continue;
            const bool combines = n.kind == ir::NodeKind::Apply && level(static_cast<int>(id)) == Level::Total;
            if (combines) continue;  // a number from numbers: part of a larger statistic or of the body
            for (int i = 0; i < n.arity; ++i) mark(n.args[static_cast<std::size_t>(i)]);
        }
        const bool reduces_body = p_.reduction == ir::Reduction::Sum || p_.reduction == ir::Reduction::Mean ||
                                  p_.reduction == ir::Reduction::BatchMean;
        if (reduces_body) mark(p_.body);
        return escapes;
    }

    // The program of the statistic at `root` (a Total: its reduction; else a Composite expression),
    // its own statistics split off first; its index in statistics_.
    int add_statistic(int root) {
        ir::Program q = p_.header();
        const ir::Node& top = p_.node(root);
        std::map<int, int> copied;
        if (top.kind == ir::NodeKind::Total) {
            q.reduction = static_cast<ir::Reduction>(top.slot);
            q.body = copy(q, top.args[0], copied);
        } else {
            q.reduction = ir::Reduction::Composite;
            q.body = copy(q, root, copied);
        }
        q.statistic = true;
        q.indices = p_.index_inputs();
        return add(Splitter(q, statistics_).run(), p_.node(root).pos);
    }

    // The node `id` and what it reaches, copied into `q` with bindings looked through (a statistic's
    // program prints its expression whole).
    int copy(ir::Program& q, int id, std::map<int, int>& copied) const {
        id = resolved(id);
        if (auto it = copied.find(id); it != copied.end()) return it->second;
        ir::Node n = p_.node(id);
        for (int i = 0; i < n.arity; ++i) n.args[static_cast<std::size_t>(i)] = copy(q, n.args[static_cast<std::size_t>(i)], copied);
        q.nodes.push_back(n);
        const int mine = static_cast<int>(q.nodes.size()) - 1;
        copied[id] = mine;
        return mine;
    }

    // The index of `q` among the statistics: an equal one already there, or `q` appended.
    int add(ir::Program q, ast::Pos pos) {
        const std::string key = fmt::format("{}|{}|{}|{}", ir::to_string(q.reduction), fmt::join(q.row_dims, ","),
                                            ExpressionPrinter(q, PrintStyle::Language).define(q.body),
                                            [&] {
                                                std::string s;
                                                for (const auto& d : q.params) s += fmt::format("{}:{};", d.name, d.statistic);
                                                return s;
                                            }());
        auto& keys = statistics_.keys;
        if (auto it = std::find(keys.begin(), keys.end(), key); it != keys.end()) return static_cast<int>(it - keys.begin());
        if (static_cast<int>(keys.size()) >= kMaxStatistics)
            throw SourceError({p_.source_name, pos.line, pos.column},
                              fmt::format("a program may use at most {} whole-tensor statistics inside expressions "
                                          "(each one more pass over the data)", kMaxStatistics),
                              p_.source);
        statistics_.programs.push_back(std::make_shared<const ir::Program>(std::move(q)));
        keys.push_back(key);
        return static_cast<int>(keys.size()) - 1;
    }

    // The program with each escaping node read from its statistic's parameter; nodes only the
    // statistics need are left out. Every binding stays (one of a number the program never uses per
    // element still makes it walk rows, as before statistics).
    ir::Program rebuilt(const std::map<int, int>& statistic_of) const {
        ir::Program out = p_.header();
        out.row_dims.clear();  // below, where it walks rows
        // An index only a statistic takes with still has the rows' shape here.
        out.indices = p_.index_inputs();
        std::map<int, int> param_of;  // statistic index -> parameter slot
        std::map<int, int> copied;
        std::vector<int> binding_slot(p_.bindings.size(), -1);
        auto copy_node = [&](auto&& self, int id) -> int {
            if (auto it = copied.find(id); it != copied.end()) return it->second;
            ir::Node n = p_.node(id);
            int mine = -1;
            if (auto s = statistic_of.find(id); s != statistic_of.end()) {
                auto [slot, fresh] = param_of.try_emplace(s->second, static_cast<int>(out.params.size()));
                if (fresh) out.params.push_back({statistics_.prefix + std::to_string(s->second), 0.0, s->second});
                ir::Node param;
                param.kind = ir::NodeKind::Param;
                param.type = n.type;
                param.slot = slot->second;
                param.pos = n.pos;
                out.nodes.push_back(param);
                mine = static_cast<int>(out.nodes.size()) - 1;
            } else if (n.kind == ir::NodeKind::Binding) {
                const auto b = static_cast<std::size_t>(n.slot);
                self(self, p_.bindings[b].node);
                if (binding_slot[b] < 0) throw InternalError("a binding used before its definition");
                n.slot = binding_slot[b];
                out.nodes.push_back(n);
                mine = static_cast<int>(out.nodes.size()) - 1;
            } else {
                for (int i = 0; i < n.arity; ++i) n.args[static_cast<std::size_t>(i)] = self(self, n.args[static_cast<std::size_t>(i)]);
                out.nodes.push_back(n);
                mine = static_cast<int>(out.nodes.size()) - 1;
            }
            copied[id] = mine;
            return mine;
        };
        for (std::size_t b = 0; b < p_.bindings.size(); ++b) {
            const int node = copy_node(copy_node, p_.bindings[b].node);
            binding_slot[b] = static_cast<int>(out.bindings.size());
            out.bindings.push_back({p_.bindings[b].name, node, p_.bindings[b].pos});
        }
        out.body = copy_node(copy_node, p_.body);
        out.results = p_.results;  // binding slots, kept above
        if (out.by_rows()) out.row_dims = p_.row_dims;
        return out;
    }

    const ir::Program& p_;
    Statistics& statistics_;
    std::vector<Level> levels_;
};

}  // namespace

std::vector<ValueLevel> value_levels(const ir::Program& p) {
    std::vector<ValueLevel> levels(p.nodes.size(), ValueLevel::Constant);
    for (std::size_t id = 0; id < p.nodes.size(); ++id) {
        const ir::Node& n = p.nodes[id];
        ValueLevel& mine = levels[id];
        switch (n.kind) {
            case ir::NodeKind::Constant: case ir::NodeKind::Param: break;
            case ir::NodeKind::Binding: mine = levels[static_cast<std::size_t>(p.bindings[static_cast<std::size_t>(n.slot)].node)]; break;
            case ir::NodeKind::Total: mine = ValueLevel::Total; break;
            case ir::NodeKind::Apply:
                for (int i = 0; i < n.arity; ++i) {
                    const ValueLevel arg = levels[static_cast<std::size_t>(n.args[static_cast<std::size_t>(i)])];
                    if (arg == ValueLevel::Data) mine = ValueLevel::Data;
                    else if (arg == ValueLevel::Total && mine == ValueLevel::Constant) mine = ValueLevel::Total;
                }
                break;
            default: mine = ValueLevel::Data; break;  // Input, RowReduce, Take (and derivatives' leaves)
        }
    }
    return levels;
}

std::string statistic_text(const ir::Program& statistic) {
    const std::string body = ExpressionPrinter(statistic, PrintStyle::Language).define(statistic.body);
    if (statistic.reduction == ir::Reduction::Composite) return body;
    return fmt::format("{}({})", ir::to_string(statistic.reduction), without_outer_parens(body));
}

ast::Pos statistic_position(const ir::Program& program, int index) {
    auto find = [&](const ir::Program& p) -> std::optional<ast::Pos> {
        for (const auto& n : p.nodes)
            if (n.kind == ir::NodeKind::Param && p.params[static_cast<std::size_t>(n.slot)].statistic == index) return n.pos;
        return std::nullopt;
    };
    if (const auto at = find(program)) return *at;
    for (const auto& statistic : program.statistics)
        if (const auto at = find(*statistic)) return *at;
    throw InternalError("a statistic nothing reads");
}

ir::Program split_statistics(ir::Program program) {
    if (program.source_reads.empty()) program.source_reads = read_inputs(program);
    // statistic0, statistic1, ...: underscores added until no input, parameter or binding of the
    // user's has such a name.
    std::string prefix = "statistic";
    auto taken = [&](const std::string& name) {
        return std::find(program.inputs.begin(), program.inputs.end(), name) != program.inputs.end() ||
               std::any_of(program.params.begin(), program.params.end(), [&](const auto& p) { return p.name == name; }) ||
               std::any_of(program.bindings.begin(), program.bindings.end(), [&](const auto& b) { return b.name == name; });
    };
    auto collides = [&] {
        for (int i = 0; i < kMaxStatistics; ++i)
            if (taken(prefix + std::to_string(i))) return true;
        return false;
    };
    while (collides()) prefix += "_";
    Statistics statistics{prefix, {}, {}};
    ir::Program out = Splitter(program, statistics).run();
    out.statistics = std::move(statistics.programs);
    return out;
}

}  // namespace lossjit
