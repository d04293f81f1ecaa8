// row_sums: RowSums (row_sums.hpp), and split_row_sums (pipeline.hpp), which builds a program's own
// row sums and means with it.
#include "ir/row_sums.hpp"

#include <algorithm>
#include <map>

#include "lossjit/errors.hpp"
#include "pipeline.hpp"

namespace lossjit {

int RowSums::reduce(RowReduction how, int e, bool along_k) { return build(how, e, plan(how, e, along_k), along_k); }

std::optional<int> RowSums::reduce_earlier(RowReduction how, int e) {
    const Plan p = plan(how, e, false);
    if (p.stage >= stage_(e) + 1) return std::nullopt;
    return build(how, e, p, false);
}

int RowSums::row_length() {
    ir::Node length;
    length.kind = ir::NodeKind::RowLength;
    length.pos = b_.pos();
    return b_.intern(length);
}

int RowSums::row_reduce(RowReduction how, int e) {
    ir::Node n;
    n.kind = ir::NodeKind::RowReduce;
    n.slot = static_cast<int>(how);
    n.arity = 1;
    n.args[0] = e;
    n.pos = b_.pos();
    return b_.intern(n);
}

RowSums::Plan RowSums::plan(RowReduction how, int e, bool along_k) {
    Plan p;
    split_factors(e, p.whole);
    p.stage = factored_stage(how, e, p.whole);
    if (along_k) return p;
    // The walk after which each form's value is known, before either is built (a reduction built
    // and not used would still be counted among the kernel's accumulators).
    std::vector<SignedTerm> terms;
    signed_terms(e, false, terms);
    int split_stage = 0;
    for (auto& t : terms) {
        split_factors(t.node, t.factors);
        split_stage = std::max(split_stage, factored_stage(how, t.node, t.factors));
    }
    if (terms.size() >= 2 && split_stage < p.stage) {
        p.terms = std::move(terms);
        p.stage = split_stage;
    }
    return p;
}

int RowSums::build(RowReduction how, int e, const Plan& p, bool along_k) {
    if (p.terms.empty()) return factored(how, e, p.whole, along_k);
    // Terms without a per-row factor whose sums fall in one walk share one accumulator.
    std::map<int, int> plain;  // the walk of a term's sum -> the signed sum of its terms so far
    std::vector<int> parts;
    for (const auto& t : p.terms) {
        if (t.factors.element < 0 || t.factors.row >= 0 || one_hot_select(how, t.factors.element, false)) {
            const int sum = factored(how, t.node, t.factors, false);
            parts.push_back(t.negated ? b_.neg(sum) : sum);
            continue;
        }
        auto [at, fresh] = plain.try_emplace(stage_(t.node) + 1, t.negated ? b_.neg(t.node) : t.node);
        if (!fresh) at->second = t.negated ? b_.sub(at->second, t.node) : b_.add(at->second, t.node);
    }
    for (const auto& [walk, sum] : plain) parts.push_back(row_reduce(how, sum));
    int split = parts[0];
    for (std::size_t i = 1; i < parts.size(); ++i) split = b_.add(split, parts[i]);
    return split;
}

// sum(e) by its factors: P * sum(E); C * e for e one value per row (a mean: e; no walk); E of
// `onehot(y) ? a : 0` in closed form (one_hot_select, no walk); else sum(e).
int RowSums::factored(RowReduction how, int e, const Factors& f, bool along_k) {
    if (f.element < 0) {
        if (along_k) throw InternalError("RowSums: a value per row summed over a take's K values");
        return how == RowReduction::Mean ? e : b_.mul(row_length(), e);
    }
    const auto hot = one_hot_select(how, f.element, along_k);
    if (f.row < 0 && !hot) return row_reduce(how, e);
    int sum = hot ? in_row_select(*hot) : row_reduce(how, f.element);
    if (f.row >= 0) sum = b_.mul(f.row, sum);
    return f.negated ? b_.neg(sum) : sum;
}

int RowSums::factored_stage(RowReduction how, int e, const Factors& f) {
    if (f.element < 0) return stage_(e);
    if (const auto hot = one_hot_select(how, f.element, false))  // in closed form: no walk
        return std::max(f.row < 0 ? 0 : stage_(f.row), stage_(hot->value));
    if (f.row < 0) return stage_(e) + 1;
    return std::max(stage_(f.row), stage_(f.element) + 1);
}

// `onehot(y) ? a : 0` with `a` one value per row: what a take's adjoint is (differentiate's
// backward_take), and along the row it sums to `a` where y names a column of it and to 0 elsewhere,
// with no walk (in_row_select). Summed in a walk instead, it cost a pass over the row and a barrier
// for each row where a row reduction of a take's value is differentiated (focal loss, label
// smoothing: the logsumexp's adjoint is the sum of lp's). The closed form is the walk's sum in
// every bit but the sign of a zero a: the walk adds a to the accumulator's +0. (Not over a take's
// K values, whose sum is not the row's; not for a mean.)
std::optional<RowSums::OneHotSelect> RowSums::one_hot_select(RowReduction how, int id, bool along_k) const {
    if (along_k || how != RowReduction::Sum) return std::nullopt;
    const ir::Node& n = resolved(id);
    if (n.kind != ir::NodeKind::Apply || n.fn != Builtin::Select) return std::nullopt;
    const ir::Node& hot = p_.node(n.args[0]);
    const ir::Node& otherwise = p_.node(n.args[2]);
    if (hot.kind != ir::NodeKind::OneHot || otherwise.kind != ir::NodeKind::Constant || otherwise.value != 0.0 ||
        !per_row_(n.args[1]))
        return std::nullopt;
    return OneHotSelect{hot.args[0], n.args[1]};
}

int RowSums::in_row_select(OneHotSelect hot) {
    ir::Node in_row;
    in_row.kind = ir::NodeKind::InRow;
    in_row.type = ValueType::Bool;
    in_row.arity = 1;
    in_row.args[0] = hot.index;
    in_row.pos = b_.pos();
    return b_.select(b_.intern(in_row), hot.value, b_.constant(0.0));
}

// The terms of e through +, - and negation (and bindings), with their signs.
void RowSums::signed_terms(int id, bool negated, std::vector<SignedTerm>& terms) const {
    const ir::Node& n = p_.node(id);
    if (n.kind == ir::NodeKind::Binding) return signed_terms(p_.bindings[static_cast<std::size_t>(n.slot)].node, negated, terms);
    if (n.kind == ir::NodeKind::Apply && n.fn == Builtin::Neg) return signed_terms(n.args[0], !negated, terms);
    if (n.kind == ir::NodeKind::Apply && (n.fn == Builtin::Add || n.fn == Builtin::Sub)) {
        const int right = n.args[1];
        const bool right_negated = n.fn == Builtin::Sub ? !negated : negated;
        signed_terms(n.args[0], negated, terms);
        return signed_terms(right, right_negated, terms);
    }
    terms.push_back({id, negated});
}

void RowSums::split_factors(int id, Factors& f) {
    const ir::Node& n = p_.node(id);
    if (n.kind == ir::NodeKind::Binding) return split_factors(p_.bindings[static_cast<std::size_t>(n.slot)].node, f);
    if (per_row_(id)) {
        f.row = f.row < 0 ? id : b_.mul(f.row, id);
        return;
    }
    if (n.kind == ir::NodeKind::Apply && n.fn == Builtin::Neg) {
        f.negated = !f.negated;
        return split_factors(n.args[0], f);
    }
    if (n.kind == ir::NodeKind::Apply && n.fn == Builtin::Mul) {
        const int right = n.args[1];  // (n may move as nodes are added)
        split_factors(n.args[0], f);
        return split_factors(right, f);
    }
    if (n.kind == ir::NodeKind::Apply && n.fn == Builtin::Div && per_row_(n.args[1])) {
        const int denominator = n.args[1];
        split_factors(n.args[0], f);
        f.row = b_.div(f.row < 0 ? b_.constant(1.0) : f.row, denominator);
        return;
    }
    f.element = f.element < 0 ? id : b_.mul(f.element, id);
}

const ir::Node& RowSums::resolved(int id) const {
    const ir::Node* n = &p_.node(id);
    while (n->kind == ir::NodeKind::Binding) n = &p_.node(p_.bindings[static_cast<std::size_t>(n->slot)].node);
    return *n;
}

namespace {

// The walks a by-rows kernel of the program takes over each row, counted as walk_stage counts them
// (the emitter's sharing of a mean's walk with its squared deviations aside): the latest stage of a
// row reduction that the body or a binding reaches.
int walks(const ir::Program& program) {
    std::vector<int> roots{program.body};
    for (const auto& binding : program.bindings) roots.push_back(binding.node);
    const std::vector<bool> reached = reached_nodes(program, roots);
    std::vector<int> stage(program.nodes.size(), 0);
    int most = 0;
    for (std::size_t id = 0; id < program.nodes.size(); ++id) {
        const auto stage_of = [&](int arg) { return stage[static_cast<std::size_t>(arg)]; };
        stage[id] = walk_stage(program, static_cast<int>(id), stage_of, false);
        if (reached[id] && program.nodes[id].kind == ir::NodeKind::RowReduce) most = std::max(most, stage[id]);
    }
    return most;
}

// A program's row sums and means rebuilt by RowSums where that saves the program a walk. Which
// values are one per row is decided without the inputs' shapes (the checker has none): row
// reductions, row lengths, constants, parameters and what is computed from them alone; an input is
// taken to vary along the row even where it will be [N, 1]. Left as written: a reduction that
// reaches a take (whether it goes along the row or along a take's K values, `sum(q * x[k], -1)`, is
// the layout's to say, and sums over K values are no walk to save), a sum in a program with takes
// (run()), and one of a value per row (the var and std of one: their `sum(1, -1)` and sums of a
// constant deviation are no walk either).
class RowSumSplitter {
public:
    explicit RowSumSplitter(const ir::Program& program) : source_(program), out_(program.header()), builder_(out_) {}

