#include "pipeline_check.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "lang/builtins.hpp"
#include "jit/compile.hpp"
#include "lossjit/errors.hpp"
#include "pipeline.hpp"
#include "codegen/kernel_spec.hpp"

namespace lossjit::fuzz {
namespace {

// Programs bigger than this skip the CPU reference: it keeps a 2048-element column per node, and
// a few thousand of those per execution would make the fuzzer crawl without finding more.
constexpr std::size_t kMaxEvaluatedNodes = 512;

struct Finding {
    std::string what;
};

[[noreturn]] void finding(const std::string& what) { throw Finding{what}; }

std::uint64_t fnv1a(std::string_view text) {
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    return h;
}

bool identifier_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool identifier_char(char c) { return identifier_start(c) || (c >= '0' && c <= '9'); }

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto end = text.find('\n', start);
        if (end == std::string::npos) {
            lines.push_back(text.substr(start));
            break;
        }
        lines.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

std::size_t count_of(const std::string& text, std::string_view needle) {
    std::size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
}

// Occurrences of `word` as a whole identifier: user names contain anything, but always behind a
// prefix, so `asm` alone can only come from the templates.
std::size_t count_word(const std::string& text, std::string_view word) {
    std::size_t n = 0;
    for (auto at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
        const bool starts = at == 0 || !identifier_char(text[at - 1]);
        const bool ends = at + word.size() == text.size() || !identifier_char(text[at + word.size()]);
        n += starts && ends;
    }
    return n;
}

// The same program shape with nothing of the user's in it: the same reduction, as many inputs
// (named c0, c1, ...), no parameters or bindings, body 0. Emitted with the same KernelSpec, every
// line it shares with the real kernel is template text; the rest is what the program contributed.
std::vector<Builtin> applied_builtins(const ir::Program& program) {
    std::vector<bool> applied(static_cast<std::size_t>(Builtin::Count_), false);
    for (const auto& n : program.nodes)
        if (n.kind == ir::NodeKind::Apply) applied[static_cast<std::size_t>(n.fn)] = true;
    std::vector<Builtin> out;
    for (std::size_t b = 0; b < applied.size(); ++b)
        if (applied[b]) out.push_back(static_cast<Builtin>(b));
    return out;
}

ir::Program canonical_twin(const ir::Program& program) {
    ir::Program twin;
    twin.source_name = "canonical";
    twin.reduction = program.reduction;
    for (std::size_t k = 0; k < program.inputs.size(); ++k) twin.inputs.push_back(fmt::format("c{}", k));
    ir::Node zero;
    zero.kind = ir::NodeKind::Constant;
    zero.value = 0.0;
    twin.nodes.push_back(zero);
    twin.body = 0;
    // A statistic's value (ir/statistics.cpp) where the program reads one: the kernel's parameter
    // list then ends alike.
    if (program.reads_statistics()) twin.params.push_back({"s0", 0.0, 0});
    // The twin reads the inputs the program reads, so the kernel's input list has the same shape.
    for (int slot : read_inputs(program)) {
        ir::Node input;
        input.kind = ir::NodeKind::Input;
        input.slot = slot;
        twin.nodes.push_back(input);
        ir::Node add;
        add.kind = ir::NodeKind::Apply;
        add.fn = Builtin::Add;
        add.arity = 2;
        add.args = {twin.body, static_cast<int>(twin.nodes.size()) - 1, -1};
        twin.nodes.push_back(add);
        twin.body = static_cast<int>(twin.nodes.size()) - 1;
    }
    // The CUDA helpers of the builtins the program applies are lossjit's text too (the builtins
    // table): the twin applies the same builtins, in nodes its body does not reach.
    for (Builtin fn : applied_builtins(program)) {
        ir::Node unused;
        unused.kind = ir::NodeKind::Apply;
        unused.fn = fn;
        unused.arity = builtin_info(fn).arity;
        unused.args = {0, 0, 0};
        twin.nodes.push_back(unused);
    }
    return twin;
}

using NameSet = std::unordered_set<std::string>;

// Identifiers the emitter itself writes into the per-program lines, besides the builtins' CUDA
// spellings and the prefixed user names.
const NameSet& emitter_identifiers() {
    static const NameSet names = [] {
        NameSet s{"const", "float", "bool", "long", "c", "lj", "coords", "offset", "ptr", "strides",
                                "extents", "i", "value", "true", "false", "__restrict__", "Strided",
                                "__int_as_float", "__longlong_as_double", "lj_square", "lj_cube", "lj_div_by", "double",
                                "lj_div_by_param", "lj_div_reciprocal", "statistics",
                                // KL's term with one log (ir/print.cpp, templates/lj_log.cuh)
                                "lj_kl_term", "lj_kl_term_common",
                                // the element functor
                                "struct", "Element", "static", "constexpr", "int", "kInputs", "__host__",
                                "__device__", "__forceinline__", "inner_stride", "same_every_row", "k", "return", "using",
                                "Result", "operator", "x", "element", "in", "kGrads", "grad", "Value", "dtype",
                                "kResultDType", "grad_dtype", "g", "kFloat32", "kFloat64", "kBFloat16",
                                "kFloat16", "kInt32", "kInt64", "kUInt8", "kBool",
                                // the rows loop's common path (kinds/elementwise_emit.cpp)
                                "kCommonPath", "common_path", "rare_"};
        for (int b = 0; b < static_cast<int>(Builtin::Count_); ++b) {
            const BuiltinInfo& info = builtin_info(static_cast<Builtin>(b));
            for (const std::string_view cuda : {info.cuda, info.cuda_common}) {
                for (std::size_t i = 0; i < cuda.size();) {
                    if (identifier_start(cuda[i])) {
                        std::size_t j = i;
                        while (j < cuda.size() && identifier_char(cuda[j])) ++j;
                        s.emplace(cuda.substr(i, j - i));
                        i = j;
                    } else {
                        ++i;
                    }
                }
            }
        }
        return s;
    }();
    return names;
}

bool is_number_token(std::string_view t) {
    if (t.size() > 2 && t[0] == '0' && t[1] == 'x') {
        for (char c : t.substr(2))
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
        return true;
    }
    std::size_t i = 0;
    auto digits = [&] {
        const std::size_t from = i;
        while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
        return i > from;
    };
    if (!digits()) return false;
    if (i < t.size() && t[i] == '.') {
        ++i;
        digits();
    }
    if (i < t.size() && t[i] == 'e') {
        ++i;
        if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
        if (!digits()) return false;
    }
    if (i < t.size() && t[i] == 'f') ++i;
    return i == t.size();
}

// One line the program contributed: only identifiers the emitter owns or user names behind their
// prefixes, numbers, and C++ punctuation that cannot start a comment, string or directive.
NameSet user_identifiers(const ir::Program& program) {
    NameSet user;
    for (const auto& name : program.inputs) {
        user.insert("x_" + name);
        user.insert("in_" + name);
    }
    for (const auto& b : program.bindings) user.insert("b_" + b.name);
    for (const auto& p : program.params) {
        user.insert("param_" + p.name);
        user.insert("rcp_param_" + p.name);  // its reciprocal, where it divides (ir/print.cpp)
    }
    return user;
}

void check_program_line(const std::string& line, const NameSet& user) {
    static constexpr std::string_view kPunctuation = " ()[]{}<>=!&|?:;,+-*/%.";
    if (line.find("//") != std::string::npos || line.find("/*") != std::string::npos ||
        line.find("*/") != std::string::npos)
        finding("a comment marker in a generated line: " + line);
    for (std::size_t i = 0; i < line.size();) {
        const char c = line[i];
        if (identifier_start(c)) {
            std::size_t j = i;
            while (j < line.size() && identifier_char(line[j])) ++j;
            const std::string word = line.substr(i, j - i);
            if (!user.count(word) && !emitter_identifiers().count(word))
                finding("identifier '" + word + "' in a generated line comes from neither lossjit nor a "
                        "prefixed user name: " + line);
            i = j;
        } else if (c >= '0' && c <= '9') {
            std::size_t j = i;
            while (j < line.size() && (identifier_char(line[j]) || line[j] == '.' ||
                                       ((line[j] == '+' || line[j] == '-') && line[j - 1] == 'e' &&
                                        line.compare(i, 2, "0x") != 0)))
                ++j;
            if (!is_number_token(std::string_view(line).substr(i, j - i)))
                finding("malformed number '" + line.substr(i, j - i) + "' in a generated line: " + line);
            i = j;
        } else if (kPunctuation.find(c) != std::string_view::npos) {
            ++i;
        } else {
            finding(fmt::format("byte 0x{:02x} in a generated line: {}", static_cast<unsigned char>(c), line));
        }
    }
}

// What the templates alone contribute for one program shape, computed once per shape: emitting
// and splitting the twin dominated the harness's time.
struct TemplateFacts {
    std::unordered_map<std::string, int> lines;
    std::vector<std::size_t> counts;  // of kWords, then kNeedles
};

constexpr std::string_view kWords[] = {"asm", "__asm", "__asm__", "volatile"};
constexpr std::string_view kNeedles[] = {"#", "\"", "'", "\\", "//", "/*", "??"};

std::vector<std::size_t> risky_counts(const std::string& text) {
    std::vector<std::size_t> counts;
    for (auto w : kWords) counts.push_back(count_word(text, w));
    for (auto n : kNeedles) counts.push_back(count_of(text, n));
    return counts;
}

const TemplateFacts& template_facts(const ir::Program& program, const KernelSpec& spec) {
    static std::unordered_map<std::string, TemplateFacts> cache;
    std::string key = fmt::format("{}|{}|{}|{}|", static_cast<int>(program.reduction), program.inputs.size(),
                                  program.reads_statistics(), spec.signature());
    for (Builtin fn : applied_builtins(program)) key += fmt::format("{},", static_cast<int>(fn));
    if (auto it = cache.find(key); it != cache.end()) return it->second;
    if (cache.size() > 4096) cache.clear();
    const std::string twin = emit_cuda(canonical_twin(program), spec);
    TemplateFacts facts;
    for (auto& line : split_lines(twin)) ++facts.lines[line];
    facts.counts = risky_counts(twin);
    return cache.emplace(key, std::move(facts)).first->second;
}

void check_emitted(const std::string& source, const ir::Program& program, const KernelSpec& spec,
                   const CheckConfig& config) {
    const TemplateFacts& facts = template_facts(program, spec);
    const auto counts = risky_counts(source);
    for (std::size_t i = 0; i < counts.size(); ++i) {
        if (counts[i] != facts.counts[i]) {
            const auto what = i < std::size(kWords) ? kWords[i] : kNeedles[i - std::size(kWords)];
            finding(fmt::format("'{}' appears {} times in the kernel but {} times in the templates", what,
                                counts[i], facts.counts[i]));
        }
    }
    auto template_lines = facts.lines;
    const NameSet user = user_identifiers(program);
    for (const auto& line : split_lines(source)) {
        auto it = template_lines.find(line);
        if (it != template_lines.end() && it->second > 0) {
            --it->second;
            continue;
        }
        check_program_line(line, user);
    }
    if (config.compile_with_nvrtc) {
        try {
            (void)compile_cuda(source, "sm_90");
        } catch (const CompileError& e) {
            finding(std::string("NVRTC rejected the kernel: ") + e.what());
        }
    }
}

// ---- dump_checked -> program text -> the same program ----------------------------------------

std::string after(const std::string& line, std::string_view prefix) {
    if (line.compare(0, prefix.size(), prefix) != 0) finding("unexpected dump line: " + line);
    return line.substr(prefix.size());
}

// `text` with each whole word that names a statistic replaced by its definition, parenthesized.
std::string inline_statistics(const std::string& text, const std::map<std::string, std::string>& statistics) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
        if (identifier_start(text[i]) && (i == 0 || !identifier_char(text[i - 1]))) {
            std::size_t j = i;
            while (j < text.size() && identifier_char(text[j])) ++j;
            const std::string word = text.substr(i, j - i);
            const auto it = statistics.find(word);
            out += it != statistics.end() ? "(" + it->second + ")" : word;
            i = j;
        } else {
            out += text[i++];
        }
    }
    return out;
}

