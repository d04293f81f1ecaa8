// The checker's output: a resolved, typed, constant-folded program. Every later stage (emit, the
// CPU reference, dumps) works from this and never looks at the syntax tree again.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "lang/ast.hpp"
#include "lang/builtins.hpp"

namespace lossjit::ir {

enum class Reduction { None, Sum, Mean, BatchMean };

enum class NodeKind : unsigned char { Constant, Input, Param, Binding, Apply };

struct Node {
    NodeKind kind = NodeKind::Constant;
    ValueType type = ValueType::Float;
    Builtin fn = Builtin::Count_;     // Apply only
    int slot = -1;                    // Input, Param or Binding index
    double value = 0.0;               // Constant only
    int arity = 0;                    // Apply only
    std::array<int, 3> args{-1, -1, -1};
    ast::Pos pos;
};

struct ParamDecl {
    std::string name;
    double default_value;
};

struct BindingDef {
    std::string name;
    int node;  // the bound value
    ast::Pos pos;
};

// The derivative of the per-element body with respect to one input: d body / d input at one
// element, before the reduction's scale (1/N, 1/dim0) and the upstream gradient multiply it.
// Filled only by differentiate(), which puts value and derivatives in one node list so that they
// share every common subexpression.
struct Derivative {
    int input;  // input slot
    int node;
};

// Nodes are stored so that every node's arguments come before it, which lets evaluators walk the
// array once, front to back.
struct Program {
    std::string source_name;
    std::string source;
    Reduction reduction = Reduction::None;
    std::vector<std::string> inputs;
    std::vector<ParamDecl> params;
    std::vector<BindingDef> bindings;
    std::vector<Node> nodes;
    int body = -1;
    std::vector<Derivative> derivatives;  // empty unless differentiated; further roots beside body

    const Node& node(int id) const { return nodes[static_cast<std::size_t>(id)]; }
    bool is_map() const { return reduction == Reduction::None; }
};

std::string_view to_string(Reduction r);

}  // namespace lossjit::ir