    ir::Program run() {
        // In a program with takes an input may hold K values per row (q [N, K] beside x[k]) and a row
        // sum of it runs over them: a term of one value per row sums to K times it there, not C, and
        // a row of no columns can still have K values. Means are split alike over either; sums only
        // where no take can make them K sums.
        const bool takes = std::any_of(source_.nodes.begin(), source_.nodes.end(),
                                       [](const ir::Node& n) { return n.kind == ir::NodeKind::Take; });
        std::vector<bool> reaches_take(source_.nodes.size(), false);
        RowSums sums(out_, builder_, [this](int id) { return per_row(id); }, [this](int id) { return stage(id); });
        bool split = false;
        copy_nodes(source_, out_, {}, [&](std::size_t id, const ir::Node& n) {
            const ir::Node& written = source_.nodes[id];
            auto reached = [&](int source_id) { return reaches_take[static_cast<std::size_t>(source_id)]; };
            bool take = written.kind == ir::NodeKind::Take;
            if (written.kind == ir::NodeKind::Binding)
                take = reached(source_.bindings[static_cast<std::size_t>(written.slot)].node);
            for (int i = 0; i < written.arity; ++i) take = take || reached(written.args[static_cast<std::size_t>(i)]);
            reaches_take[id] = take;
            const auto how = static_cast<RowReduction>(n.slot);
            if (n.kind == ir::NodeKind::RowReduce && (how == RowReduction::Mean || (how == RowReduction::Sum && !takes)) &&
                !reached(written.args[0]) && !per_row(n.args[0])) {
                builder_.set_pos(n.pos);
                if (const std::optional<int> rebuilt = sums.reduce_earlier(how, n.args[0])) {
                    split = true;
                    return how == RowReduction::Sum ? empty_rows_as_written(*rebuilt, sums) : *rebuilt;
                }
            }
            return builder_.intern(n);
        });
        if (!split || walks(out_) >= walks(source_)) return source_;  // as the checker left it
        return std::move(out_);
    }

private:
    // A row of no elements sums to 0 as written. Taken apart, a per-row factor there (a logsumexp's
    // -inf, a mean's nan) times the empty sum, or C times it, is nan: the rebuilt sum holds where
    // C > 0. (A mean taken apart keeps a mean of elements, nan there as written.)
    int empty_rows_as_written(int rebuilt, RowSums& sums) {
        NodeBuilder& b = builder_;
        const int some = b.binary(Builtin::Gt, sums.row_length(), b.constant(0.0));
        return b.select(some, rebuilt, b.constant(0.0));
    }