std::string program_from_dump(const std::string& dump) {
    const auto lines = split_lines(dump);
    if (lines.size() < 5 || !lines.back().empty()) finding("dump_checked has an unexpected form:\n" + dump);
    std::string text;
    const std::string params = after(lines[1], "params: ");
    if (params != "(none)") {
        std::size_t start = 0;
        while (start < params.size()) {
            auto end = params.find(", ", start);
            if (end == std::string::npos) end = params.size();
            text += "param " + params.substr(start, end - start) + ";\n";
            start = end + 2;
        }
    }
    // Statistics (ir/statistics.cpp) are written back where they are read: the split finds them again.
    std::size_t line = 2;
    std::map<std::string, std::string> statistics;
    static constexpr std::string_view kStatistic = "statistic (a pass of its own, first): ";
    for (; line < lines.size() && lines[line].rfind(kStatistic, 0) == 0; ++line) {
        const std::string definition = lines[line].substr(kStatistic.size());
        const auto eq = definition.find(" = ");
        if (eq == std::string::npos) finding("unexpected dump line: " + lines[line]);
        statistics[definition.substr(0, eq)] = inline_statistics(definition.substr(eq + 3), statistics);
    }
    const std::string reduction = after(lines[line], "reduction: ");
    for (std::size_t i = line + 1; i + 2 < lines.size(); ++i) text += inline_statistics(lines[i], statistics) + ";\n";
    const std::string body = inline_statistics(after(lines[lines.size() - 2], "body: "), statistics);
    // A map's body, and a composite one (its reductions are in it), stand alone.
    const bool alone = reduction.rfind("none", 0) == 0 || reduction == "composite";
    text += alone ? body : reduction + "(" + body + ")";
    return text;
}

