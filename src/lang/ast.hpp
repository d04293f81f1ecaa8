// The parser's output: a syntax tree that still speaks the user's words (names, operator spellings)
// and remembers where each node came from, so later stages can point at the user's column.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace lossjit::ast {

struct Pos {
    int line = 1;
    int column = 1;
};

// Index: x[y], args {x, y}. Tuple: (a, b, ...), two or more; only a reduction's dimensions.
enum class ExprKind { Number, Name, Call, Unary, Binary, Conditional, Index, Tuple };

struct Expr {
    ExprKind kind;
    Pos pos;              // the operator, the name, or the first character of the literal
    std::string text;     // operator spelling, name, function name, or the literal as written
    double number = 0.0;  // value of a Number
    std::vector<std::unique_ptr<Expr>> args;  // operands in source order
};

using ExprPtr = std::unique_ptr<Expr>;

// `d = p - t;` binds a name; `param beta = 1;` declares a scalar parameter with its default.
struct Statement {
    enum class Kind { Binding, Param } kind;
    std::string name;
    Pos pos;        // position of the name
    ExprPtr value;  // Binding: the bound expression; Param: the default (a literal, maybe negated)
};

// A name in a program's list of results (`loss, z, acc`).
struct ResultName {
    std::string name;
    Pos pos;
};

struct Program {
    std::string source_name;
    std::string source;
    std::vector<Statement> statements;
    ExprPtr body;                     // with a list of results: the first, as a Name
    std::vector<ResultName> results;  // empty, or two or more binding names
};

}  // namespace lossjit::ast
