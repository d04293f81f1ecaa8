// parse: the grammar, precedence, positions, and every syntax error message with its column.
#include <doctest/doctest.h>

#include <string>

#include "lang/builtins.hpp"
#include "lossjit/errors.hpp"
#include "pipeline.hpp"

using namespace lossjit;

namespace {

// A compact prefix form of the tree: "(- 1 (* p t))".
std::string sexpr(const ast::Expr& e) {
    if (e.args.empty() && e.kind != ast::ExprKind::Call) return e.text;
    std::string out = "(" + e.text;
    for (const auto& a : e.args) out += " " + sexpr(*a);
    return out + ")";
}

std::string parse_body(const std::string& text) { return sexpr(*parse(text, "expr").body); }

}  // namespace

TEST_SUITE("parse") {

TEST_CASE("the grammar binds every pair of binary operators as the language table says") {
    // The printer and the docs take precedence and associativity from the table; the grammar
    // encodes them in its structure. This keeps the two from drifting apart.
    for (const auto& first : builtin_table()) {
        if (!first.is_operator() || first.arity != 2) continue;
        for (const auto& second : builtin_table()) {
            if (!second.is_operator() || second.arity != 2) continue;
            const std::string a(first.op), b(second.op);
            const bool first_binds =
                first.precedence > second.precedence ||
                (first.precedence == second.precedence && first.associativity == Associativity::Left);
            const std::string expected = first_binds ? "(" + b + " (" + a + " x y) z)" : "(" + a + " x (" + b + " y z))";
            CAPTURE(a);
            CAPTURE(b);
            CHECK(parse_body("x " + a + " y " + b + " z") == expected);
        }
    }
}

TEST_CASE("precedence and associativity") {
    const std::pair<const char*, const char*> table[] = {
        {"1 - p*t", "(- 1 (* p t))"},
        {"a - b - c", "(- (- a b) c)"},
        {"a / b * c", "(* (/ a b) c)"},
        {"-x^2", "(- (^ x 2))"},
        {"x^y^z", "(^ x (^ y z))"},
        {"2^-1", "(^ 2 (- 1))"},
        {"(-x)^2", "(^ (- x) 2)"},
        {"a + b * c ^ d", "(+ a (* b (^ c d)))"},
        {"a < b == c >= d", "(== (< a b) (>= c d))"},
        {"a || b && c", "(|| a (&& b c))"},
        {"c ? a : b", "(?: c a b)"},
        {"c ? a : d ? e : f", "(?: c a (?: d e f))"},
        {"a || b ? x : y", "(?: (|| a b) x y)"},
        {"!a && !b", "(&& (! a) (! b))"},
        {"a != b", "(!= a b)"},
        {"a % b", "(% a b)"},
        {"+x", "(+ x)"},
        {"- - x", "(- (- x))"},
        {"max(0, 1 - p*t)", "(max 0 (- 1 (* p t)))"},
        {"max(a, b, c)", "(max a b c)"},
        {"f()", "(f)"},
        {"mean((p - t)^2)", "(mean (^ (- p t) 2))"},
        {"sum(x, (0, 2))", "(sum x (() 0 2))"},             // a tuple: a reduction's dimensions
        {"sum(x, (1, -1))", "(sum x (() 1 (- 1)))"},
        {"((x))", "x"},                                      // grouping alone makes no node
        {"(a, (b))", "(() a b)"},
        {"  x  # trailing comment", "x"},
        {"x;", "x"},
    };
    for (const auto& [input, expected] : table) {
        CAPTURE(input);
        CHECK(parse_body(input) == expected);
    }
}

TEST_CASE("number literals keep their value and spelling") {
    const std::pair<const char*, double> table[] = {
        {"1", 1.0}, {"2.5", 2.5}, {".5", 0.5}, {"1e-3", 1e-3}, {"1.e2", 100.0}, {"3E+2", 300.0}, {"1e-999", 0.0},
    };
    for (const auto& [input, value] : table) {
        CAPTURE(input);
        const auto program = parse(input, "expr");
        CHECK(program.body->kind == ast::ExprKind::Number);
        CHECK(program.body->number == value);
        CHECK(program.body->text == input);
    }
}

TEST_CASE("statements: bindings and parameters") {
    const auto program = parse("param beta = -0.5;\nd = abs(p - t);\n# comment\nmean(d < beta ? d : beta)", "f.loss");
    REQUIRE(program.statements.size() == 2);
    CHECK(program.statements[0].kind == ast::Statement::Kind::Param);
    CHECK(program.statements[0].name == "beta");
    CHECK(program.statements[0].value->number == -0.5);
    CHECK(program.statements[1].kind == ast::Statement::Kind::Binding);
    CHECK(program.statements[1].name == "d");
    CHECK(program.statements[1].pos.line == 2);
    CHECK(program.statements[1].pos.column == 1);
    CHECK(sexpr(*program.statements[1].value) == "(abs (- p t))");
    CHECK(sexpr(*program.body) == "(mean (?: (< d beta) d beta))");
}

TEST_CASE("positions point at operators and names") {
    const auto program = parse("mean(max(0, 1 - p*t))", "expr");
    const ast::Expr& max = *program.body->args[0];
    CHECK(max.pos.column == 6);
    const ast::Expr& minus = *max.args[1];
    CHECK(minus.text == "-");
    CHECK(minus.pos.column == 15);
    CHECK(minus.args[1]->pos.column == 18);            // '*'
    CHECK(minus.args[1]->args[1]->pos.column == 19);   // 't'
}

TEST_CASE("syntax errors: message, line, column and caret") {
    struct Row {
        const char* input;
        int line, column;
        const char* message;
    };
    const Row table[] = {
        {"mean(d^2", 1, 9, "expected ')', but found the end of the program"},
        {"1 +", 1, 4, "expected an operand, but found the end of the program"},
        {"1 + * 2", 1, 5, "expected an operand, but found '*'"},
        {"p ** 2", 1, 3, "'**' is not an operator here: write powers as 'x ^ 2'"},
        {"2x", 1, 2, "a number must not run into letters"},
        {"1e+", 1, 4, "expected digits in the exponent"},
        {"c ? a", 1, 6, "expected ':' of the conditional"},
        {"c ? a :", 1, 8, "expected an expression after ':'"},
        {"d = p - t\nmean(d)", 2, 1, "expected ';' after the definition"},
        {"mean(x) y", 1, 9, "expected an operator or the end of the program, but found 'y'"},
        {"", 1, 1, "expected an expression"},
        {"sum(x, (0, ))", 1, 12, "expected an expression, but found ')'"},
        {"sum(x, (0, 1)", 1, 14, "expected ')', but found the end of the program"},
        {"param = 1; x", 1, 7, "expected a parameter name after 'param'"},
        {"param b 1; x", 1, 9, "expected '=' after the parameter name"},
        {"param b = x; x", 1, 11, "expected a number as the parameter's default"},
        {"x $ y", 1, 3, "expected an operator or the end of the program, but found '$'"},
        {"a & b", 1, 3, "expected an operator or the end of the program, but found '&'"},
        {"x\xc3\xa9", 1, 2, "but found byte \\xc3"},
        {"1e999", 1, 1, "number '1e999' is too large for float32"},
        {"4e38", 1, 1, "is too large for float32"},
        {"f(1,)", 1, 5, "expected an expression, but found ')'"},
    };
    for (const auto& row : table) {
        const std::string input = row.input;
        CAPTURE(input);
        try {
            parse(row.input, "expr");
            FAIL("no error");
        } catch (const SourceError& e) {
            CHECK(e.where().line == row.line);
            CHECK(e.where().column == row.column);
            CHECK(e.message().find(row.message) != std::string::npos);
            CHECK(std::string(e.what()).rfind("expr:" + std::to_string(row.line) + ":" + std::to_string(row.column) + ": error: ", 0) == 0);
        }
    }
}

TEST_CASE("the diagnostic shows the source line and a caret under the column") {
    try {
        parse("d = p - t;\nmean(d^2", "f.loss");
        FAIL("no error");
    } catch (const SourceError& e) {
        CHECK(std::string(e.what()) == "f.loss:2:9: error: expected ')', but found the end of the program\nmean(d^2\n        ^");
    }
}

TEST_CASE("nesting is bounded: deep input is an error, not a stack overflow") {
    CHECK_NOTHROW(parse(std::string(150, '(') + "x" + std::string(150, ')'), "expr"));
    CHECK_THROWS_WITH_AS(parse(std::string(100000, '(') + "x" + std::string(100000, ')'), "expr"),
                         doctest::Contains("nested too deeply"), SourceError);
    CHECK_THROWS_WITH_AS(parse(std::string(100000, '-') + "x", "expr"), doctest::Contains("nested too deeply"),
                         SourceError);
    std::string long_sum = "x";
    for (int i = 0; i < 5000; ++i) long_sum += "+x";
    CHECK_THROWS_WITH_AS(parse(long_sum, "expr"), doctest::Contains("nested too deeply"), SourceError);
}

}  // TEST_SUITE