// ---- the CPU reference on tiny inputs ---------------------------------------------------------

bool same_value(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return a == b && std::signbit(a) == std::signbit(b);
}

struct TinyInputs {
    std::vector<std::vector<float>> data;            // per input (empty for an index)
    std::vector<std::vector<std::int64_t>> indices;  // per input (an index's values; else empty)
    std::vector<OperandShape> shapes;
    std::vector<HostOperand> operands() const {
        std::vector<HostOperand> out;
        for (std::size_t k = 0; k < shapes.size(); ++k) {
            if (!indices[k].empty()) out.push_back({indices[k].data(), DType::int64});
            else out.push_back({data[k].data(), DType::float32});
        }
        return out;
    }
};

TinyInputs tiny_inputs(const ir::Program& program, std::uint64_t seed) {
    static constexpr float kPalette[] = {0.0f, -0.0f, 1.0f, -1.5f, 2.0f, 0.5f, 3.0f, -2.0f, 1e-40f,
                                         3.4e38f, -7.25f, 20.5f, NAN, INFINITY, -INFINITY, 0.1f};
    // Class indices of rows of 3: in range, and out of it (those rows give nan).
    static constexpr std::int64_t kIndices[] = {0, 1, 2, 2, 1, 0, 3, -1};
    const auto index = program.index_inputs();
    auto next = [&seed] {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        return seed >> 60;
    };
    TinyInputs t;
    t.data.resize(program.inputs.size());
    t.indices.resize(program.inputs.size());
    for (std::size_t k = 0; k < program.inputs.size(); ++k) {
        if (index[k]) {  // one integer per row of the [2, 3] matrices
            for (int i = 0; i < 2; ++i) t.indices[k].push_back(kIndices[next() & 7]);
            t.shapes.push_back({program.inputs[k], Shape{2}, {}});
            continue;
        }
        // The first input is sometimes a [2, 3] matrix, so broadcasting and strided walks run too;
        // a program that reduces along rows gets [2, 3] rows for its first input always.
        const bool matrix = k == 0 && ((seed & 1) || program.by_rows());
        const std::size_t n = matrix ? 6 : 3;
        for (std::size_t i = 0; i < n; ++i) t.data[k].push_back(kPalette[next() & 15]);
        t.shapes.push_back({program.inputs[k], matrix ? Shape{2, 3} : Shape{3}, {}});
    }
    return t;
}

