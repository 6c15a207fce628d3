#include "expr.h"

#include <cctype>

namespace msim {

bool ExprContext::Arg(int, int, int, int64_t*) const { return false; }
bool ExprContext::Dim(int, int64_t*) const { return false; }
bool ExprContext::Var(std::string_view, int64_t*) const { return false; }

struct Expr::Node {
  enum Kind { kNum, kArg, kDim, kVar, kNeg, kAdd, kSub, kMul, kDiv, kMod } kind = kNum;
  int64_t value = 0;
  int param = 0, offset = 0, width = 8;
  std::string name;
  std::shared_ptr<const Node> a, b;
};

namespace {

using NodePtr = std::shared_ptr<const Expr::Node>;

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  NodePtr ParseAll(std::string* error) {
    NodePtr n = ParseSum();
    Skip();
    if (n && pos_ != s_.size()) Fail("unexpected '" + std::string(1, s_[pos_]) + "'");
    if (!error_.empty()) {
      *error = error_ + " at offset " + std::to_string(pos_) + " in '" + std::string(s_) + "'";
      return nullptr;
    }
    return n;
  }

 private:
  void Skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    Skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  NodePtr Fail(std::string msg) {
    if (error_.empty()) error_ = std::move(msg);
    return nullptr;
  }
  static NodePtr Bin(Expr::Node::Kind k, NodePtr a, NodePtr b) {
    auto n = std::make_shared<Expr::Node>();
    n->kind = k;
    n->a = std::move(a);
    n->b = std::move(b);
    return n;
  }
  NodePtr ParseSum() {
    NodePtr n = ParseProduct();
    while (n) {
      if (Eat('+'))
        n = Bin(Expr::Node::kAdd, n, ParseProduct());
      else if (Eat('-'))
        n = Bin(Expr::Node::kSub, n, ParseProduct());
      else
        break;
      if (!n->b) return nullptr;
    }
    return n;
  }
  NodePtr ParseProduct() {
    NodePtr n = ParseUnary();
    while (n) {
      if (Eat('*'))
        n = Bin(Expr::Node::kMul, n, ParseUnary());
      else if (Eat('/'))
        n = Bin(Expr::Node::kDiv, n, ParseUnary());
      else if (Eat('%'))
        n = Bin(Expr::Node::kMod, n, ParseUnary());
      else
        break;
      if (!n->b) return nullptr;
    }
    return n;
  }
  NodePtr ParseUnary() {
    if (Eat('-')) {
      NodePtr inner = ParseUnary();
      return inner ? Bin(Expr::Node::kNeg, inner, nullptr) : nullptr;
    }
    if (Eat('(')) {
      NodePtr inner = ParseSum();
      if (inner && !Eat(')')) return Fail("missing ')'");
      return inner;
    }
    Skip();
    if (pos_ >= s_.size()) return Fail("expression ends early");
    if (std::isdigit(static_cast<unsigned char>(s_[pos_]))) return ParseNumber();
    if (std::isalpha(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_') return ParseName();
    return Fail("unexpected '" + std::string(1, s_[pos_]) + "'");
  }
  bool Digits(int64_t* out) {
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[pos_] - '0', &v)) {
        Fail("number too large");
        return false;
      }
      ++pos_;
    }
    *out = v;
    return pos_ > start;
  }
  NodePtr ParseNumber() {
    auto n = std::make_shared<Expr::Node>();
    if (!Digits(&n->value)) return nullptr;
    static const char kSuffixes[] = "KMGT";
    for (int i = 0; i < 4 && pos_ < s_.size(); ++i) {
      if (s_[pos_] != kSuffixes[i]) continue;
      ++pos_;
      if (s_.substr(pos_, 2) == "iB") pos_ += 2;
      for (int k = 0; k <= i; ++k) {
        if (__builtin_mul_overflow(n->value, 1024, &n->value)) return Fail("number too large");
      }
      break;
    }
    return n;
  }
  NodePtr ParseName() {
    const size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' || s_[pos_] == '.')) {
      ++pos_;
    }
    const std::string name(s_.substr(start, pos_ - start));
    static const char* kDims[] = {"grid.x", "grid.y", "grid.z", "block.x", "block.y", "block.z"};
    for (int i = 0; i < 6; ++i) {
      if (name == kDims[i]) {
        auto n = std::make_shared<Expr::Node>();
        n->kind = Expr::Node::kDim;
        n->value = i;
        return n;
      }
    }
    auto n = std::make_shared<Expr::Node>();
    if (name.size() > 1 && name[0] == 'p' && name.find_first_not_of("0123456789", 1) == std::string::npos) {
      n->kind = Expr::Node::kArg;
      // At most four digits, so that stoi cannot throw out_of_range.
      if (name.size() > 5 || (n->param = std::stoi(name.substr(1))) > 1023) return Fail("parameter index too large");
      if (pos_ < s_.size() && s_[pos_] == '@') {
        ++pos_;
        int64_t off = 0;
        if (!Digits(&off) || off > 32767) return Fail("bad byte offset after '@'");
        n->offset = static_cast<int>(off);
      }
      if (s_.substr(pos_, 4) == ":u32") {
        n->width = 4;
        pos_ += 4;
      } else if (s_.substr(pos_, 4) == ":u64") {
        pos_ += 4;
      }
      return n;
    }
    if (name.find('.') != std::string::npos) return Fail("unknown name '" + name + "'");
    n->kind = Expr::Node::kVar;
    n->name = name;
    return n;
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::string error_;
};

