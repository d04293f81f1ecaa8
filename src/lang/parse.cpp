// parse: program text -> ast::Program.
//
// The grammar is a set of PEGTL rule structs; building the tree happens in actions kept apart from
// it. Rules that name what was expected when they fail carry a message in `kExpected`; any failure of
// such a rule becomes a SourceError pointing at the column where the parser stood.
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <tao/pegtl.hpp>

#include "lossjit/errors.hpp"
#include "pipeline.hpp"

namespace lossjit {
namespace {

namespace pegtl = tao::pegtl;

namespace grammar {
using namespace pegtl;

struct comment : seq<one<'#'>, until<eolf>> {};
struct sp : star<sor<ascii::space, comment>> {};
template <typename Rule>
struct token : seq<Rule, sp> {};

struct identifier : ascii::identifier {};

struct digits : plus<ascii::digit> {};
struct exponent_digits : digits {};
struct exponent : seq<one<'e', 'E'>, opt<one<'+', '-'>>, must<exponent_digits>> {};
struct mantissa : sor<seq<digits, opt<one<'.'>, opt<digits>>>, seq<one<'.'>, digits>> {};
struct number_end : not_at<ascii::identifier_other> {};
struct number : seq<mantissa, opt<exponent>, must<number_end>> {};

struct expression;
struct unary;
struct conditional;
struct product;
struct sum;
struct comparison;
struct equality;
struct logical_and;

// expect<R> is R where R must match: only these carry error messages (below), so the plain rules
// may fail and backtrack anywhere else.
template <typename R>
struct expect : R {};

struct close_paren : one<')'> {};
struct open_paren : one<'('> {};
// `(e)` groups; `(a, b, ...)` is a tuple (the dimensions of a reduction, `sum(x, (0, 2))`). One rule
// for both, so that nested parentheses are parsed once, not once per alternative.
struct tuple_tail : seq<token<one<','>>, must<expect<expression>>> {};
struct paren_expr : seq<token<open_paren>, must<expect<expression>>, star<tuple_tail>, must<close_paren>, sp> {};

struct function_name : seq<identifier, at<sp, one<'('>>> {};
struct call_args : opt<expression, star<token<one<','>>, must<expect<expression>>>> {};
struct call : seq<function_name, sp, token<one<'('>>, call_args, must<close_paren>, sp> {};
struct variable_name : identifier {};
struct variable : seq<variable_name, sp> {};
struct number_literal : seq<number, sp> {};
struct primary : sor<number_literal, call, variable, paren_expr> {};

// x[y]: the element of x's row that y (an integer per row) names.
struct open_bracket : one<'['> {};
struct close_bracket : one<']'> {};
struct index_suffix : seq<open_bracket, sp, must<expect<expression>>, must<close_bracket>, sp> {};
struct indexed : seq<primary, star<index_suffix>> {};

struct power_op : one<'^'> {};
struct power_tail : seq<token<power_op>, must<expect<unary>>> {};
struct power : seq<indexed, opt<power_tail>> {};

struct prefix_op : sor<one<'-'>, one<'+'>, seq<one<'!'>, not_at<one<'='>>>> {};
struct prefixed : seq<token<prefix_op>, must<expect<unary>>> {};
struct unary_body : sor<prefixed, power> {};

struct python_power : seq<one<'*'>, one<'*'>> {};
struct python_power_error {};  // raised, never matched: '**' gets a hint instead of a generic error
struct mul_op : sor<seq<at<python_power>, raise<python_power_error>>, one<'*', '/', '%'>> {};
struct mul_tail : seq<token<mul_op>, must<expect<unary>>> {};
struct product : seq<unary, star<mul_tail>> {};

struct add_op : one<'+', '-'> {};
struct add_tail : seq<token<add_op>, must<expect<product>>> {};
struct sum : seq<product, star<add_tail>> {};

struct compare_op : sor<string<'<', '='>, string<'>', '='>, one<'<'>, one<'>'>> {};
struct compare_tail : seq<token<compare_op>, must<expect<sum>>> {};
struct comparison : seq<sum, star<compare_tail>> {};

struct equality_op : sor<string<'=', '='>, string<'!', '='>> {};
struct equality_tail : seq<token<equality_op>, must<expect<comparison>>> {};
struct equality : seq<comparison, star<equality_tail>> {};

struct and_op : string<'&', '&'> {};
struct and_tail : seq<token<and_op>, must<expect<equality>>> {};
struct logical_and : seq<equality, star<and_tail>> {};

struct or_op : string<'|', '|'> {};
struct or_tail : seq<token<or_op>, must<expect<logical_and>>> {};
struct logical_or : seq<logical_and, star<or_tail>> {};

struct colon : one<':'> {};
struct else_branch;
struct conditional_tail
    : seq<token<one<'?'>>, must<expect<expression>>, must<colon>, sp, must<expect<else_branch>>> {};
struct conditional : seq<logical_or, opt<conditional_tail>> {};
struct expression : conditional {};

// Rules through which the grammar recurses count their depth, so the parser's own stack is
// bounded: `unary` (parentheses, calls and prefix operators all pass through it) and the `else`
// branch of `c ? a : b`, which is right-recursive without passing through unary.
template <typename Body>
struct nested {
    using rule_t = nested;
    using subs_t = type_list<Body>;
    template <apply_mode A, rewind_mode M, template <typename...> class Action,
              template <typename...> class Control, typename ParseInput, typename State>
    static bool match(ParseInput& in, State& state) {
        if (++state.nesting > kMaxNesting) {
            throw parse_error("expression is nested too deeply (the limit is " +
                                  std::to_string(kMaxNesting) + " levels)",
                              in);
        }
        const bool matched = Control<Body>::template match<A, M, Action, Control>(in, state);
        --state.nesting;
        return matched;
    }
};
struct unary : nested<unary_body> {};
struct else_branch : nested<conditional> {};

struct semicolon : one<';'> {};
struct equals : one<'='> {};
struct binding_name : identifier {};
struct binding : seq<binding_name, sp, one<'='>, not_at<one<'='>>, sp, must<expect<expression>>,
                     must<semicolon>, sp> {};

struct param_keyword : seq<TAO_PEGTL_KEYWORD("param"), sp> {};
struct param_name : identifier {};
struct param_sign : opt<one<'-'>> {};
struct param_default : seq<param_sign, sp, number> {};
struct param_decl : seq<param_keyword, must<param_name>, sp, must<equals>, sp,
                        must<param_default>, sp, must<semicolon>, sp> {};

struct statement : sor<param_decl, binding> {};
struct body : expression {};
// `loss, z, acc`: the program's results, two or more bindings named in order. A name followed by a
// comma commits to a list (no expression has a comma at its top level).
struct result_name : identifier {};
struct result_tail : seq<token<one<','>>, must<expect<result_name>>, sp> {};
struct result_list : seq<at<identifier, sp, one<','>>, result_name, sp, plus<result_tail>> {};
struct end_of_program : eof {};
struct program
    : seq<sp, star<statement>, sor<result_list, must<body>>, opt<token<one<';'>>>, must<end_of_program>> {};

// Messages for rules whose failure is an error; every other rule may fail and backtrack.
template <typename Rule>
inline constexpr const char* kExpected = nullptr;
template <> inline constexpr const char* kExpected<expect<expression>> = "expected an expression";
template <> inline constexpr const char* kExpected<body> = "expected an expression";
template <> inline constexpr const char* kExpected<expect<result_name>> = "expected the name of a result after ','";
template <> inline constexpr const char* kExpected<expect<unary>> = "expected an operand";
template <> inline constexpr const char* kExpected<expect<product>> = "expected an operand";
template <> inline constexpr const char* kExpected<expect<sum>> = "expected an operand";
template <> inline constexpr const char* kExpected<expect<comparison>> = "expected an operand";
template <> inline constexpr const char* kExpected<expect<equality>> = "expected an operand";
template <> inline constexpr const char* kExpected<expect<logical_and>> = "expected an operand";
template <> inline constexpr const char* kExpected<expect<else_branch>> = "expected an expression after ':'";
template <> inline constexpr const char* kExpected<close_paren> = "expected ')'";
template <> inline constexpr const char* kExpected<close_bracket> = "expected ']'";
template <> inline constexpr const char* kExpected<colon> = "expected ':' of the conditional 'c ? a : b'";
template <> inline constexpr const char* kExpected<semicolon> = "expected ';' after the definition";
template <> inline constexpr const char* kExpected<equals> = "expected '=' after the parameter name";
template <> inline constexpr const char* kExpected<param_name> = "expected a parameter name after 'param'";
template <> inline constexpr const char* kExpected<param_default> = "expected a number as the parameter's default";
template <> inline constexpr const char* kExpected<exponent_digits> = "expected digits in the exponent";
template <> inline constexpr const char* kExpected<number_end> = "a number must not run into letters (write '2 * x', not '2x')";
template <> inline constexpr const char* kExpected<python_power_error> = "'**' is not an operator here: write powers as 'x ^ 2'";
template <> inline constexpr const char* kExpected<end_of_program> =
    "expected an operator or the end of the program";

struct error_messages {
    template <typename Rule>
    static constexpr const char* message = kExpected<Rule>;
};

template <typename Rule>
using control = must_if<error_messages, normal, false>::control<Rule>;

}  // namespace grammar

// ---------------------------------------------------------------------------------------------
// Actions: build the tree on a stack.

struct ParseState {
    std::string source_name;
    const std::string* source = nullptr;
    int nesting = 0;
    std::vector<ast::ExprPtr> operands;
    std::vector<std::pair<std::string, ast::Pos>> operators;   // pending operator spellings
    struct PendingCall {
        std::string name;
        ast::Pos pos;
        std::size_t first_operand;
    };
    std::vector<PendingCall> calls;
    std::vector<std::pair<std::size_t, ast::Pos>> parens;  // the operand count at each open '(', and where
    std::string pending_name;
    ast::Pos pending_pos;
    double pending_sign = 1.0;
    ast::Program program;