std::vector<double> evaluate(const ir::Program& program, const TinyInputs& inputs) {
    std::vector<double> caller;
    for (std::size_t i = 0; i < program.caller_params(); ++i) caller.push_back(program.params[i].default_value);
    const auto statistics = reference_statistics(program, inputs.shapes, inputs.operands(), caller);
    const std::vector<double> params = parameter_values(program, caller, statistics);
    if (!program.is_map()) {
        const Layout layout = plan_program_layout(program, inputs.shapes, nullptr);
        return {reference_reduce(program, layout, inputs.operands(), params)};
    }
    const Shape shape = program_output_shape(program, inputs.shapes);
    const OperandShape out{"output", shape, {}};
    const Layout layout = plan_program_layout(program, inputs.shapes, &out);
    std::vector<float> values(static_cast<std::size_t>(element_count(shape)), -12345.0f);
    reference_map(program, layout, inputs.operands(), params, {values.data(), DType::float32});
    return {values.begin(), values.end()};
}

void check_kernels(const ir::Program& program, std::uint64_t seed, const CheckConfig& config);
void check_dump_and_reference(const ir::Program& program, std::uint64_t seed);

void run_checks(std::string_view text, const CheckConfig& config) {
    ir::Program program;
    try {
        const ast::Program syntax = parse(text, "fuzz");
        (void)dump_ast(syntax);
        program = check(syntax, {});
    } catch (const SourceError& e) {
        // An error must point inside the program (or just past its end) and say something.
        const auto& w = e.where();
        if (w.line < 1 || w.column < 1 || e.message().empty()) finding(std::string("bad diagnostic: ") + e.what());
        if (static_cast<std::size_t>(w.line) > static_cast<std::size_t>(count_of(std::string(text), "\n")) + 1)
            finding(std::string("diagnostic points past the last line: ") + e.what());
        return;
    } catch (const UsageError&) {
        return;
    }
    const std::uint64_t seed = fnv1a(text);

    // Kernel variants: everything contiguous at rank 1, and everything strided at some rank. (Programs
    // that reduce along rows have kernels of another shape, kinds/by_rows_emit.cpp: not checked here yet.)
    if (!program.by_rows()) check_kernels(program, seed, config);
    check_dump_and_reference(program, seed);
}

