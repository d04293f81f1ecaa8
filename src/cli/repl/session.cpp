// The session: lines, definitions and their dependencies, evaluation, inputs and parameters.
#include "cli/repl/session.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <iostream>
#include <set>
#include <sstream>

#include <unistd.h>

#include <fmt/format.h>

#include "cli/repl/terminal.hpp"
#include "lang/builtins.hpp"
#include "lossjit/version.hpp"
#include "pipeline.hpp"

namespace lossjit::cli::repl {

std::string trim(std::string_view s) {
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return {};
    const auto last = s.find_last_not_of(" \t\r\n");
    return std::string(s.substr(first, last - first + 1));
}

std::vector<std::string> split_words(std::string_view s) {
    std::vector<std::string> words;
    std::istringstream in{std::string(s)};
    for (std::string w; in >> w;) words.push_back(w);
    return words;
}

std::string strip_comment(std::string_view line) { return std::string(line.substr(0, line.find('#'))); }

std::vector<std::string> split_statements(std::string_view text, std::string (*tidy)(std::string_view)) {
    std::vector<std::string> pieces;
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto end = text.find(';', start);
        std::string piece = tidy(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
        if (!piece.empty()) pieces.push_back(std::move(piece));
        if (end == std::string_view::npos) break;
        start = end + 1;
    }
    return pieces;
}

std::string collapse_whitespace(std::string_view s) {
    std::string out;
    bool space = false;
    for (char c : s) {
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            space = !out.empty();
        } else {
            if (space) out += ' ';
            out += c;
            space = false;
        }
    }
    return out;
}


namespace {

// The names an expression reads, in source order (functions are not names).
void collect_names(const ast::Expr& e, std::vector<std::string>& names) {
    if (e.kind == ast::ExprKind::Name) names.push_back(e.text);
    for (const auto& a : e.args) collect_names(*a, names);
}

}  // namespace

std::vector<std::string> names_read(const ast::Program& program) {
    std::vector<std::string> names;
    for (const auto& s : program.statements)
        if (s.value && s.kind == ast::Statement::Kind::Binding) collect_names(*s.value, names);
    if (program.body) collect_names(*program.body, names);
    return names;
}

namespace {

const ast::Expr* find_name(const ast::Expr& e, std::string_view name) {
    if (e.kind == ast::ExprKind::Name && e.text == name) return &e;
    for (const auto& a : e.args)
        if (const auto* found = find_name(*a, name)) return found;
    return nullptr;
}

const ast::Expr* name_at(const ast::Expr& e, int column) {
    if (e.kind == ast::ExprKind::Name && e.pos.column == column) return &e;
    for (const auto& a : e.args)
        if (const auto* found = name_at(*a, column)) return found;
    return nullptr;
}

// The name at `column` of a one-line program when a later statement of that line binds it.
std::optional<std::string> bound_later(const ast::Program& line, int column) {
    for (std::size_t k = 0; k < line.statements.size(); ++k) {
        const auto* value = line.statements[k].value.get();
        const ast::Expr* name = value ? name_at(*value, column) : nullptr;
        if (!name) continue;
        for (std::size_t later = k + 1; later < line.statements.size(); ++later)
            if (line.statements[later].name == name->text) return name->text;
    }
    return std::nullopt;
}

std::string generator_text(const GeneratorSpec& g) {
    const std::string dtype = g.dtype == DType::float32 ? "" : ":" + std::string(to_string(g.dtype));
    if (g.args.empty()) return g.kind + dtype;
    return fmt::format("{}[{}]{}", g.kind, fmt::join(g.args, ","), dtype);
}

}  // namespace

// ---- errors ------------------------------------------------------------------------------------

// A diagnostic about `shown`, the line the user typed (or a definition), at `column`; during
// :load the location names the file and its line.
void Repl::fail_at(const std::string& shown, int column, const std::string& message) const {
    const std::string source = std::string(static_cast<std::size_t>(source_line_ - 1), '\n') + shown;
    throw SourceError(SourceLocation{source_name_, source_line_, column}, message, source);
}