    bool per_row(int id) {
        if (per_row_.size() < out_.nodes.size()) per_row_.resize(out_.nodes.size(), -1);
        if (const signed char known = per_row_[static_cast<std::size_t>(id)]; known >= 0) return known != 0;
        const ir::Node n = out_.node(id);  // a copy: the recursion does not add nodes, but stays safe if it did
        bool mine = false;
        switch (n.kind) {
            case ir::NodeKind::Constant: case ir::NodeKind::Param: case ir::NodeKind::RowReduce:
            case ir::NodeKind::RowLength: case ir::NodeKind::Total:
                mine = true;
                break;
            case ir::NodeKind::Binding: mine = per_row(out_.bindings[static_cast<std::size_t>(n.slot)].node); break;
            case ir::NodeKind::Apply:
                mine = true;
                for (int i = 0; i < n.arity; ++i) mine = mine && per_row(n.args[static_cast<std::size_t>(i)]);
                break;
            default: break;  // an input, a take
        }
        per_row_[static_cast<std::size_t>(id)] = mine ? 1 : 0;
        return mine;
    }
    int stage(int id) {
        if (stage_.size() < out_.nodes.size()) stage_.resize(out_.nodes.size(), -1);
        if (const int known = stage_[static_cast<std::size_t>(id)]; known >= 0) return known;
        const int s = walk_stage(out_, id, [this](int arg) { return stage(arg); }, false);
        stage_[static_cast<std::size_t>(id)] = s;
        return s;
    }

    const ir::Program& source_;
    ir::Program out_;
    NodeBuilder builder_;
    std::vector<signed char> per_row_;  // per node: per_row(), -1 until asked
    std::vector<int> stage_;            // per node: stage(), -1 until asked
};

}  // namespace

ir::Program split_row_sums(const ir::Program& program) { return RowSumSplitter(program).run(); }

}  // namespace lossjit
