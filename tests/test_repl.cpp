// `lossjit repl` fed from a pipe, as a separate process: a session and the transcript it must
// print, :save and :load, the walkthrough's session (docs/walkthrough.md) line for line, and on a
// machine with a GPU the kernel's values and :time. Readline mode (a terminal) is tests/repl_pty.py.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "lossjit/device.hpp"
#include "paths.hpp"
#include "support.hpp"

namespace fs = std::filesystem;

namespace {

using lossjit_test::Result;
using lossjit_test::read_text;

struct TempDir : lossjit_test::TempDir {
    TempDir() : lossjit_test::TempDir("lossjit-repl") {}
};

// Runs `lossjit ARGS` in `dir` with `input` on its standard input (a file, so not a terminal).
Result run_in(const TempDir& dir, const std::string& args, const std::string& input) {
    const fs::path script = dir.path / "stdin.txt";
    std::ofstream(script, std::ios::binary) << input;
    const std::string command = "cd '" + dir.path.string() + "' && LOSSJIT_CACHE_DIR='" +
                                (dir.path / "cache").string() + "' LOSSJIT_HISTORY=off " + cli_path() + " " + args +
                                " < stdin.txt";
    return lossjit_test::run_shell(command);
}

struct Step {
    std::string input;
    std::string expected;   // what the line prints (stdout and stderr)
    bool contains = false;  // expected is only a part of it
};

// With --echo each line is printed after the prompt, so the transcript splits into one block per line.
std::vector<std::string> blocks_of(const std::string& transcript) {
    std::vector<std::string> blocks;
    std::istringstream in(transcript);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("lossjit> ", 0) == 0) blocks.emplace_back();
        if (blocks.empty()) blocks.emplace_back();  // output before the first line: an error
        blocks.back() += line + "\n";
    }
    return blocks;
}

// `unread`: more input after the steps, which the session must not read (it ends before).
void check_session(const TempDir& dir, const std::string& args, const std::vector<Step>& steps,
                   const std::string& unread = "") {
    std::string input;
    for (const auto& s : steps) input += s.input + "\n";
    input += unread;
    const Result r = run_in(dir, args, input);
    CHECK(r.status == 0);
    const auto blocks = blocks_of(r.output);
    REQUIRE_MESSAGE(blocks.size() == steps.size(), r.output);
    for (std::size_t k = 0; k < steps.size(); ++k) {
        const std::string head = "lossjit> " + steps[k].input + "\n";
        INFO("line ", k + 1, ": ", steps[k].input);
        REQUIRE(blocks[k].rfind(head, 0) == 0);
        const std::string shown = blocks[k].substr(head.size());
        if (steps[k].contains)
            CHECK_MESSAGE(shown.find(steps[k].expected) != std::string::npos, shown);
        else
            CHECK(shown == steps[k].expected);
    }
}

// `want` line by line, where a line "[...]" stands for any number of lines (an excerpt in the docs).
bool matches(const std::string& got, const std::string& want) {
    auto lines = [](const std::string& text) {
        std::vector<std::string> out;
        std::istringstream in(text);
        for (std::string l; std::getline(in, l);) out.push_back(l);
        return out;
    };
    const auto g = lines(got), w = lines(want);
    std::size_t i = 0;
    for (std::size_t k = 0; k < w.size(); ++k) {
        if (w[k] != "[...]") {
            if (i >= g.size() || g[i] != w[k]) return false;
            ++i;
            continue;
        }
        if (k + 1 == w.size()) return true;
        while (i < g.size() && g[i] != w[k + 1]) ++i;  // up to the next line shown
        if (i == g.size()) return false;
    }
    return i == g.size();
}

std::string caret(const std::string& line, int column, const std::string& message) {
    return "expr:1:" + std::to_string(column) + ": error: " + message + "\n" + line + "\n" +
           std::string(static_cast<std::size_t>(column - 1), ' ') + "^\n";
}

}  // namespace

