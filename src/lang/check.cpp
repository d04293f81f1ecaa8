// check: resolve every name, check arity and reductions, fold constants. Every mistake a user can
// make in the program text is caught here (or in parse), before any CUDA source exists.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "lossjit/errors.hpp"
#include "lossjit/tensor.hpp"
#include "pipeline.hpp"

namespace lossjit {
namespace {

constexpr std::string_view kParamKeyword = "param";
constexpr int kMaxUserRank = static_cast<int>(kMaxViewRank);  // a dimension names one of a view's


bool is_function_name(std::string_view name) {
    return find_function(name) || find_whole_reduction(name) || find_row_reduction(name);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
            diagonal = up;
        }
    }
    return row[b.size()];
}

// " (did you mean 'x'?)" for the closest candidate within two edits; "" when none is that close.
std::string suggest_closest(std::string_view name, const std::vector<std::string_view>& candidates) {
    // Edit distance is quadratic, and a megabyte-long name is nobody's typo.
    constexpr std::size_t kLongestTypo = 32;
    if (name.size() > kLongestTypo) return {};
    std::string_view best;
    std::size_t best_distance = 3;  // suggest only close misspellings
    for (std::string_view candidate : candidates) {
        const auto d = edit_distance(name, candidate);
        if (d < best_distance) {
            best_distance = d;
            best = candidate;
        }
    }
    return best.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", best);
}

std::string suggest_function(std::string_view name) {
    std::vector<std::string_view> names(function_names().begin(), function_names().end());
    for (const auto& r : whole_reduction_table()) names.push_back(r.name);
    for (const auto& r : row_reduction_table()) names.push_back(r.name);
    return suggest_closest(name, names);
}

class Checker {
public:
    Checker(const ast::Program& source, const CheckOptions& options)
        : source_(source), options_(options) {
        out_.source_name = source.source_name;
        out_.source = source.source;
        out_.inputs = options.inputs;
    }

