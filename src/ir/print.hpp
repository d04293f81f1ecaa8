// print: one expression printer with two styles. Language: what dumps show and what the parser
// reads back (only the parentheses precedence needs). CUDA: what a kernel's element functor
// computes (each builtin's pattern from the table, bools converted where a float is expected).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/program.hpp"

namespace lossjit {

// Language: the dumps. Cuda: a float32 kernel. Cuda64: a float64 kernel (a program that reads a
// float64 input): the same spellings (the table's patterns are overloaded), literals as doubles.
enum class PrintStyle { Language, Cuda, Cuda64 };

class ExpressionPrinter {
public:
    ExpressionPrinter(const ir::Program& program, PrintStyle style);

    // Nodes printed as this name wherever they are an argument (shared terms, CUDA locals).
    void name(int id, std::string text) { names_[id] = std::move(text); }
    // CUDA: print the builtins that have one with their common path (BuiltinInfo::cuda_common), which
    // flags rare inputs in `rare_` instead of handling them (Element::common_path).
    void use_common_paths() { common_paths_ = true; }

    // The node as an argument would print it: its name if it has one.
    std::string print(int id) const;
    // The node's own expression, even if it has a name (for the name's definition).
    std::string define(int id) const;

private:
    std::string language_apply(const ir::Node& n) const;
    std::string language_reduction(const ir::Node& n) const;
    std::string cuda_apply(int id, const ir::Node& n) const;
    std::string cuda_as(int id, char wanted) const;
    int precedence(int id) const;

    std::string literal(double value) const;  // in the kernel's value type

    const ir::Program& program_;
    PrintStyle style_;
    std::map<int, std::string> names_;
    bool common_paths_ = false;
    std::vector<bool> uncontracted_;  // CUDA: uncontracted_nodes(program_)
};

// The nodes whose +, - and * a kernel computes without FMA contraction (lj::add_rn, sub_rn, mul_rn):
// the elements of every amax and amin. Their gradient compares each element, evaluated again, with
// the largest (smallest) found in another walk, and counts the equal ones: both evaluations must
// give the same bits, which the compiler's choice of where to fuse a multiply into an add does not
// promise. Down to the values per row (row reductions, takes), which each walk reads from one register.
std::vector<bool> uncontracted_nodes(const ir::Program& program);

// The members a kernel's Element (or RowProgram) declares after its parameters, initialized from
// them, for the CUDA printer's divisions by a parameter: `Value rcp_param_<name> = ...;`
// per parameter that divides (templates/lj_div.cuh: lj_div_by_param). Empty where none does.
std::string param_reciprocals(const ir::Program& program);
// Whether the program calls a builtin that has a common path (BuiltinInfo::cuda_common).
bool has_common_path(const ir::Program& program);

// A number as the language spells it (shortest round trip; inf, -inf, nan).
std::string number_text(double value);
// A float literal as CUDA spells it, exactly the float the kernel computes with.
std::string float_literal(double value);
// The same for a float64 kernel: every digit of the double.
std::string double_literal(double value);
// "(a + b)" -> "a + b" where the text sits alone (a call's argument, a statement).
std::string without_outer_parens(const std::string& text);

// How the CUDA style names the user's identifiers: behind a prefix, so no name of the user's can
// collide with one the kernel uses.
std::string cuda_input_name(const std::string& name);
std::string cuda_binding_name(const std::string& name);
std::string cuda_param_name(const std::string& name);
std::string cuda_param_reciprocal_name(const std::string& name);  // rcp_param_<name>: see param_reciprocals
// The seed of reduction `slot` (ir::NodeKind::Seed): seed_, seed_1, ... (no user's name can be these:
// theirs have prefixes); every gradient kernel defines them.
std::string cuda_seed_name(int slot);

}  // namespace lossjit
