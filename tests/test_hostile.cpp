// hostile: program strings written to break out of the generated CUDA or to exhaust the parser.
// Each must end in a clear SourceError (line, column, message) or in a correct result whose kernel
// compiles and carries none of the hostile text.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <string>

#include "jit/compile.hpp"
#include "lossjit/lossjit.hpp"
#include "pipeline.hpp"

using namespace lossjit;
using namespace std::string_literals;

namespace {

struct Refused {
    std::string program;
    std::string message;  // part of SourceError::message()
    int line, column;
};

SourceError refusal(const std::string& program) {
    try {
        (void)compile(program);
    } catch (const SourceError& e) {
        return e;
    }
    FAIL("accepted: " << program.substr(0, 200));
    throw std::logic_error("unreachable");
}

// Evaluates on the CPU reference with every input [1, 2, 3] and checks the kernel: NVRTC compiles
// it for sm_90 and none of `forbidden` reaches it.
double accepted(const std::string& program, std::initializer_list<std::string> forbidden, bool nvrtc = true) {
    const auto loss = compile(program);
    const std::vector<float> data{1.0f, 2.0f, 3.0f};
    std::vector<TensorView> views;
    for (std::size_t k = 0; k < loss.inputs().size(); ++k) views.push_back(TensorView::contiguous(data.data(), {3}));
    const std::string source = loss.cuda_source(views);
    for (const auto& text : forbidden) {
        CAPTURE(text);
        CHECK(source.find(text) == std::string::npos);
    }
    if (nvrtc) CHECK_NOTHROW(compile_cuda(source, "sm_90"));
    return loss.reference(views);
}

std::string repeat(const std::string& s, std::size_t n) {
    std::string out;
    out.reserve(s.size() * n);
    for (std::size_t i = 0; i < n; ++i) out += s;
    return out;
}

}  // namespace