    ir::Program run() {
        declare_params();
        for (const auto& st : source_.statements)
            if (st.kind == ast::Statement::Kind::Binding) later_bindings_[st.name] = st.pos;

        for (const auto& st : source_.statements) {
            if (st.kind != ast::Statement::Kind::Binding) continue;
            check_bindable(st.name, st.pos);
            const int value = lower(*st.value);  // may not use its own name: still "later" here
            later_bindings_.erase(st.name);
            binding_slots_[st.name] = static_cast<int>(out_.bindings.size());
            out_.bindings.push_back({st.name, value, st.pos});
        }

        if (!source_.results.empty()) return with_results();
        const ast::Expr& body = *source_.body;
        if (body.kind == ast::ExprKind::Call && body.args.size() == 1) {
            if (const auto reduction = find_whole_reduction(body.text)) {  // the whole body reduces once
                out_.reduction = *reduction;
                out_.body = lower(*body.args[0]);
                check_takes();
                check_caller_params_read();
                return std::move(out_);
            }
        }
        out_.body = lower(body);
        check_takes();
        const ir::Node& top = out_.node(out_.body);
        if (top.kind == ir::NodeKind::Total) {  // `+mean(e)`: the same program as `mean(e)`
            out_.reduction = static_cast<ir::Reduction>(top.slot);
            out_.body = top.args[0];
        } else if (value_levels(out_)[static_cast<std::size_t>(out_.body)] == ValueLevel::Total) {
            out_.reduction = ir::Reduction::Composite;
        }
        check_caller_params_read();
        return std::move(out_);
    }

private:
    // `loss, z, acc`: every result a binding, all of one number computed from the data (a Composite
    // program: the kernel's finish computes each) or all of one value per row (a map whose output
    // holds each); the body is the first (what gradients are of).
    ir::Program with_results() {
        if (source_.results.size() > static_cast<std::size_t>(kMaxResults))
            fail(source_.results[static_cast<std::size_t>(kMaxResults)].pos,
                 fmt::format("a program may list at most {} results", kMaxResults));
        std::vector<std::string> seen;
        for (const auto& r : source_.results) {
            const auto it = binding_slots_.find(r.name);
            if (it == binding_slots_.end())
                fail(r.pos, fmt::format("'{}' is not a binding: each name in the list of results names one "
                                        "(`loss = mean(...); z = ...; loss, z`)", printable(r.name)));
            if (std::find(seen.begin(), seen.end(), r.name) != seen.end())
                fail(r.pos, fmt::format("'{}' is listed twice among the results", printable(r.name)));
            seen.push_back(r.name);
            out_.results.push_back({r.name, it->second, r.pos});
        }
        out_.body = lower(*source_.body);
        check_takes();
        // All numbers (a Composite program), or all values per row (a map whose output holds each).
        enum class Kind { Number, PerRow, Constant, PerElement };
        constexpr const char* kWords[] = {"one number", "one value per row", "a constant", "one value per element"};
        const auto levels = value_levels(out_);
        const auto per_row = per_row_nodes(out_, out_.index_inputs());
        auto kind_of = [&](const ir::Result& r) {
            const auto node = static_cast<std::size_t>(out_.bindings[static_cast<std::size_t>(r.binding)].node);
            if (levels[node] == ValueLevel::Total) return Kind::Number;
            if (levels[node] == ValueLevel::Data) return per_row[node] ? Kind::PerRow : Kind::PerElement;
            return Kind::Constant;
        };
        auto words = [&](Kind k) { return kWords[static_cast<int>(k)]; };
        const Kind first = kind_of(out_.results.front());
        for (const auto& r : out_.results) {
            const Kind kind = kind_of(r);
            if (kind != Kind::Number && kind != Kind::PerRow)
                fail(r.pos, fmt::format("result '{}' is {}: each result in a list is one number computed from the data "
                                        "(a whole-tensor reduction such as mean(...), or arithmetic of them), or each "
                                        "one value per row (sum(x, -1), x[y], ...)",
                                        printable(r.name), words(kind)));
            if (kind != first)
                fail(r.pos, fmt::format("result '{}' is {}, but '{}' is {}: the results of a list are all numbers or all "
                                        "values per row (mixing them is not supported yet)",
                                        printable(r.name), words(kind), printable(out_.results.front().name), words(first)));
        }
        out_.reduction = first == Kind::Number ? ir::Reduction::Composite : ir::Reduction::None;
        check_caller_params_read();
        return std::move(out_);
    }

    [[noreturn]] void fail(ast::Pos pos, const std::string& message) const {
        throw SourceError({source_.source_name, pos.line, pos.column}, message, source_.source);
    }

    void declare_params() {
        for (const auto& st : source_.statements) {
            if (st.kind != ast::Statement::Kind::Param) continue;
            if (st.name == kParamKeyword) fail(st.pos, "'param' is a keyword and cannot name a parameter");
            if (find_constant(st.name)) fail(st.pos, fmt::format("'{}' is a constant and cannot be a parameter", st.name));
            if (is_function_name(st.name))
                fail(st.pos, fmt::format("'{}' is a function and cannot be a parameter", st.name));
            if (param_slot(st.name)) fail(st.pos, fmt::format("parameter '{}' is declared twice", printable(st.name)));
            if (std::find(out_.inputs.begin(), out_.inputs.end(), st.name) != out_.inputs.end())
                fail(st.pos, fmt::format("'{}' is listed as an input and cannot also be a parameter", printable(st.name)));
            out_.params.push_back({st.name, st.value->number});
        }
        // The caller's declarations add parameters or override the program's defaults.
        for (const auto& p : options_.params) {
            if (auto slot = param_slot(p.name)) {
                out_.params[static_cast<std::size_t>(*slot)].default_value = p.default_value;
            } else {
                out_.params.push_back(p);
            }
        }
    }