// The checker saw the needed definitions, one per line, then the line; `shown` holds them so. Its
// location names a line of that program; the user sees the one line it came from.
void Repl::rethrow_in(const SourceError& e, const std::vector<std::string>& shown, const ast::Program* line) const {
    const int at = e.where().line;
    if (at < 1 || static_cast<std::size_t>(at) > shown.size()) throw e;
    // Within the typed line a name bound by a later statement of it: the checker's message would
    // count the lines of the combined program, which the user never saw, so say it without them.
    if (line && static_cast<std::size_t>(at) == shown.size()) {
        if (const auto name = bound_later(*line, e.where().column))
            fail_at(shown.back(), e.where().column, fmt::format("'{}' is used before its definition", *name));
    }
    fail_at(shown[static_cast<std::size_t>(at - 1)], e.where().column, e.message());
}

void Repl::report(const std::exception& e, bool source_error) const {
    std::cout.flush();
    if (source_error) {
        std::cerr << e.what() << "\n";
    } else if (source_name_ != "expr") {
        std::cerr << fmt::format("{}:{}: error: {}\n", source_name_, source_line_, e.what());
    } else {
        std::cerr << "error: " << e.what() << "\n";
    }
    std::cerr.flush();
}

// ---- the main loop -----------------------------------------------------------------------------

int Repl::run() {
    interactive_ = ::isatty(STDIN_FILENO) != 0;
    std::optional<Terminal> terminal;
    if (interactive_) {
        std::vector<std::string> names;
        for (const auto& c : commands()) names.emplace_back(c.name);
        terminal.emplace(std::move(names));
        std::cout << fmt::format(
            "lossjit {} repl: type an expression, :help for the commands, :quit or Ctrl-D to leave\n", kVersion);
    }
    while (!quit_) {
        std::string line;
        if (terminal) {
            std::cout.flush();
            std::vector<std::string> names;
            for (const auto& i : inputs_) names.push_back(i.name);
            for (const auto& p : params_) names.push_back(p.name);
            for (const auto& d : defs_) names.push_back(d.name);
            terminal->set_session_names(std::move(names));
            const auto read = terminal->read_line();
            if (!read) {
                std::cout << "\n";
                break;
            }
            line = *read;
        } else {
            if (!std::getline(std::cin, line)) break;
            if (echo_) std::cout << kPrompt << line << "\n";
        }
        handle(line);
    }
    std::cout.flush();
    return 0;
}

bool Repl::handle(const std::string& line) {
    try {
        execute(line);
        return true;
    } catch (const SourceError& e) {
        report(e, true);
    } catch (const Error& e) {
        report(e, false);
    } catch (const std::bad_alloc&) {
        report(std::runtime_error("out of host memory"), false);
    } catch (const std::exception& e) {
        report(e, false);
    }
    return false;
}

void Repl::execute(const std::string& raw) {
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#') return;
    if (line[0] == ':') {
        const auto space = line.find_first_of(" \t");
        const std::string name = line.substr(0, space);
        const std::string arg = space == std::string::npos ? std::string() : trim(line.substr(space));
        const Command* command = find_command(name);
        if (!command) throw UsageError(fmt::format("unknown command '{}' (:help lists the commands)", name));
        (this->*command->handler)(arg);
        return;
    }
    // An expression (with a body), or definitions only (statements, each ending in ';').
    try {
        parse(line, "expr");
    } catch (const SourceError& first) {
        ast::Program parsed;
        try {
            parsed = parse(line + "\n0", "expr");
        } catch (const SourceError&) {
            fail_at(line, first.where().column, first.message());
        }
        define(line, parsed);
        return;
    }
    evaluate(line);
}

// ---- definitions -------------------------------------------------------------------------------