bool EvalNode(const Expr::Node& n, const ExprContext& ctx, int64_t* out) {
  int64_t a = 0, b = 0;
  switch (n.kind) {
    case Expr::Node::kNum: *out = n.value; return true;
    case Expr::Node::kArg: return ctx.Arg(n.param, n.offset, n.width, out);
    case Expr::Node::kDim: return ctx.Dim(static_cast<int>(n.value), out);
    case Expr::Node::kVar: return ctx.Var(n.name, out);
    case Expr::Node::kNeg: return EvalNode(*n.a, ctx, &a) && !__builtin_sub_overflow(int64_t{0}, a, out);
    default: break;
  }
  if (!EvalNode(*n.a, ctx, &a) || !EvalNode(*n.b, ctx, &b)) return false;
  switch (n.kind) {
    case Expr::Node::kAdd: return !__builtin_add_overflow(a, b, out);
    case Expr::Node::kSub: return !__builtin_sub_overflow(a, b, out);
    case Expr::Node::kMul: return !__builtin_mul_overflow(a, b, out);
    case Expr::Node::kDiv:
      if (b == 0 || (a == INT64_MIN && b == -1)) return false;
      *out = a / b;
      return true;
    case Expr::Node::kMod:
      if (b == 0 || (a == INT64_MIN && b == -1)) return false;
      *out = a % b;
      return true;
    default: return false;
  }
}

void CollectVars(const Expr::Node& n, std::vector<std::string>* out) {
  if (n.kind == Expr::Node::kVar) out->push_back(n.name);
  if (n.a) CollectVars(*n.a, out);
  if (n.b) CollectVars(*n.b, out);
}

}  // namespace

ExprPtr Expr::Parse(std::string_view text, std::string* error) {
  // Parsing, evaluation and destruction recurse once per nesting level or
  // operator: a bounded text bounds the stack they take.
  constexpr size_t kMaxLength = 1024;
  if (text.size() > kMaxLength) {
    if (error) *error = "expression longer than " + std::to_string(kMaxLength) + " characters";
    return nullptr;
  }
  Parser p(text);
  NodePtr root = p.ParseAll(error);
  if (!root) return nullptr;
  auto e = std::make_shared<Expr>();
  e->text_ = std::string(text);
  e->root_ = std::move(root);
  return e;
}

bool Expr::Eval(const ExprContext& ctx, int64_t* out) const { return root_ && EvalNode(*root_, ctx, out); }

std::vector<std::string> Expr::Variables() const {
  std::vector<std::string> out;
  if (root_) CollectVars(*root_, &out);
  return out;
}

}  // namespace msim