    // A parameter the caller sets but the program never reads is a misspelling (`betta` for `beta`),
    // not a harmless extra: the value the caller meant to change would silently keep its default.
    void check_caller_params_read() const {
        std::vector<bool> read(out_.params.size(), false);
        for (const auto& n : out_.nodes)
            if (n.kind == ir::NodeKind::Param) read[static_cast<std::size_t>(n.slot)] = true;
        for (const auto& p : options_.params) {
            if (read[static_cast<std::size_t>(*param_slot(p.name))]) continue;
            std::vector<std::string_view> names;
            for (std::size_t i = 0; i < out_.params.size(); ++i)
                if (read[i]) names.push_back(out_.params[i].name);
            for (const auto& input : out_.inputs) names.push_back(input);
            throw UsageError(fmt::format("the program does not use a parameter '{}'{}", printable(p.name),
                                         suggest_closest(p.name, names)));
        }
    }

    std::optional<int> param_slot(std::string_view name) const {
        for (std::size_t i = 0; i < out_.params.size(); ++i)
            if (out_.params[i].name == name) return static_cast<int>(i);
        return std::nullopt;
    }

    void check_bindable(const std::string& name, ast::Pos pos) const {
        if (find_constant(name)) fail(pos, fmt::format("'{}' is a constant and cannot be rebound", name));
        if (param_slot(name)) fail(pos, fmt::format("'{}' is a parameter and cannot be rebound", printable(name)));
        if (binding_slots_.count(name)) fail(pos, fmt::format("'{}' is already defined", printable(name)));
        if (is_function_name(name))
            fail(pos, fmt::format("'{}' is a function name and cannot be bound", name));
        if (std::find(out_.inputs.begin(), out_.inputs.end(), name) != out_.inputs.end())
            fail(pos, fmt::format("'{}' is an input and cannot be rebound", printable(name)));
    }

    // The parser bounds the syntax tree's depth, but min/max of many arguments become a tree of
    // their own here, so the checked tree is bounded again, with the same limit and message.
    int add(ir::Node node) {
        int depth = 1;
        for (int i = 0; i < node.arity; ++i)
            depth = std::max(depth, 1 + depths_[static_cast<std::size_t>(node.args[static_cast<std::size_t>(i)])]);
        if (depth > kMaxNesting)
            fail(node.pos, fmt::format("expression is nested too deeply (the limit is {} levels)", kMaxNesting));
        out_.nodes.push_back(node);
        depths_.push_back(depth);
        return static_cast<int>(out_.nodes.size()) - 1;
    }

    int constant(double value, ast::Pos pos, ValueType type = ValueType::Float) {
        ir::Node n;
        n.kind = ir::NodeKind::Constant;
        n.value = value;
        n.type = type;
        n.pos = pos;
        return add(n);
    }

    // Builds an application, folding it when every argument is a constant. Folding uses the same
    // float64 definitions as the CPU reference.
    int apply(Builtin fn, std::initializer_list<int> args, ast::Pos pos) {
        const auto& info = builtin_info(fn);
        ir::Node n;
        n.kind = ir::NodeKind::Apply;
        n.fn = fn;
        n.type = info.result;
        n.arity = static_cast<int>(args.size());
        n.pos = pos;
        bool all_constant = true;
        std::array<double, 3> values{};
        int i = 0;
        for (int a : args) {
            n.args[static_cast<std::size_t>(i)] = a;
            const auto& arg = out_.node(a);
            all_constant = all_constant && arg.kind == ir::NodeKind::Constant;
            values[static_cast<std::size_t>(i)] = arg.value;
            ++i;
        }
        if (all_constant) return constant(fold_builtin(fn, values[0], values[1], values[2]), pos, info.result);
        return add(n);
    }