void Repl::define(const std::string& line, const ast::Program& parsed) {
    const std::vector<std::string> pieces = split_statements(strip_comment(line), trim);
    if (pieces.size() != parsed.statements.size())
        throw InternalError("repl: the statements of a definitions line did not split at ';'");

    // A name defined again replaces its definition in place, so later definitions that use it see
    // the new one.
    std::vector<Definition> defs = defs_;
    for (std::size_t k = 0; k < pieces.size(); ++k) {
        const auto& statement = parsed.statements[k];
        Definition def{statement.name, pieces[k], {}};
        if (statement.kind == ast::Statement::Kind::Binding) collect_names(*statement.value, def.reads);
        if (std::any_of(inputs_.begin(), inputs_.end(), [&](const Input& i) { return i.name == statement.name; }))
            fail_at(def.text + ";", static_cast<int>(def.text.find(statement.name)) + 1,
                    fmt::format("'{}' is an input; bind another name (or :unset {} first)", statement.name,
                                statement.name));
        auto same = std::find_if(defs.begin(), defs.end(), [&](const Definition& d) { return d.name == def.name; });
        if (same != defs.end())
            *same = std::move(def);
        else
            defs.push_back(std::move(def));
    }

    // A definition may use only earlier ones (a replaced one keeps its place).
    for (std::size_t k = 0; k < defs.size(); ++k) {
        for (const auto& name : defs[k].reads) {
            const auto later = std::find_if(defs.begin() + static_cast<std::ptrdiff_t>(k), defs.end(),
                                            [&](const Definition& d) { return d.name == name; });
            if (later == defs.end()) continue;
            const auto wrapped = parse(defs[k].text + ";\n0", "expr");
            const auto* at = find_name(*wrapped.statements.front().value, name);
            fail_at(
                defs[k].text + ";", at ? at->pos.column : 1,
                later - defs.begin() == static_cast<std::ptrdiff_t>(k)
                    ? fmt::format("'{}' cannot use itself: a definition uses only earlier ones", name)
                    : fmt::format("'{}' is defined after '{}': a definition uses only earlier ones (:defs lists them)",
                                  name, defs[k].name));
        }
    }

    // Check them all together, with every input of the session.
    std::string text;
    std::vector<std::string> shown;
    for (const auto& d : defs) {
        text += d.text + ";\n";
        shown.push_back(d.text + ";");
    }
    text += "0";
    Options options;
    for (const auto& i : inputs_) options.inputs.push_back(i.name);
    for (const auto& p : params_) {
        const bool read = std::any_of(defs.begin(), defs.end(), [&](const Definition& d) {
            return std::find(d.reads.begin(), d.reads.end(), p.name) != d.reads.end();
        });
        if (read) options.params.push_back(p);
    }
    try {
        const Loss loss = compile(text, options);
        if (inputs_.empty() && !loss.inputs().empty()) {
            // No inputs in the session: the checker took the free names for inputs.
            const std::string& name = loss.inputs().front();
            for (std::size_t k = 0; k < defs.size(); ++k) {
                const auto wrapped = parse(defs[k].text + ";\n0", "expr");
                if (wrapped.statements.front().value) {
                    if (const auto* e = find_name(*wrapped.statements.front().value, name))
                        fail_at(shown[k], e->pos.column,
                                fmt::format("unknown name '{}': not an input, a parameter or a binding (give it with "
                                            ":input {}=SHAPE:GENERATOR or {}=FILE.npy)",
                                            name, name, name));
                }
            }
            throw UsageError(fmt::format("unknown name '{}'", name));
        }
    } catch (const SourceError& e) {
        rethrow_in(e, shown);
    }
    defs_ = std::move(defs);
}

// ---- evaluation --------------------------------------------------------------------------------

Compiled Repl::compile_line(const std::string& line) {
    ast::Program parsed;
    try {
        parsed = parse(line, "expr");
    } catch (const SourceError& e) {
        fail_at(line, e.where().column, e.message());
    }
    // What the line reads; names it binds itself shadow the session's definitions.
    const std::vector<std::string> reads = names_read(parsed);
    std::set<std::string> local;
    for (const auto& s : parsed.statements) local.insert(s.name);
    std::set<std::string> needed;
    for (const auto& r : reads)
        if (!local.count(r)) needed.insert(r);
    std::vector<bool> included(defs_.size(), false);
    for (std::size_t k = defs_.size(); k-- > 0;) {
        if (!needed.count(defs_[k].name)) continue;
        included[k] = true;
        needed.insert(defs_[k].reads.begin(), defs_[k].reads.end());
    }
    std::string text;
    std::vector<std::string> shown;
    for (std::size_t k = 0; k < defs_.size(); ++k) {
        if (!included[k]) continue;
        text += defs_[k].text + ";\n";
        shown.push_back(defs_[k].text + ";");
    }
    text += line;
    shown.push_back(line);

    std::vector<Param> params;
    for (const auto& p : params_)
        if (needed.count(p.name)) params.push_back(p);
    std::string key = text + '\x01';
    for (const auto& i : inputs_) key += i.name + ',';
    key += '\x01';
    for (const auto& p : params) key += p.name + ',';

    auto found = losses_.find(key);
    if (found == losses_.end()) {
        Options options;
        options.device = device_;
        options.params = params;
        for (const auto& i : inputs_) options.inputs.push_back(i.name);
        try {
            // First with every input, so that an unknown name is an error with a caret; then with
            // only those the program reads, so that the others take no part in broadcasting.
            const Loss all = compile(text, options);
            if (options.inputs.empty() && !all.inputs().empty()) {
                const std::string& name = all.inputs().front();
                const ast::Expr* at = nullptr;
                for (const auto& s : parsed.statements)
                    if (!at && s.value) at = find_name(*s.value, name);
                if (!at) at = find_name(*parsed.body, name);
                const std::string message = fmt::format(
                    "unknown name '{}': not an input, a parameter or a binding (give it with :input {}=SHAPE:GENERATOR "
                    "or {}=FILE.npy)",
                    name, name, name);
                if (at) fail_at(line, at->pos.column, message);
                throw UsageError(message);
            }
            std::vector<std::string> used;
            for (const auto& i : inputs_)
                if (all.uses(i.name)) used.push_back(i.name);
            options.inputs = used;
            if (losses_.size() >= 64) losses_.clear();
            found = losses_.emplace(key, CachedLoss{compile(text, options), false, text, options}).first;
        } catch (const SourceError& e) {
            rethrow_in(e, shown, &parsed);
        }
    }
    Compiled c;
    c.entry = &found->second;
    Loss& loss = c.entry->loss;
    for (const auto& p : params)
        if (loss.uses(p.name)) loss.set_param(p.name, p.value);
    for (const auto& name : loss.inputs()) {
        const auto it = std::find_if(inputs_.begin(), inputs_.end(), [&](const Input& i) { return i.name == name; });
        if (it == inputs_.end()) throw InternalError("repl: a compiled program reads an input the session lacks");
        c.inputs.push_back(static_cast<std::size_t>(it - inputs_.begin()));
    }
    return c;
}

