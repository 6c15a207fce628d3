// Integer expressions used by kernel declarations and workload files:
// numbers (with optional K/M/G/T binary suffixes: 64M = 64 MiB), + - * / %,
// parentheses, kernel arguments (p3 = parameter 3 as a zero-extended 64-bit
// word, p1@8 = the word at byte 8 of parameter 1, :u32 for 32-bit words),
// launch dimensions (grid.x .. block.z) and named variables.
// Parsed once, evaluated many times with checked 64-bit arithmetic.
// Expr is immutable after parsing: thread-safe. Used by sim/ only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace msim {

// Supplies the values an expression refers to. A lookup that fails makes
// the whole evaluation fail.
class ExprContext {
 public:
  virtual ~ExprContext() = default;
  virtual bool Arg(int param, int offset, int width, int64_t* out) const;
  virtual bool Dim(int which, int64_t* out) const;  // 0..2 grid x,y,z; 3..5 block x,y,z
  virtual bool Var(std::string_view name, int64_t* out) const;
};

class Expr {
 public:
  // nullptr with *error set when `text` does not parse.
  static std::shared_ptr<const Expr> Parse(std::string_view text, std::string* error);
  // False on a failed lookup, division by zero or overflow.
  bool Eval(const ExprContext& ctx, int64_t* out) const;
  const std::string& text() const { return text_; }
  // Variables the expression names (for workload validation).
  std::vector<std::string> Variables() const;

  struct Node;

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

using ExprPtr = std::shared_ptr<const Expr>;

}  // namespace msim