    int lower(const ast::Expr& e) {
        switch (e.kind) {
            case ast::ExprKind::Number: return constant(e.number, e.pos);
            case ast::ExprKind::Name: return lower_name(e);
            case ast::ExprKind::Call: return lower_call(e);
            case ast::ExprKind::Unary: {
                const int operand = lower(*e.args[0]);
                if (e.text == "+") return operand;
                if (const auto fn = find_operator(e.text, 1)) return apply(*fn, {operand}, e.pos);
                break;
            }
            case ast::ExprKind::Binary: {
                const auto fn = find_operator(e.text, 2);
                if (!fn) break;
                const int lhs = lower(*e.args[0]);
                const int rhs = lower(*e.args[1]);
                return apply(*fn, {lhs, rhs}, e.pos);
            }
            case ast::ExprKind::Index: return lower_index(e);
            case ast::ExprKind::Tuple:
                fail(e.pos, "a tuple '(a, b)' is only the dimensions of a reduction, as in sum(x, (0, 2))");
            case ast::ExprKind::Conditional: {
                const int c = lower(*e.args[0]);
                const int a = lower(*e.args[1]);
                const int b = lower(*e.args[2]);
                return apply(Builtin::Select, {c, a, b}, e.pos);
            }
        }
        throw InternalError("checker met an unknown syntax node '" + e.text + "'");
    }

    int lower_name(const ast::Expr& e) {
        const std::string& name = e.text;
        if (formula_) {  // inside a table definition (expand_definition): its names alone
            if (auto it = formula_->find(name); it != formula_->end()) return it->second;
            throw InternalError(fmt::format("a row reduction's definition names '{}'", name));
        }
        if (auto it = binding_slots_.find(name); it != binding_slots_.end()) {
            ir::Node n;
        n.kind = ir::NodeKind::Binding;
            n.slot = it->second;
            n.type = out_.node(out_.bindings[static_cast<std::size_t>(it->second)].node).type;
            n.pos = e.pos;
            return add(n);
        }
        if (auto it = later_bindings_.find(name); it != later_bindings_.end()) {
            fail(e.pos, fmt::format("'{}' is used before its definition on line {}", printable(name),
                                    it->second.line));
        }
        if (auto value = find_constant(name)) return constant(*value, e.pos);
        if (auto slot = param_slot(name)) {
            ir::Node n;
        n.kind = ir::NodeKind::Param;
            n.slot = *slot;
            n.pos = e.pos;
            return add(n);
        }
        if (is_function_name(name))
            fail(e.pos, fmt::format("'{}' is a function: call it as {}(...)", name, name));
        // `param` starts a declaration wherever a statement may start, so as a name it would work in
        // some places and not others ("param * 2" does not parse); it is a keyword everywhere.
        if (name == kParamKeyword)
            fail(e.pos, "'param' is a keyword (param NAME = NUMBER; declares a parameter) and cannot name an input");

        auto it = std::find(out_.inputs.begin(), out_.inputs.end(), name);
        if (it == out_.inputs.end()) {
            if (!options_.inputs.empty()) {
                fail(e.pos, fmt::format("unknown name '{}': not an input ({}), a parameter or a "
                                        "binding", printable(name), fmt::join(options_.inputs, ", ")));
            }
            out_.inputs.push_back(name);
            it = out_.inputs.end() - 1;
        }
        ir::Node n;
        n.kind = ir::NodeKind::Input;
        n.slot = static_cast<int>(it - out_.inputs.begin());
        n.pos = e.pos;
        return add(n);
    }