std::vector<TensorView> Repl::host_views(const Compiled& c) const {
    std::vector<TensorView> views;
    for (auto k : c.inputs) views.push_back(inputs_[k].host.view());
    return views;
}

std::vector<TensorView> Repl::shape_views(const Compiled& c) const {
    std::vector<TensorView> views;
    for (auto k : c.inputs) views.push_back(TensorView::contiguous(nullptr, inputs_[k].host.shape, inputs_[k].host.dtype));
    return views;
}

std::vector<TensorView> Repl::device_views(const Compiled& c) {
    std::vector<TensorView> views;
    for (auto k : c.inputs) {
        Input& in = inputs_[k];
        const std::size_t bytes = in.host.bytes.size();
        if (!in.device && bytes > 0) {
            in.device.emplace(bytes, device_);
            in.device->upload(in.host.bytes.data(), bytes);
        }
        views.push_back(TensorView::contiguous(in.device ? in.device->data() : nullptr, in.host.shape, in.host.dtype));
    }
    return views;
}

bool Repl::gpu_present() {
    if (!probed_) {
        probed_ = true;
        has_gpu_ = cuda_available(&why_no_gpu_);
    }
    return has_gpu_;
}

bool Repl::use_gpu() {
    if (force_cpu_) return false;
    if (gpu_present()) return true;
    if (!noted_cpu_) {
        noted_cpu_ = true;
        std::cout.flush();
        std::cerr << "(no CUDA device: values from the CPU reference)\n";
    }
    return false;
}

std::string Repl::arch() { return gpu_present() ? device_info(device_).arch() : std::string("sm_90"); }