void check_kernels(const ir::Program& program, std::uint64_t seed, const CheckConfig& config) {
    KernelSpec flat;
    flat.inner_strides.assign(read_inputs(program).size(), 1);
    flat.vector_width = 4;
    check_emitted(emit_cuda(program, flat), program, flat, config);
    KernelSpec strided;
    strided.loop = KernelSpec::Loop::Strided;
    strided.rank = 1 + static_cast<int>(seed % kMaxRank);
    strided.block_threads = 128;
    check_emitted(emit_cuda(program, strided), program, strided, config);
}

void check_dump_and_reference(const ir::Program& program, std::uint64_t seed) {
    // The checked dump is valid source for the same program.
    const std::string dump = dump_checked(program);
    const std::string again = program_from_dump(dump);
    ir::Program reparsed;
    try {
        CheckOptions options;
        options.inputs = program.inputs;
        reparsed = check(parse(again, "dump"), options);
    } catch (const Error& e) {
        finding("the checked dump does not parse back:\n" + again + "\n" + e.what());
    }
    if (dump_checked(reparsed) != dump)
        finding("the checked dump is not a fixed point:\n" + dump + "--- became ---\n" + dump_checked(reparsed));

    if (program.nodes.size() > kMaxEvaluatedNodes) return;
    // batchmean of scalars is refused at call time (UsageError), which is right: nothing to check.
    if (program.reduction == ir::Reduction::BatchMean && program.inputs.empty()) return;
    const TinyInputs inputs = tiny_inputs(program, seed);
    std::vector<double> expected;
    try {
        expected = evaluate(program, inputs);
    } catch (const UsageError&) {
        return;  // refused at call time for these inputs (an index also read as a number): nothing to compare
    }
    std::vector<double> actual;
    try {
        actual = evaluate(reparsed, inputs);
    } catch (const UsageError& e) {
        finding(std::string("the re-parsed dump is refused where the program is not: ") + e.what() + "\n" + again);
    }
    if (expected.size() != actual.size()) finding("the re-parsed dump evaluates to a different number of values");
    for (std::size_t i = 0; i < expected.size(); ++i) {
        if (!same_value(expected[i], actual[i]))
            finding(fmt::format("the re-parsed dump evaluates differently at element {}: {} vs {}\n{}", i,
                                expected[i], actual[i], again));
    }
}

}  // namespace

std::string check_program(std::string_view text, const CheckConfig& config) {
    try {
        run_checks(text, config);
        return {};
    } catch (const Finding& f) {
        return f.what;
    } catch (const InternalError& e) {
        return std::string("InternalError: ") + e.what();
    } catch (const Error& e) {
        return std::string("unexpected lossjit::Error after check succeeded: ") + e.what();
    } catch (const std::exception& e) {
        return std::string("unexpected exception: ") + e.what();
    }
}

}  // namespace lossjit::fuzz