    // sum(e, -1), logsumexp(e, (2, 3)), ...: along rows (the program's row dimensions). sum(e),
    // mean(e), batchmean(e) below the top of the body: a Total (the body is then a scalar
    // expression of reductions).
    std::optional<int> lower_reduction(const ast::Expr& e) {
        const auto whole = find_whole_reduction(e.text);
        const auto row = find_row_reduction(e.text);
        if (!whole && !row) return std::nullopt;
        const std::size_t given = e.args.size();
        if (given == 1 && whole) return reduction_node(ir::NodeKind::Total, static_cast<int>(*whole), e);
        if (given == 2 && row) {
            // A definition's own reductions (var's mean(x, -1)) go along the call's dimensions.
            const std::vector<int> dims = formula_ ? definition_dims_ : reduced_dims(*e.args[1], e.text);
            note_row_dims(dims, e.args[1]->pos);
            const RowReductionInfo& info = row_reduction_info(*row);
            if (!info.definition.empty()) {
                const auto outer = std::exchange(definition_dims_, dims);
                const int value = expand_definition(info, e);
                definition_dims_ = outer;
                return value;
            }
            return reduction_node(ir::NodeKind::RowReduce, static_cast<int>(*row), e);
        }
        if (whole && row)
            fail(e.pos, fmt::format("'{}' takes 1 argument (the whole tensor) or 2 ({}(x, -1): along the last "
                                    "dimension), but {} were given", e.text, e.text, given));
        if (whole)
            fail(e.pos, fmt::format("'{}' takes 1 argument, but {} were given", e.text, given));
        fail(e.pos, fmt::format("'{}' takes 2 arguments, the expression and the dimension ({}(x, -1)), but {} {} given",
                                e.text, e.text, given, given == 1 ? "was" : "were"));
    }

    // x[y] picks one element along one dimension: the program's row dimension.
    // And from a value that varies along the row: one that reaches no input but through reductions
    // and takes (`2[y]`, `w[y]` of a parameter, `logsumexp(x, -1)[y]`, `y[y]`) is the same at every
    // column, so the take would give it whatever y says: never what is meant. (An input constant
    // along the row by its shape is refused by the layout, which knows the shapes.)
    void check_takes() const {
        std::vector<bool> row_constant;  // per node: the same at every column (per_row_nodes), made on first need
        for (const auto& n : out_.nodes) {
            if (n.kind != ir::NodeKind::Take) continue;
            if (out_.row_dims.size() > 1)
                fail(n.pos, fmt::format("x[y] takes along one dimension, but the program's reductions go along ({})",
                                        fmt::join(out_.row_dims, ", ")));
            if (row_constant.empty()) row_constant = per_row_nodes(out_, out_.index_inputs());
            if (row_constant[static_cast<std::size_t>(n.args[0])])
                fail(n.pos, "x[y] takes from a value that is the same at every column of the row (a constant, a "
                            "parameter, a reduction, an index): it would give that value whatever y is; take from an "
                            "input (x[y], (x / T)[y])");
        }
    }

    // The dimensions of sum(x, d) / sum(x, (d1, d2, ...)): integer constants, each once, sorted.
    std::vector<int> reduced_dims(const ast::Expr& e, const std::string& function) {
        std::vector<const ast::Expr*> written;
        if (e.kind == ast::ExprKind::Tuple) {
            for (const auto& a : e.args) written.push_back(a.get());
        } else {
            written.push_back(&e);
        }
        std::vector<int> dims;
        for (const ast::Expr* d : written) {
            if (d->kind == ast::ExprKind::Tuple) fail(d->pos, "a dimension must be an integer, not a tuple");
            const ir::Node& n = out_.node(lower(*d));
            const bool integer = n.kind == ir::NodeKind::Constant && n.value == std::trunc(n.value) &&
                                 std::abs(n.value) <= static_cast<double>(kMaxUserRank);
            if (!integer)
                fail(d->pos, fmt::format("the dimension of '{}' must be an integer constant from -{} to {} ({}(x, -1): "
                                         "along the last; ({}(x, (0, 2)): along several)",
                                         function, kMaxUserRank, kMaxUserRank - 1, function, function));
            const int value = static_cast<int>(n.value);
            if (std::find(dims.begin(), dims.end(), value) != dims.end())
                fail(d->pos, fmt::format("dimension {} is named twice", value));
            dims.push_back(value);
        }
        std::sort(dims.begin(), dims.end());
        return dims;
    }

