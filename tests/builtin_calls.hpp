// A call of each row of the builtins table, for the tests that cover "every builtin": they build
// their programs from the table, so a new row is tested without new test code.
#pragma once

#include <array>
#include <map>
#include <string>
#include <string_view>

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

// Where a row is smooth and finite, for tests that compare values and derivatives: x in [lo, hi],
// y and z in [ylo, yhi]. Rows not listed take [-3, 3] for x and [-2, 4] for y and z: off-centre, so
// that a sum over x - y cannot cancel to near 0 and leave only rounding to compare.
struct BuiltinDomain {
    double lo, hi, ylo, yhi;
};
inline BuiltinDomain builtin_domain(const lossjit::BuiltinInfo& row) {
    static const std::map<std::string_view, BuiltinDomain> domains{
        {"/", {-3, 3, 0.5, 3}}, {"%", {-5, 5, 0.5, 2}}, {"floordiv", {-5, 5, 0.5, 2}}, {"^", {0.2, 3, -2, 2}}, {"sqrt", {0.1, 4, 0, 1}},
        {"rsqrt", {0.1, 4, 0, 1}}, {"log", {0.1, 5, 0, 1}}, {"log2", {0.1, 5, 0, 1}}, {"log10", {0.1, 5, 0, 1}},
        {"log1p", {-0.9, 5, 0, 1}}, {"tan", {-1.2, 1.2, 0, 1}}, {"sigmoid", {-6, 6, 0, 1}},
        {"softplus", {-30, 30, 0, 1}}, {"clamp", {-3, 3, -2, 2}}, {"xlogy", {-3, 3, 0.1, 4}},
        {"acosh", {1.2, 4, 0, 1}}, {"atanh", {-0.9, 0.9, 0, 1}}, {"asin", {-0.9, 0.9, 0, 1}},
        {"acos", {-0.9, 0.9, 0, 1}}, {"atan2", {-3, 3, 0.5, 3}}, {"lgamma", {0.2, 5, 0, 1}},
        {"digamma", {0.2, 5, 0, 1}}, {"trigamma", {0.2, 5, 0, 1}},
    };
    const auto it = domains.find(row.is_operator() ? row.op : row.name);
    return it == domains.end() ? BuiltinDomain{-3, 3, -2, 4} : it->second;
}
