// The parsed form of a chat template (expressions and statements) and the
// values it computes with; shared by the parser and the evaluator.
#ifndef WEFT_RUNTIME_CHAT_TEMPLATETREE_H_
#define WEFT_RUNTIME_CHAT_TEMPLATETREE_H_

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace weft::chat::detail {

using Json = nlohmann::ordered_json;

// A value: JSON, or Jinja's "undefined" (a missing variable, key or
// attribute), or a namespace object (mutable through `set ns.x = ...`).
struct Value {
  Json j;
  bool undefined = false;
  bool isNamespace = false;
  static Value undef() {
    Value v;
    v.undefined = true;
    return v;
  }
  Value() = default;
  Value(Json x) : j(std::move(x)) {}
};

struct RenderError {
  std::string message;
};

struct Expr {
  enum Kind {
    Literal, Name, Attr, Index, Slice, Call, Filter, Test, Not, Neg, Binary, And, Or,
    Ternary, List, Dict
  } kind;
  Json literal;
  std::string name;      // Name, Attr, Filter, Test; Binary operator
  bool negated = false;  // Test: "is not"
  std::vector<std::shared_ptr<Expr>> args;  // operands, call args, list items
  std::vector<std::pair<std::string, std::shared_ptr<Expr>>> kwargs;
  int line = 0;
  int height = 1; // 1 + the tallest operand's; the parser keeps it <= kMaxExprHeight
};
using ExprP = std::shared_ptr<Expr>;

// How deep an expression may nest, counted both ways: the parser's own
// recursion (parentheses, brackets, `not not ...`, `- - ...`) and the height
// of the tree it builds (`a + b + ...`, `x.a.b...`, `x|f|g...` grow left
// without recursing). Both bounds keep the parser, the evaluator and the
// tree's destructor far from the end of the stack, whatever the input.
inline constexpr int kMaxExprNesting = 64;
inline constexpr int kMaxExprHeight = 64;

struct Node {
  enum Kind { Block, Text, Output, If, For, Set, Break, Continue } kind = Block;
  std::string text;                       // Text
  ExprP expr;                             // Output, Set value, For iterable
  std::vector<std::string> targets;       // For loop names; Set: name or name.attr
  ExprP filter;                           // For ... if filter
  std::vector<std::pair<ExprP, std::shared_ptr<Node>>> branches; // If (null cond: else)
  std::shared_ptr<Node> body, orElse;     // For
  std::vector<std::shared_ptr<Node>> children; // Block
  int line = 0;
};
using NodeP = std::shared_ptr<Node>;

} // namespace weft::chat::detail

#endif // WEFT_RUNTIME_CHAT_TEMPLATETREE_H_