    // Every row reduction and take of a program goes along the same dimensions (one kernel walks
    // one kind of row): the first one written sets them.
    void note_row_dims(const std::vector<int>& dims, ast::Pos pos) {
        if (out_.row_dims.empty()) {
            out_.row_dims = dims;
            row_dims_pos_ = pos;
            return;
        }
        if (dims == out_.row_dims) return;
        auto spell = [](const std::vector<int>& d) {
            return d.size() == 1 ? std::to_string(d[0]) : fmt::format("({})", fmt::join(d, ", "));
        };
        fail(pos, fmt::format("this reduction goes along {}, but the one at {}:{} along {}: the reductions inside "
                              "one program go along the same dimensions, written alike",
                              spell(dims), row_dims_pos_.line, row_dims_pos_.column, spell(out_.row_dims)));
    }

    // A reduction the table defines in the language (var, std): its definition over x (the call's
    // argument, lowered once), C (the row's length) and the names its own statements bind (each
    // lowered once, not a binding of the program), every node at the call's position. Its value,
    // derivative and kernel are then those of the reductions it is made of.
    int expand_definition(const RowReductionInfo& info, const ast::Expr& call) {
        const int argument = lower(*call.args[0]);
        const ast::Program definition = parse(info.definition, fmt::format("the definition of '{}'", info.name));
        ir::Node length;
        length.kind = ir::NodeKind::RowLength;
        length.pos = call.pos;
        const auto outer = std::move(formula_);
        formula_ = std::map<std::string, int>{{"x", argument}, {"C", add(length)}};
        for (const auto& statement : definition.statements) {
            place(*statement.value, call.pos);
            const int value = lower(*statement.value);
            (*formula_)[statement.name] = value;
        }
        place(*definition.body, call.pos);
        const int value = lower(*definition.body);
        formula_ = outer;
        return value;
    }
    static void place(ast::Expr& e, ast::Pos pos) {
        e.pos = pos;
        for (auto& a : e.args) place(*a, pos);
    }

    // A Total or RowReduce node (`slot`: which reduction) of the call's first argument, lowered
    // inside the reduction.
    int reduction_node(ir::NodeKind kind, int slot, const ast::Expr& call) {
        const int argument = lower(*call.args[0]);
        ir::Node n;
        n.kind = kind;
        n.slot = slot;
        n.arity = 1;
        n.args[0] = argument;
        n.pos = call.pos;
        return add(n);
    }

    // x[y]: y must name an input (integer class indices, one per row).
    int lower_index(const ast::Expr& e) {
        const ast::Expr& index = *e.args[1];
        const int values = lower(*e.args[0]);
        const int slot_node = index.kind == ast::ExprKind::Name ? lower(index) : -1;
        if (slot_node < 0 || out_.node(slot_node).kind != ir::NodeKind::Input)
            fail(index.pos, "an index must be an input: a tensor of integer class indices, one per row (x[y])");
        ir::Node n;
        n.kind = ir::NodeKind::Take;
        n.arity = 2;
        n.args[0] = values;
        n.args[1] = slot_node;
        n.pos = e.pos;
        return add(n);
    }

    int lower_call(const ast::Expr& e) {
        if (const auto reduced = lower_reduction(e)) return *reduced;
        const auto signature = find_function(e.text);
        if (!signature) fail(e.pos, fmt::format("unknown function '{}'{}", printable(e.text), suggest_function(e.text)));

        const int given = static_cast<int>(e.args.size());
        if (given < signature->min_args || (signature->max_args >= 0 && given > signature->max_args)) {
            std::string expected;
            if (signature->max_args < 0) expected = fmt::format("at least {} arguments", signature->min_args);
            else if (signature->min_args == 1) expected = "1 argument";
            else expected = fmt::format("{} arguments", signature->min_args);
            fail(e.pos, fmt::format("'{}' takes {}, but {} {} given", e.text, expected, given,
                                    given == 1 ? "was" : "were"));
        }
        std::vector<int> args;
        for (const auto& a : e.args) args.push_back(lower(*a));
        if (signature->max_args < 0) {
            // min/max: pairwise, as a balanced tree: a left fold of 1000 arguments would be 1000
            // levels deep. Either order gives the same value (nan wins wherever it is).
            while (args.size() > 1) {
                std::vector<int> next;
                for (std::size_t i = 0; i + 1 < args.size(); i += 2) next.push_back(apply(signature->id, {args[i], args[i + 1]}, e.pos));
                if (args.size() % 2) next.push_back(args.back());
                args = std::move(next);
            }
            return args[0];
        }
        switch (args.size()) {
            case 1: return apply(signature->id, {args[0]}, e.pos);
            case 2: return apply(signature->id, {args[0], args[1]}, e.pos);
            case 3: return apply(signature->id, {args[0], args[1], args[2]}, e.pos);
        }
        throw InternalError("function with unsupported arity");
    }