TEST_SUITE("hostile") {

TEST_CASE("attempts to inject CUDA are refused where they are not comments") {
    const Refused table[] = {
        {"asm(\"trap;\")", "expected ')', but found '\"'", 1, 5},
        {"mean(x); asm volatile(\"trap;\")", "expected an operator or the end of the program, but found 'a'", 1, 10},
        {"mean(x)); __trap(); //", "expected an operator or the end of the program, but found ')'", 1, 8},
        {"mean(x) \\\n+ 1", "expected an operator or the end of the program, but found '\\'", 1, 9},
        {"mean(\"x\")", "expected ')', but found '\"'", 1, 6},
        {"mean('x')", "expected ')', but found '''", 1, 6},
        {"mean(x) ?? 1", "expected an expression, but found '?'", 1, 10},
        {"mean(x /* c */)", "expected an operand, but found '*'", 1, 9},
        {"mean(x) // c", "expected an operand, but found '/'", 1, 10},
        {"mean(x\xc3\xa9)", "expected ')', but found byte \\xc3", 1, 7},
        {"mean(\xe2\x80\x8bx)", "expected ')', but found byte \\xe2", 1, 6},
        {"mean(x)\0 + asm(\"\")"s, "expected an operator or the end of the program, but found byte \\x00", 1, 8},
        {"\0mean(x)"s, "expected an expression, but found byte \\x00", 1, 1},
        {"a = x;\nmean(a) \x01", "expected an operator or the end of the program, but found byte \\x01", 2, 9},
        {"__trap(x)", "unknown function '__trap'", 1, 1},
        {"printf(x)", "unknown function 'printf'", 1, 1},
        {"asm(x)", "unknown function 'asm'", 1, 1},
        {"param x = 1; param x = 2; x", "parameter 'x' is declared twice", 1, 20},
        {"mean(x ** 2)", "'**' is not an operator here", 1, 8},
        {"1e999", "number '1e999' is too large for float32", 1, 1},
        {"mean(x * -1e39)", "number '1e39' is too large for float32", 1, 11},
        {"mean(x * 1" + std::string(400, '0') + ")", "is too large for float32", 1, 10},
        {"mean(x * 1e)", "expected digits in the exponent, but found ')'", 1, 12},
        {"mean(x * 0x10)", "a number must not run into letters", 1, 11},
        {"", "expected an expression, but found the end of the program", 1, 1},
        {"# only a comment\n", "expected an expression, but found the end of the program", 2, 1},
    };
    for (const auto& row : table) {
        CAPTURE(row.program);
        const SourceError e = refusal(row.program);
        CHECK(e.message().find(row.message) != std::string::npos);
        CHECK(e.where().line == row.line);
        CHECK(e.where().column == row.column);
        // The diagnostic's source line shows no control bytes (a NUL would cut it short in C APIs).
        const std::string what = e.what();
        CHECK(what.find('\0') == std::string::npos);
        CHECK(what.find('\x01') == std::string::npos);
    }
}

TEST_CASE("hostile text in comments and names is accepted and never reaches the kernel") {
    // Everything after '#' is a comment, whatever it holds.
    CHECK(accepted("#include <stdio.h>\n# asm(\"trap;\"); \\\nmean(x) # \"); __trap(); //\xc3\xa9", {"stdio", "asm(\"trap", "trap", "\xc3"}) ==
          doctest::Approx(2.0));
    CHECK(accepted("sum(x) # \0 NUL inside a comment\n"s, {"NUL"}) == doctest::Approx(6.0));
    // Identifiers that are CUDA keywords, intrinsics or macros are harmless behind their prefixes.
    CHECK(accepted("asm = x; __global__ = asm * 2; mean(__global__ + __trap + printf - include)",
                   {" asm ", "(asm", " __global__ =", " __trap", " printf", " include"}) == doctest::Approx(6.0));
    CHECK(accepted("param __LINE__ = 2; mean(x * __LINE__ + __FILE__ - __COUNTER__)", {" __LINE__", " __FILE__"}) ==
          doctest::Approx(4.0));
    // Literals at the edges of float32.
    CHECK(accepted("sum(x * 0 + 1e-999)", {"999"}) == 0.0);
    CHECK(accepted("sum(x * 0 + 3.4028234e38)", {}) == doctest::Approx(3 * 3.4028234e38));
    CHECK(std::isinf(accepted("sum(x * 0 + 1e38 * 10)", {"1e+39"})));
}

TEST_CASE("a literal that rounds to FLT_MAX is in range; one that rounds to inf is not") {
    CHECK(accepted("sum(x * 0 + 3.4028235e38)", {}) == doctest::Approx(3 * 3.4028234663852886e38));
    CHECK(refusal("sum(x * 0 + 3.40282357e38)").message().find("too large") != std::string::npos);
}

TEST_CASE("nesting 100 000 deep is a clean depth-limit error, not a stack overflow") {
    const std::size_t deep = 100000;
    const std::string limit = "nested too deeply (the limit is 200 levels)";
    const std::string programs[] = {
        repeat("(", deep) + "x" + repeat(")", deep),
        "mean(" + repeat("(", deep) + "x" + repeat(")", deep) + ")",
        repeat("-", deep) + "x",
        repeat("!", deep) + "x",
        repeat("abs(", deep) + "x" + repeat(")", deep),
        repeat("x^", deep) + "x",
        repeat("x ? x : ", deep) + "x",
        repeat("x+", deep) + "x",
        repeat("x*", deep) + "x",
        repeat("x<", deep) + "x",
        repeat("x&&", deep) + "x",
        repeat("(", deep),
    };
    for (const auto& program : programs) {
        CAPTURE(program.substr(0, 20));
        const SourceError e = refusal(program);
        CHECK(e.message() == "expression is nested too deeply (the limit is 200 levels)");
        CHECK(std::string(e.what()).size() < 1000);  // the caret line is cut, not 100 000 columns long
    }
    // min/max of many arguments become a balanced tree, 17 levels for 100 000 arguments.
    CHECK(accepted("sum(min(" + repeat("x, ", deep) + "x))", {}, false) == doctest::Approx(6.0));
    CHECK(refusal(repeat("(", 201) + "x" + repeat(")", 201)).message().find(limit) != std::string::npos);
    CHECK(accepted(repeat("(", 150) + "sum(x)" + repeat(")", 150), {}) == doctest::Approx(6.0));
}

TEST_CASE("megabyte programs: errors stay short and quick, accepted ones work") {
    const std::size_t mb = 1 << 20;
    const auto start = std::chrono::steady_clock::now();

    // A long comment, a long run of blanks, then the program.
    CHECK(accepted("# " + std::string(mb, 'c') + "\nsum(x)", {"ccc"}) == doctest::Approx(6.0));
    CHECK(accepted(std::string(mb, ' ') + "sum(x)", {}) == doctest::Approx(6.0));

    // An error a megabyte into one line: the diagnostic does not repeat the megabyte.
    const SourceError far = refusal(std::string(mb, ' ') + "sum(x) $");
    CHECK(far.where().column == static_cast<int>(mb) + 8);
    CHECK(std::string(far.what()).size() < 1000);

    // A megabyte identifier is an input like any other.
    const std::string name(mb, 'n');
    CHECK(accepted("sum(" + name + ")", {}, false) == doctest::Approx(6.0));
    // ... and a megabyte misspelt function name gets no (quadratic) suggestion.
    const SourceError unknown = refusal(name + "(x)");
    CHECK(unknown.message().find("unknown function") != std::string::npos);
    CHECK(std::string(unknown.what()).size() < 2000);

    // Many statements: 50 000 bindings, each using the one before.
    std::string chain = "b0 = x;\n";
    for (int i = 1; i < 50000; ++i) chain += "b" + std::to_string(i) + " = b" + std::to_string(i - 1) + ";\n";
    CHECK(accepted(chain + "sum(b49999)", {}, false) == doctest::Approx(6.0));

    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(seconds < 60);  // generous for ASan and valgrind; a few seconds normally
}

}  // TEST_SUITE
