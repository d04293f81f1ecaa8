// check: name resolution, arity, reductions, parameters, constant folding, and their errors.
#include <doctest/doctest.h>

#include <cmath>

#include "lossjit/errors.hpp"
#include "paths.hpp"
#include "pipeline.hpp"

#include <fstream>
#include <sstream>

using namespace lossjit;

namespace {

ir::Program check_text(const std::string& text, CheckOptions options = {}) {
    return check(parse(text, "expr"), options);
}

std::string checked(const std::string& text, CheckOptions options = {}) {
    return dump_checked(check_text(text, std::move(options)));
}

}  // namespace

TEST_SUITE("check") {

TEST_CASE("inputs in order of first appearance, or the caller's order") {
    CHECK(check_text("mean(max(0, 1 - p*t))").inputs == std::vector<std::string>{"p", "t"});
    CHECK(check_text("t + p").inputs == std::vector<std::string>{"t", "p"});
    CheckOptions options;
    options.inputs = {"p", "t", "unused"};
    CHECK(check_text("t + p", options).inputs == std::vector<std::string>{"p", "t", "unused"});
}

TEST_CASE("reductions, bindings, parameters") {
    CHECK(checked("mean((p - t)^2)") == "inputs: p, t\nparams: (none)\nreduction: mean\nbody: (p - t) ^ 2\n");
    CHECK(checked("param beta = 1; d = abs(p - t); mean(d < beta ? 0.5 * d^2 / beta : d - 0.5 * beta)") ==
          "inputs: p, t\nparams: beta = 1\nreduction: mean\nd = abs(p - t)\n"
          "body: d < beta ? 0.5 * d ^ 2 / beta : d - 0.5 * beta\n");
    CHECK(checked("batchmean(xlogy(t, t) - t * log(p))").find("reduction: batchmean") != std::string::npos);
    CHECK(checked("sum(x)").find("reduction: sum") != std::string::npos);
    CHECK(check_text("clamp(x + 3, 0, 6) / 6").is_map());
}

TEST_CASE("caller parameters add to or override the program's") {
    CheckOptions options;
    options.params = {{"beta", 0.25}, {"margin", 2}};
    const auto program = check_text("param beta = 1; mean(max(0, margin - p) * beta)", options);
    REQUIRE(program.params.size() == 2);
    CHECK(program.params[0].name == "beta");
    CHECK(program.params[0].default_value == 0.25);
    CHECK(program.params[1].name == "margin");
    CHECK(program.inputs == std::vector<std::string>{"p"});
}

TEST_CASE("constant folding uses the reference semantics") {
    const std::pair<const char*, const char*> table[] = {
        {"2 * 3 + x", "body: 6 + x\n"},
        {"-2^2 + x", "body: -4 + x\n"},
        {"max(1, nan) + x", "body: nan + x\n"},
        {"min(3, 1, 2) * x", "body: 1 * x\n"},
        {"x * pi / pi", "body: x * 3.141592653589793 / 3.141592653589793\n"},
        {"xlogy(0, 0) + x", "body: 0 + x\n"},
        {"-7 % 3 + x", "body: 2 + x\n"},
        {"(1 < 2) + x", "body: 1 + x\n"},
        {"+x", "body: x\n"},
        // The poles of trigamma are inf (lossjit's rule); -inf is none: nan, as torch's.
        {"trigamma(-3) + x", "body: inf + x\n"},
        {"trigamma(-inf) + x", "body: nan + x\n"},
        {"trigamma(inf) + x", "body: 0 + x\n"},
    };
    for (const auto& [input, expected] : table) {
        CAPTURE(input);
        const std::string text = checked(input);
        CHECK(text.substr(text.find("body:")) == expected);
    }
}

TEST_CASE("min and max with several arguments fold pairwise") {
    CHECK(checked("max(a, b, c)").find("body: max(max(a, b), c)") != std::string::npos);
}

TEST_CASE("user mistakes point at the right column") {
    struct Row {
        const char* input;
        int column;
        const char* message;
    };
    const Row table[] = {
        {"mean(max(0, lgo(p)))", 13, "unknown function 'lgo' (did you mean 'log'?)"},
        {"mean(frobnicate(p))", 6, "unknown function 'frobnicate'"},
        {"mean(clamp(p, 0))", 6, "'clamp' takes 3 arguments, but 2 were given"},
        {"mean(abs(p, t))", 6, "'abs' takes 1 argument, but 2 were given"},
        {"mean(max(p))", 6, "'max' takes at least 2 arguments, but 1 was given"},
        {"mean(p, t)", 9, "the dimension of 'mean' must be an integer constant"},
        {"mean(sum(p, 1.5))", 13, "the dimension of 'sum' must be an integer constant"},
        {"mean(sum(p, (0, 0)))", 17, "dimension 0 is named twice"},
        {"mean(sum(p, (0, (1, 2))))", 17, "a dimension must be an integer, not a tuple"},
        {"mean(sum(p, 0) + amax(p, 1))", 26, "this reduction goes along 1, but the one at 1:13 along 0"},
        {"mean(sum(p, -1) + amax(p, 1))", 27, "the reductions inside one program go along the same dimensions"},
        {"(p, t)", 1, "a tuple '(a, b)' is only the dimensions of a reduction"},
        {"mean(logsumexp(x, (0, 1)) - x[y])", 30, "x[y] takes along one dimension, but the program's reductions go along (0, 1)"},
        {"v = var(p, (1, 2)); v + sum(p, (1, 2))", 1, ""},  // var's own means go along the call's dimensions
        {"p + mean(p)", 1, ""},  // a statistic (test_statistics.cpp)
        {"sum(p) * p", 1, ""},
        {"mean(sum(p))", 1, ""},
        {"d = d + 1; d", 5, "'d' is used before its definition on line 1"},
        {"x = e; d = 1; x + d", 1, ""},  // fine: e is an input
        {"pi = 3; pi", 1, "'pi' is a constant and cannot be rebound"},
        {"d = 1; d = 2; d", 8, "'d' is already defined"},
        {"exp + 1", 1, "'exp' is a function: call it as exp(...)"},
        {"max = p; max", 1, "'max' is a function name and cannot be bound"},
        {"param beta = 1; beta = 2; beta", 17, "'beta' is a parameter and cannot be rebound"},
        {"param b = 1; param b = 2; b", 20, "parameter 'b' is declared twice"},
        {"param nan = 1; x", 7, "'nan' is a constant and cannot be a parameter"},
        {"x * param", 5, "'param' is a keyword (param NAME = NUMBER; declares a parameter) and cannot name an input"},
        {"param param = 1; x", 7, "'param' is a keyword and cannot name a parameter"},
        {"y = p; y(1)", 8, "unknown function 'y'"},
    };
    for (const auto& row : table) {
        const std::string input = row.input;
        CAPTURE(input);
        if (*row.message == '\0') {
            CHECK_NOTHROW(check_text(row.input));
            continue;
        }
        try {
            check_text(row.input);
            FAIL("no error");
        } catch (const SourceError& e) {
            CHECK(e.where().column == row.column);
            CHECK(e.message().find(row.message) != std::string::npos);
        }
    }
}

TEST_CASE("with a caller's input list, other free names are errors") {
    CheckOptions options;
    options.inputs = {"p", "t"};
    try {
        check_text("mean(p - q)", options);
        FAIL("no error");
    } catch (const SourceError& e) {
        CHECK(e.where().column == 10);
        CHECK(e.message() == "unknown name 'q': not an input (p, t), a parameter or a binding");
    }
}

TEST_CASE("bad caller options are usage errors") {
    CheckOptions twice;
    twice.inputs = {"p", "p"};
    CHECK_THROWS_AS(check_text("p", twice), UsageError);
    CheckOptions bad_name;
    bad_name.inputs = {"p; asm(\"trap;\")"};
    CHECK_THROWS_WITH_AS(check_text("p", bad_name), doctest::Contains("not an identifier"), UsageError);
    CheckOptions bad_param;
    bad_param.params = {{"1x", 1.0}};
    CHECK_THROWS_AS(check_text("p", bad_param), UsageError);
}

TEST_CASE("types: comparisons and logic are bool") {
    const auto program = check_text("m = p > 0; where(m && !isnan(t), p, t)");
    CHECK(program.node(program.bindings[0].node).type == ValueType::Bool);
    CHECK(program.node(program.body).type == ValueType::Float);
}

}  // TEST_SUITE

TEST_SUITE("check") {
TEST_CASE("docs/language.md documents every function") {
    std::ifstream in(source_dir() + "/docs/language.md");
    std::stringstream text;
    text << in.rdbuf();
    REQUIRE(function_names().size() > 30);
    for (std::string_view name : function_names()) {
        CAPTURE(name);
        CHECK(text.str().find("`" + std::string(name) + "(") != std::string::npos);
    }
    for (const auto& row : row_reduction_table()) {  // and every reduction along rows, as name(e, -1)
        CAPTURE(row.name);
        CHECK(text.str().find("`" + std::string(row.name) + "(e, -1)`") != std::string::npos);
    }
}

TEST_CASE("README.md names every function and every reduction along rows") {
    std::ifstream in(source_dir() + "/README.md");
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    for (char& c : text)
        if (c == '\n' || c == '`' || c == ';' || c == '.' || c == ',') c = ' ';
    for (std::string_view name : function_names()) {
        CAPTURE(name);
        CHECK(text.find(" " + std::string(name) + " ") != std::string::npos);
    }
    for (const auto& row : row_reduction_table()) {
        CAPTURE(row.name);
        CHECK(text.find(" " + std::string(row.name) + " ") != std::string::npos);
    }
}
}  // TEST_SUITE