    const ast::Program& source_;
    const CheckOptions& options_;
    ir::Program out_;
    std::vector<int> depths_;  // parallel to out_.nodes
    // While a table definition is lowered: what its names (x, C, its own) stand for.
    std::optional<std::map<std::string, int>> formula_;
    std::vector<int> definition_dims_;  // while expanding a definition: its call's dimensions
    ast::Pos row_dims_pos_;             // where the program's row dimensions were first written
    std::map<std::string, int> binding_slots_;
    std::map<std::string, ast::Pos> later_bindings_;
};

}  // namespace

std::string_view ir::to_string(Reduction r) {
    if (r == Reduction::None) return "none (elementwise map)";
    if (r == Reduction::Composite) return "composite";  // a scalar expression of several reductions
    for (const auto& named : whole_reduction_table())
        if (named.reduction == r) return named.name;
    throw InternalError("a reduction without a name");
}

std::vector<std::string_view> reserved_words() {
    std::vector<std::string_view> words(function_names().begin(), function_names().end());
    for (const auto& r : whole_reduction_table()) words.push_back(r.name);
    for (const auto& r : row_reduction_table())
        if (std::find(words.begin(), words.end(), r.name) == words.end()) words.push_back(r.name);
    words.insert(words.end(), constant_names().begin(), constant_names().end());
    words.push_back(kParamKeyword);
    return words;
}

ir::Program check(const ast::Program& program, const CheckOptions& options) {
    auto is_identifier = [](std::string_view s) {
        auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
        auto digit = [](char c) { return c >= '0' && c <= '9'; };
        return !s.empty() && letter(s[0]) &&
               std::all_of(s.begin(), s.end(), [&](char c) { return letter(c) || digit(c); });
    };
    for (const auto& name : options.inputs) {
        if (!is_identifier(name)) throw UsageError(fmt::format("input name '{}' is not an identifier", printable(name)));
        if (name == kParamKeyword) throw UsageError("'param' is a keyword and cannot name an input");
    }
    for (const auto& p : options.params) {
        if (!is_identifier(p.name)) throw UsageError(fmt::format("parameter name '{}' is not an identifier", printable(p.name)));
        if (p.name == kParamKeyword) throw UsageError("'param' is a keyword and cannot name a parameter");
    }
    for (std::size_t i = 0; i < options.inputs.size(); ++i) {
        for (std::size_t j = 0; j < i; ++j)
            if (options.inputs[i] == options.inputs[j])
                throw UsageError(fmt::format("input '{}' is listed twice", options.inputs[i]));
    }
    // A name given both ways would silently become a parameter and leave the input unread.
    for (const auto& p : options.params) {
        if (std::find(options.inputs.begin(), options.inputs.end(), p.name) != options.inputs.end())
            throw UsageError(fmt::format("'{}' is listed as an input and cannot also be a parameter", p.name));
        for (const auto& q : options.params)
            if (&q < &p && q.name == p.name) throw UsageError(fmt::format("parameter '{}' is given twice", p.name));
    }
    return split_statistics(split_row_sums(Checker(program, options).run()));
}

}  // namespace lossjit
