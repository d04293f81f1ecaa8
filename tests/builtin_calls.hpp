// A call of each row of the builtins table, for the tests that cover "every builtin": they build
// their programs from the table, so a new row is tested without new test code.
#pragma once

#include <array>
#include <string>

#include "lang/builtins.hpp"

// The row applied to the given argument texts ("(x + y)", "-x", "(x ? y : z)", "clamp(x, y, z)"),
// with exactly as many arguments as a node of the row has.
inline std::string builtin_call(const lossjit::BuiltinInfo& row, const std::array<std::string, 3>& args) {
    if (row.is_operator() && row.arity == 1) return std::string(row.op) + args[0];
    if (row.is_operator() && row.arity == 2) return "(" + args[0] + " " + std::string(row.op) + " " + args[1] + ")";
    if (row.is_operator()) return "(" + args[0] + " ? " + args[1] + " : " + args[2] + ")";
    std::string text = std::string(row.name) + "(";
    for (int i = 0; i < row.arity; ++i) text += (i ? ", " : "") + args[static_cast<std::size_t>(i)];
    return text + ")";
}