void Repl::evaluate(const std::string& line) {
    Compiled c = compile_line(line);
    Loss& loss = c.entry->loss;
    const bool gpu = use_gpu();
    if (loss.kind() == Kind::Reduction) {
        std::vector<double> values;
        if (gpu) {
            const std::vector<float> got = loss.values(device_views(c));
            values.assign(got.begin(), got.end());
            c.entry->launched = true;
        } else {
            values = loss.reference_values(host_views(c));
        }
        const std::vector<std::string> names = loss.results();
        for (std::size_t k = 0; k < values.size(); ++k)
            std::cout << fmt::format("{}{:.9g}\n", names.empty() ? std::string() : names[k] + " = ", values[k]);
    } else {
        const Shape shape = loss.output_shape(shape_views(c));
        std::vector<float> out(static_cast<std::size_t>(element_count(shape)));
        if (gpu) {
            DeviceBuffer buffer(std::max<std::size_t>(out.size(), 1) * sizeof(float), device_);
            buffer.fill_bytes(0xFF);
            loss.map(device_views(c), OutputView::contiguous(buffer.data(), shape));
            synchronize(device_);
            c.entry->launched = true;
            buffer.download(out.data(), out.size() * sizeof(float));
        } else {
            loss.reference_map(host_views(c), OutputView::contiguous(out.data(), shape));
        }
        if (out.empty()) {
            std::cout << fmt::format("map of shape {} (no elements)\n", format_shape(shape));
        } else {
            double lo = INFINITY, hi = -INFINITY, sum = 0;
            std::size_t nans = 0;
            for (float v : out) {
                sum += v;
                if (std::isnan(v)) {
                    ++nans;
                    continue;
                }
                lo = std::min<double>(lo, v);
                hi = std::max<double>(hi, v);
            }
            const std::size_t shown = std::min<std::size_t>(out.size(), 6);
            std::string summary = nans == out.size() ? fmt::format("all {} nan", nans)
                                                     : fmt::format("min {:.7g}, max {:.7g}, mean {:.7g}{}", lo, hi,
                                                                   sum / static_cast<double>(out.size()),
                                                                   nans ? fmt::format(", {} nan", nans) : "");
            std::cout << fmt::format("map of shape {}: {:.7g}{} ({})\n", format_shape(shape),
                                     fmt::join(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
                                     out.size() > shown ? ", ..." : "", summary);
        }
    }
    last_ = line;
    if (std::find(expressions_.begin(), expressions_.end(), line) == expressions_.end()) expressions_.push_back(line);
}

// What a stage command works on: its argument, which becomes the last expression if it compiles,
// or else the last expression.
Compiled Repl::compile_for(const std::string& arg, std::string_view command) {
    if (arg.empty() && last_.empty())
        throw UsageError(
            fmt::format("{} needs an expression: give one ({} EXPR) or evaluate one first", command, command));
    Compiled c = compile_line(arg.empty() ? last_ : arg);
    if (!arg.empty()) last_ = arg;
    return c;
}

// ---- inputs and parameters ---------------------------------------------------------------------

std::string Repl::describe(const Input& in) const {
    InputArg arg{in.name, in.spec};
    if (arg.is_file()) {
        const std::string dtype = in.host.dtype == DType::float32 ? "" : " " + std::string(to_string(in.host.dtype));
        return fmt::format("{}: {}{} from {}", in.name, format_shape(in.host.shape), dtype, in.spec);
    }
    const std::string spec = in.spec.find(':') == std::string::npos ? in.spec + ":uniform" : in.spec;
    return fmt::format("{}: {} from {}", in.name, format_shape(in.host.shape), generator_text(parse_generator(spec)));
}

void Repl::set_input(const InputArg& arg, bool quiet) {
    if (std::any_of(params_.begin(), params_.end(), [&](const Param& p) { return p.name == arg.name; }))
        throw UsageError(fmt::format("'{}' is a parameter (:unset {} first)", arg.name, arg.name));
    if (std::any_of(defs_.begin(), defs_.end(), [&](const Definition& d) { return d.name == arg.name; }))
        throw UsageError(
            fmt::format("'{}' is defined as a binding or parameter (:unset {} first)", arg.name, arg.name));
    // The same check the compiler makes, before any data is made.
    const bool identifier =
        !arg.name.empty() && (std::isalpha(static_cast<unsigned char>(arg.name[0])) || arg.name[0] == '_') &&
        std::all_of(arg.name.begin(), arg.name.end(),
                    [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; });
    if (!identifier || arg.name == "param")
        throw UsageError(fmt::format("input name '{}' is not an identifier", printable(arg.name)));
    Input in{arg.name, arg.spec, load_input(arg, seed_), std::nullopt};
    auto same = std::find_if(inputs_.begin(), inputs_.end(), [&](const Input& i) { return i.name == arg.name; });
    const auto index = static_cast<std::size_t>(same - inputs_.begin());
    if (same != inputs_.end())
        *same = std::move(in);
    else
        inputs_.push_back(std::move(in));
    if (!quiet) std::cout << describe(inputs_[index]) << "\n";
}

void Repl::set_param(const Param& p) {
    if (std::any_of(inputs_.begin(), inputs_.end(), [&](const Input& i) { return i.name == p.name; }))
        throw UsageError(fmt::format("'{}' is an input (:unset {} first)", p.name, p.name));
    auto same = std::find_if(params_.begin(), params_.end(), [&](const Param& q) { return q.name == p.name; });
    if (same != params_.end())
        same->value = p.value;
    else
        params_.push_back(p);
}

}  // namespace lossjit::cli::repl
