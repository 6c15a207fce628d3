// Fuzzes the simulator's expression parser and evaluator (sim/src/expr.cc):
// parse the input, and evaluate what parses against fixed arguments,
// dimensions and variables (checked arithmetic: UBSan sees any overflow).
#include <string>
#include <string_view>

#include "expr.h"

namespace {

class FixedContext : public msim::ExprContext {
 public:
  bool Arg(int param, int offset, int width, int64_t* out) const override {
    if (param < 0 || param > 7 || offset < 0 || offset > 64) return false;
    *out = (int64_t{param} << 20) + offset * 3 + width;
    return true;
  }
  bool Dim(int which, int64_t* out) const override {
    *out = which == 0 ? 4096 : which + 1;
    return true;
  }
  bool Var(std::string_view name, int64_t* out) const override {
    if (name == "N")
      *out = 1 << 20;
    else if (name == "BIG")
      *out = INT64_MAX;
    else if (name == "NEG")
      *out = INT64_MIN;
    else
      return false;
    return true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string error;
  msim::ExprPtr e = msim::Expr::Parse(std::string_view(reinterpret_cast<const char*>(data), size), &error);
  if (!e) return 0;
  int64_t v = 0;
  (void)e->Eval(FixedContext(), &v);
  (void)e->Variables();
  return 0;
}