    // Tree depth is bounded too: `a+a+...+a` parses iteratively but builds a deep tree.
    std::vector<int> depths;  // parallel to `operands`

    void push(ast::ExprPtr e, int depth) {
        if (depth > kMaxNesting) {
            throw SourceError({source_name, e->pos.line, e->pos.column},
                              "expression is nested too deeply (the limit is " +
                                  std::to_string(kMaxNesting) + " levels)",
                              *source);
        }
        operands.push_back(std::move(e));
        depths.push_back(depth);
    }
    std::pair<ast::ExprPtr, int> pop() {
        if (operands.empty()) throw InternalError("parser operand stack underflow");
        auto e = std::move(operands.back());
        const int d = depths.back();
        operands.pop_back();
        depths.pop_back();
        return {std::move(e), d};
    }
    void reduce(ast::ExprKind kind, int count, std::string text, ast::Pos pos) {
        auto node = std::make_unique<ast::Expr>();
        node->kind = kind;
        node->pos = pos;
        node->text = std::move(text);
        node->args.resize(static_cast<std::size_t>(count));
        int depth = 0;
        for (int i = count - 1; i >= 0; --i) {
            auto [operand, d] = pop();
            node->args[static_cast<std::size_t>(i)] = std::move(operand);
            depth = std::max(depth, d);
        }
        push(std::move(node), depth + 1);
    }
    std::pair<std::string, ast::Pos> pop_operator() {
        if (operators.empty()) throw InternalError("parser operator stack underflow");
        auto op = std::move(operators.back());
        operators.pop_back();
        return op;
    }
    void reduce_binary() {
        auto [op, pos] = pop_operator();
        reduce(ast::ExprKind::Binary, 2, std::move(op), pos);
    }
};

template <typename Input>
ast::Pos pos_of(const Input& in) {
    const auto p = in.position();
    return {static_cast<int>(p.line), static_cast<int>(p.column)};
}

double parse_number(const std::string& text, const ast::Pos& pos, ParseState& s) {
    errno = 0;
    const double value = std::strtod(text.c_str(), nullptr);
    // The limit is what float32 can hold after rounding: 3.4028235e38 (FLT_MAX as usually printed)
    // rounds to FLT_MAX and is fine; only literals that would round to inf are refused.
    if ((errno == ERANGE && std::isinf(value)) || std::isinf(static_cast<float>(value))) {
        throw SourceError({s.source_name, pos.line, pos.column},
                          "number '" + text + "' is too large for float32 (use 'inf' for infinity)",
                          *s.source);
    }
    return value;  // underflow to a denormal or zero is what float32 arithmetic would do too
}

template <typename Rule>
struct action : pegtl::nothing<Rule> {};

template <>
struct action<grammar::number> {
    template <typename Input>
    static void apply(const Input& in, ParseState& s) {
        auto node = std::make_unique<ast::Expr>();
        node->kind = ast::ExprKind::Number;
        node->pos = pos_of(in);
        node->text = in.string();
        node->number = parse_number(node->text, node->pos, s);
        s.push(std::move(node), 1);
    }
};

template <>
struct action<grammar::variable_name> {
    template <typename Input>
    static void apply(const Input& in, ParseState& s) {
        auto node = std::make_unique<ast::Expr>();
        node->kind = ast::ExprKind::Name;
        node->pos = pos_of(in);
        node->text = in.string();
        s.push(std::move(node), 1);
    }
};

template <>
struct action<grammar::function_name> {
    template <typename Input>
    static void apply(const Input& in, ParseState& s) {
        s.calls.push_back({in.string(), pos_of(in), s.operands.size()});
    }
};

template <>
struct action<grammar::call> {
    template <typename Input>
    static void apply(const Input&, ParseState& s) {
        auto call = std::move(s.calls.back());
        s.calls.pop_back();
        const auto count = static_cast<int>(s.operands.size() - call.first_operand);
        s.reduce(ast::ExprKind::Call, count, std::move(call.name), call.pos);
    }
};

// Operators: the spelling and position are remembered when the operator is seen and used when its
// right operand is complete; a stack, because the operand may contain operators of its own.
struct remember_operator {
    template <typename Input>
    static void apply(const Input& in, ParseState& s) { s.operators.emplace_back(in.string(), pos_of(in)); }
};
struct reduce_binary {
    template <typename Input>
    static void apply(const Input&, ParseState& s) { s.reduce_binary(); }
};
template <> struct action<grammar::prefix_op> : remember_operator {};
template <> struct action<grammar::power_op> : remember_operator {};
template <> struct action<grammar::mul_op> : remember_operator {};
template <> struct action<grammar::add_op> : remember_operator {};
template <> struct action<grammar::compare_op> : remember_operator {};
template <> struct action<grammar::equality_op> : remember_operator {};
template <> struct action<grammar::and_op> : remember_operator {};
template <> struct action<grammar::or_op> : remember_operator {};

template <> struct action<grammar::prefixed> {
    template <typename Input>
    static void apply(const Input&, ParseState& s) {
        auto [op, pos] = s.pop_operator();
        s.reduce(ast::ExprKind::Unary, 1, std::move(op), pos);
    }
};
template <> struct action<grammar::open_paren> {
    template <typename Input>
    static void apply(const Input& in, ParseState& s) { s.parens.emplace_back(s.operands.size(), pos_of(in)); }
};
template <> struct action<grammar::paren_expr> {
    template <typename Input>
    static void apply(const Input&, ParseState& s) {
        const auto [first, pos] = s.parens.back();
        s.parens.pop_back();
        const auto count = static_cast<int>(s.operands.size() - first);
        if (count > 1) s.reduce(ast::ExprKind::Tuple, count, "()", pos);
    }
};
template <> struct action<grammar::open_bracket> : remember_operator {};
template <> struct action<grammar::index_suffix> {
    template <typename Input>
    static void apply(const Input&, ParseState& s) {
        auto [op, pos] = s.pop_operator();
        s.reduce(ast::ExprKind::Index, 2, "[]", pos);
    }
};
template <> struct action<grammar::power_tail> : reduce_binary {};
template <> struct action<grammar::mul_tail> : reduce_binary {};
template <> struct action<grammar::add_tail> : reduce_binary {};
template <> struct action<grammar::compare_tail> : reduce_binary {};
template <> struct action<grammar::equality_tail> : reduce_binary {};
template <> struct action<grammar::and_tail> : reduce_binary {};
template <> struct action<grammar::or_tail> : reduce_binary {};

template <> struct action<grammar::conditional_tail> {
    template <typename Input>
    static void apply(const Input& in, ParseState& s) {
        // Point at the '?': the conditional is named by its operator, like the binary ones.
        s.reduce(ast::ExprKind::Conditional, 3, "?:", pos_of(in));
    }
};

template <> struct action<grammar::binding_name> {
    template <typename Input>
    static void apply(const Input& in, ParseState& s) {
        s.pending_name = in.string();
        s.pending_pos = pos_of(in);
    }
};
template <> struct action<grammar::binding> {
    template <typename Input>
    static void apply(const Input&, ParseState& s) {
        auto [value, depth] = s.pop();
        (void)depth;
        s.program.statements.push_back(
            {ast::Statement::Kind::Binding, s.pending_name, s.pending_pos, std::move(value)});
    }
};

template <> struct action<grammar::param_name> {
    template <typename Input>
    static void apply(const Input& in, ParseState& s) {
        s.pending_name = in.string();
        s.pending_pos = pos_of(in);
        s.pending_sign = 1.0;
    }
};
template <> struct action<grammar::param_sign> {
    template <typename Input>
    static void apply(const Input& in, ParseState& s) { s.pending_sign = in.empty() ? 1.0 : -1.0; }
};
template <> struct action<grammar::param_decl> {
    template <typename Input>
    static void apply(const Input&, ParseState& s) {
        auto [value, depth] = s.pop();
        (void)depth;
        value->number *= s.pending_sign;
        if (s.pending_sign < 0) value->text = "-" + value->text;
        s.program.statements.push_back(
            {ast::Statement::Kind::Param, s.pending_name, s.pending_pos, std::move(value)});
    }
};

template <> struct action<grammar::result_name> {
    template <typename Input>
    static void apply(const Input& in, ParseState& s) {
        s.program.results.push_back({in.string(), pos_of(in)});
    }
};
template <> struct action<grammar::expect<grammar::result_name>> : action<grammar::result_name> {};
template <> struct action<grammar::result_list> {
    template <typename Input>
    static void apply(const Input&, ParseState& s) {
        // The body is the first result: what a program of one result would be.
        auto first = std::make_unique<ast::Expr>();
        first->kind = ast::ExprKind::Name;
        first->text = s.program.results.front().name;
        first->pos = s.program.results.front().pos;
        s.program.body = std::move(first);
    }
};

template <> struct action<grammar::body> {
    template <typename Input>
    static void apply(const Input&, ParseState& s) {
        auto [value, depth] = s.pop();
        (void)depth;
        s.program.body = std::move(value);
    }
};

// The byte at the error position, for "but found ..." in messages.
std::string describe_found(const std::string& source, std::size_t offset) {
    if (offset >= source.size()) return "the end of the program";
    const auto c = static_cast<unsigned char>(source[offset]);
    if (c == '\n') return "the end of the line";
    if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    return std::string("byte ") + buf;
}

}  // namespace

ast::Program parse(std::string_view source, std::string_view source_name) {
    ParseState state;
    state.source_name = std::string(source_name);
    state.program.source_name = std::string(source_name);
    state.program.source = std::string(source);
    state.source = &state.program.source;

    pegtl::memory_input<> in(state.program.source, state.source_name);
    try {
        pegtl::parse<grammar::program, action, grammar::control>(in, state);
    } catch (const pegtl::parse_error& e) {
        const auto& p = e.positions().front();
        std::string message(e.message());
        if (message.rfind("expected", 0) == 0) message += ", but found " + describe_found(state.program.source, p.byte);
        throw SourceError({state.source_name, static_cast<int>(p.line), static_cast<int>(p.column)},
                          message, state.program.source);
    }
    if (!state.program.body || !state.operands.empty() || !state.operators.empty()) {
        throw InternalError("parser finished with an unbalanced stack");
    }
    return std::move(state.program);
}

}  // namespace lossjit