TEST_SUITE("repl") {
    TEST_CASE("a session from a pipe: values, errors with a caret, commands") {
        TempDir dir;
        // mean(u) of 1000x100:uniform with seed 0 is what `lossjit run` prints for the same input.
        const Result run = run_in(dir, "run 'mean(u)' -i u=1000x100:uniform --cpu", "");
        REQUIRE(run.status == 0);
        const std::vector<Step> steps = {
            {"mean(p)",
             caret("mean(p)", 6,
                   "unknown name 'p': not an input, a parameter or a binding (give it with :input p=SHAPE:GENERATOR or "
                   "p=FILE.npy)")},
            {":input p=4:range t=4:const[2]", "p: 4 from range\nt: 4 from const[2]\n"},
            {"sum(p)", "6\n"},
            {"mean(max(0, lgo(p)))", caret("mean(max(0, lgo(p)))", 13, "unknown function 'lgo' (did you mean 'log'?)")},
            {"p * t", "map of shape 4: 0, 2, 4, 6 (min 0, max 6, mean 3)\n"},
            {"mean(q)", caret("mean(q)", 6, "unknown name 'q': not an input (p, t), a parameter or a binding")},
            {":param beta=0.5", ""},
            {"mean(beta * p)", "0.75\n"},
            {"d = abs(p - t);", ""},
            {"mean(d < beta ? 0.5 * d^2 / beta : d - 0.5 * beta)", "0.8125\n"},  // d = 2, 1, 0, 1
            {"d = (p - t)^2;", ""},                                              // defined again: replaced
            {"sum(d)", "6\n"},
            {"e = d + q;", caret("e = d + q;", 9, "unknown name 'q': not an input (p, t), a parameter or a binding")},
            {"a = 1; b = a * 2;", ""},
            {"a = b;",
             caret("a = b;", 5, "'b' is defined after 'a': a definition uses only earlier ones (:defs lists them)")},
            {"mean(b * p)", "3\n"},
            // A name the line itself binds only later: no line numbers of the program built behind the scenes.
            {"x = y + p; y = 2; mean(x)", caret("x = y + p; y = 2; mean(x)", 5, "'y' is used before its definition")},
            {":defs", "d = (p - t)^2;\na = 1;\nb = a * 2;\n"},
            {":unset a", "error: 'a' is used by the definition of 'b'\n"},
            {":unset b a", ""},
            {":input u=1000x100:uniform", "u: 1000x100 from uniform[0,1]\n"},
            {"mean(u)", run.output},
            {"u < 0.5", "map of shape 1000x100: ", true},
            {":inputs", "p: 4 from range\nt: 4 from const[2]\nu: 1000x100 from uniform[0,1]\n"},
            {":input y=4:integers[0,10]:i64 m=3:integers[0,2]:bool",
             "y: 4 from integers[0,10]:int64\nm: 3 from integers[0,2]:bool\n"},
            {":input z=4:normal:i64", "error: invalid generator '4:normal:i64': 'normal' draws real numbers", true},
            {":params", "beta = 0.5\n"},
            {":ast", "body\n  binary < @1:3\n    name u @1:1\n    number 0.5 @1:5\n"},
            {":checked sum(d)", "inputs: p, t\nparams: (none)\nreduction: sum\nd = (p - t) ^ 2\nbody: d\n"},
            {":cuda sum(p * t)", "return x_p * x_t;", true},
            {":ptx mean(p)", ".entry lossjit_kernel", true},
            {":time",
             "error: :time times the GPU kernel, and this session uses the CPU reference (:device gpu switches)\n"},
            {":regs", "(a CPU session: the sm_90 CUBIN, as no GPU in particular chooses the kernel)\n", true},
            {":regs mean(p)", " registers per thread, 0 bytes of local memory (spills)\n", true},
            {":sweep", "error: :sweep needs knobs to vary, e.g. :sweep block=128,256,512 items=4,8,16", true},
            {":sweep block=128,256",
             "error: :sweep times the GPU kernel, and this session uses the CPU reference (:device gpu switches)\n"},
            {":sweep colour=red", "error: ", true},
            {":frob", "error: unknown command ':frob' (:help lists the commands)\n"},
            {":input p=1.5", "error: invalid generator", true},
            {":param beta=x", "error: :param 'beta=x': 'x' is not a number\n"},
            {":device", "values from the CPU reference (float64), as chosen (:device gpu switches)\n"},
            {"# a comment", ""},
            {"", ""},
            {":help :param",
             "  :param NAME=VALUE...   set parameters (declares one, or overrides a `param` default)\n"},
            {":quit", ""},
        };
        check_session(dir, "repl --cpu --echo", steps, "sum(p)\n");  // :quit ends the session before the last line
    }

    TEST_CASE("from a pipe without --echo only what the lines print; the status is 0 at the end of the input") {
        TempDir dir;
        const Result r = run_in(dir, "repl --cpu -i x=3:range", "sum(x)\nsum(y)\nx + 1");  // no final newline
        CHECK(r.status == 0);
        CHECK(r.output == "3\n" + caret("sum(y)", 5, "unknown name 'y': not an input (x), a parameter or a binding") +
                              "map of shape 3: 1, 2, 3 (min 1, max 3, mean 2)\n");
        // A bad option of the command line itself is fatal.
        CHECK(run_in(dir, "repl -i x=3:gaussian", "").status == 2);
    }

    TEST_CASE(":save writes a script that :load and a pipe replay") {
        TempDir dir;
        const std::vector<Step> session = {
            {":seed 7", ""},
            {":input p=8x4:normal t=4:sign", "p: 8x4 from normal[0,1]\nt: 4 from sign\n"},
            {":param margin=2", ""},
            {"h = max(0, margin - p * t);", ""},
            {"mean(h)", "", true},
            {"h > 1", "map of shape 8x4: ", true},
            {"mean(nope)", "unknown name 'nope'", true},  // not saved: it failed
            {":save s.lj", "saved 2 inputs, 1 parameter, 1 definition and 2 expressions to s.lj\n"},
        };
        check_session(dir, "repl --cpu --echo", session);
        CHECK(read_text(dir.path / "s.lj") ==
              "# lossjit repl session: replay with `:load FILE` or `lossjit repl < FILE`\n"
              ":seed 7\n"
              ":input p=8x4:normal\n"
              ":input t=4:sign\n"
              ":param margin=2\n"
              "h = max(0, margin - p * t);\n"
              "mean(h)\n"
              "h > 1\n");

        // The values of the original session come back, through :load and through a pipe.
        const Result original = run_in(dir, "repl --cpu",
                                       ":seed 7\n:input p=8x4:normal t=4:sign\n:param margin=2\n"
                                       "h = max(0, margin - p * t);\nmean(h)\nh > 1\n");
        const Result piped = run_in(dir, "repl --cpu", read_text(dir.path / "s.lj"));
        CHECK(piped.output == original.output);
        const Result loaded = run_in(dir, "repl --cpu", ":load s.lj\n:defs\n");
        CHECK(loaded.output == original.output + "h = max(0, margin - p * t);\n");
        const Result echoed = run_in(dir, "repl --cpu --echo", ":load s.lj\n");
        CHECK(echoed.output.find(
                  "lossjit> :load s.lj\ns.lj:2> :seed 7\ns.lj:3> :input p=8x4:normal\np: 8x4 from normal[0,1]\n") == 0);

        // A failing line stops :load and says where.
        std::ofstream(dir.path / "bad.lj") << ":input x=3:range\n\nsum(x)\nsum(lgo(x))\nsum(x * 2)\n";
        const Result bad = run_in(dir, "repl --cpu", ":load bad.lj\n:load missing.lj\n");
        CHECK(bad.status == 0);
        CHECK(bad.output ==
              "x: 3 from range\n3\n"
              "bad.lj:4:5: error: unknown function 'lgo' (did you mean 'log'?)\n"
              "sum(lgo(x))\n"
              "    ^\n"
              "(:load stopped at bad.lj:4)\n"
              "error: :load: cannot read 'missing.lj'\n");
    }

    TEST_CASE(":load of a .loss file defines its bindings and evaluates its body") {
        TempDir dir;
        const std::string file = source_dir() + "/examples/smooth_l1.loss";
        const Result r = run_in(dir, "repl --cpu -i p=4:range -i t=4:const[1]",
                                ":load " + file + "\n:defs\n:param beta=0.5\nmean(d)\n");
        // |p - t| = 1, 0, 1, 2: smooth L1 with beta 1 is (0.5 + 0 + 0.5 + 1.5) / 4.
        CHECK(r.output == "0.625\nparam beta = 1;\nd = abs(p - t);\n1\n");
        // Mistakes point at the file's own lines.
        std::ofstream(dir.path / "typo.loss") << "# comment\nd = p - t;\nmean(lgo(d))\n";
        const Result typo = run_in(dir, "repl --cpu -i p=4 -i t=4", ":load typo.loss\n");
        CHECK(typo.output ==
              "typo.loss:3:6: error: unknown function 'lgo' (did you mean 'log'?)\nmean(lgo(d))\n     ^\n");
    }

    TEST_CASE("without --cpu: the GPU where there is one, else the CPU reference, said once") {
        TempDir dir;
        std::string why;
        if (!lossjit::cuda_available(&why)) {
            const Result r = run_in(dir, "repl -i x=3:range", "sum(x)\nsum(x * 2)\n:time\n");
            CHECK(r.status == 0);
            CHECK(r.output ==
                  "(no CUDA device: values from the CPU reference)\n3\n6\nerror: :time needs a CUDA device (" + why +
                      ")\n");
            return;
        }
        // On the GPU: the kernel's values are the reference's to float32 precision, and :time times it.
        const std::string session =
            ":input p=1024x512:normal t=512:sign\nmean(max(0, 1 - p * t))\nclamp(p + 3, 0, 6) / 6\n:time\n"
            ":time sum(p * t)\n:device\n:regs\n:sweep block=128,256 items=4,8\n";
        const Result gpu = run_in(dir, "repl --echo", session);
        const Result cpu = run_in(dir, "repl --echo --cpu", session);
        INFO(gpu.output);
        CHECK(gpu.status == 0);
        const auto g = blocks_of(gpu.output);
        const auto c = blocks_of(cpu.output);
        REQUIRE(g.size() == 8);
        REQUIRE(c.size() == 8);
        const auto value = [](const std::string& block) { return std::stod(block.substr(block.find('\n') + 1)); };
        CHECK(value(g[1]) == doctest::Approx(value(c[1])).epsilon(1e-5));
        CHECK(g[2].find("map of shape 1024x512: ") != std::string::npos);
        CHECK(g[3].find("ms per call (median of 7 batches of ") != std::string::npos);
        CHECK(g[4].find("first call ") != std::string::npos);  // a kernel not run before: its build is shown
        CHECK(g[4].find("ms per call") != std::string::npos);
        CHECK(g[5].find("CUDA device 0: ") != std::string::npos);
        CHECK(g[6].find(" registers per thread, ") != std::string::npos);  // of sum(p * t), the last expression
        CHECK(g[6].find("% occupancy)") != std::string::npos);
        CHECK(g[6].find("kernel: rows, ") != std::string::npos);
        // The sweep's table: its header, four variants and the defaults, one of them marked.
        CHECK(g[7].find("#  block  items  vector  unroll") != std::string::npos);
        std::size_t rows = 0;
        for (std::size_t at = g[7].find(" float64 "); at != std::string::npos; at = g[7].find(" float64 ", at + 1)) ++rows;
        CHECK(rows == 5);
        CHECK(g[7].find("default") != std::string::npos);
        CHECK(c[6].find("(a CPU session: the ") != std::string::npos);  // the CUBIN's, not a launch's
        CHECK(c[6].find(" registers per thread, ") != std::string::npos);
    }

    TEST_CASE("the walkthrough's REPL session prints what docs/walkthrough.md shows") {
        // Every block after a `<!-- repl-session ARGS -->` line is one piece of a single session of
        // `lossjit repl ARGS --echo` (the first marker's ARGS), run from a directory where examples/
        // is the repository's: its lines after "lossjit> " are typed, and the whole block is what the
        // terminal shows.
        const std::string doc = read_text(source_dir() + "/docs/walkthrough.md");
        REQUIRE(!doc.empty());
        std::istringstream in(doc);
        std::string args;
        std::string expected;
        std::string input;
        int blocks = 0;
        bool marked = false, inside = false;
        for (std::string line; std::getline(in, line);) {
            if (!inside && line.rfind("<!-- repl-session", 0) == 0) {
                if (args.empty()) args = line.substr(17, line.find("-->") - 17);
                marked = true;
            } else if (marked && !inside && line.rfind("```", 0) == 0) {
                inside = true;
                ++blocks;
            } else if (inside && line.rfind("```", 0) == 0) {
                inside = marked = false;
            } else if (inside) {
                expected += line + "\n";
                if (line.rfind("lossjit> ", 0) == 0) input += line.substr(9) + "\n";
            }
        }
        REQUIRE(blocks > 0);
        TempDir dir;
        fs::create_directory_symlink(source_dir() + "/examples", dir.path / "examples");
        const Result r = run_in(dir, "repl --echo " + args, input);
        CHECK(r.status == 0);
        const auto want = blocks_of(expected);
        const auto got = blocks_of(r.output);
        REQUIRE_MESSAGE(want.size() == got.size(), r.output);
        for (std::size_t k = 0; k < want.size(); ++k) CHECK_MESSAGE(matches(got[k], want[k]), got[k]);
    }

}  // TEST_SUITE
