// row_sums: a row sum (or mean) built so that the kernel adds it in as early a walk as it can. The
// one rule behind the row sums a gradient needs (differentiate) and a program's own (split_row_sums,
// the checker's last pass before statistics): a kernel walks each row once per level of nesting of
// its row reductions, so a sum that waits for another reduction of the row costs a walk of its own,
// unless what waits can be taken out of it.
// - sum(P * E) with P one value per row as P * sum(E): only products, quotients by per-row values
//   and negations are taken apart; the factors are multiplied in another order than written (the
//   rounding of a product, not a cancellation).
// - sum(A + B - C) as sum(A) + sum(B) - sum(C) where that lets a part be added in an earlier walk.
//   The terms are the ones the sum had, each evaluated as before; the sums are accumulated in
//   float64 and combined once, so the split adds no error beyond the terms' own. It is not the
//   expansion sum(a * (x - m)) = sum(a * x) - m * sum(a), whose new terms can be far larger than
//   the sum: that is never done.
// - a term of one value per row sums to C times it (a mean: itself), with no walk.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "ir/simplify.hpp"

namespace lossjit {

class RowSums {
public:
    // `per_row(id)`: the node holds one value per row; `stage(id)`: the walk after which its value is
    // known (walk_stage, pipeline.hpp). Both see the nodes this adds.
    RowSums(ir::Program& program, NodeBuilder& builder, std::function<bool(int)> per_row,
            std::function<int(int)> stage)
        : p_(program), b_(builder), per_row_(std::move(per_row)), stage_(std::move(stage)) {}

    // sum(e) (how: Sum) or mean(e) (Mean) along the row, split and factored as above where that
    // lets it be added in an earlier walk; factored only, with `along_k`: a sum over a take's K
    // values (`q * x[k]`), where a term of one value per row sums to K times it, not C, and the
    // sums are no walk to save.
    int reduce(RowReduction how, int e, bool along_k = false);
    // reduce(how, e) where it is known in an earlier walk than the plain reduction; nullopt (and no
    // reduction built) where it is not.
    std::optional<int> reduce_earlier(RowReduction how, int e);

    int row_length();                      // C, the row's length: one value per row
    int row_reduce(RowReduction how, int e);  // the plain RowReduce node

private:
    struct Factors {
        int row = -1, element = -1;  // their products so far; -1: none
        bool negated = false;
    };
    struct SignedTerm {
        int node;
        bool negated;
        Factors factors{};
    };
    // `onehot(y) ? a : 0` with `a` one value per row (a take's adjoint) and its row sum in closed form.
    struct OneHotSelect {
        int index;  // the index input node
        int value;  // a
    };

    // How reduce() builds the reduction of e, and the walk after which it is known.
    struct Plan {
        Factors whole;
        std::vector<SignedTerm> terms;  // empty: factored whole
        int stage = 0;
    };
    Plan plan(RowReduction how, int e, bool along_k);
    int build(RowReduction how, int e, const Plan& plan, bool along_k);
    int factored(RowReduction how, int e, const Factors& f, bool along_k);
    int factored_stage(RowReduction how, int e, const Factors& f);
    std::optional<OneHotSelect> one_hot_select(RowReduction how, int id, bool along_k) const;
    int in_row_select(OneHotSelect hot);
    void signed_terms(int id, bool negated, std::vector<SignedTerm>& terms) const;
    void split_factors(int id, Factors& f);
    const ir::Node& resolved(int id) const;

    ir::Program& p_;
    NodeBuilder& b_;
    std::function<bool(int)> per_row_;
    std::function<int(int)> stage_;
};

}  // namespace lossjit
