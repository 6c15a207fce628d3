// An expression as module and workload files give one: a JSON string of
// expression text, or a JSON integer. Header-only, a template over
// nlohmann::json and ordered_json alike, so that the driver's module parser
// (kernel_decl.cc) and msim-run's workload parser (sim/tools/
// workload_parse.cc) read expression fields by the same rule. Stateless;
// thread-safe. Used by sim/ only.
#pragma once

#include <cstdint>
#include <string>

#include "expr.h"
#include "msched/status.h"

namespace msim {

// The expression `j` holds. InvalidArgument, prefixed by `where` (the field's
// name in errors), when `j` is neither a string nor an integer, or when its
// text does not parse.
template <typename Json>
msched::Result<ExprPtr> ExprFromJson(const Json& j, const std::string& where) {
  std::string text;
  if (j.is_string())
    text = j.template get<std::string>();
  else if (j.is_number_integer())
    text = std::to_string(j.template get<int64_t>());
  else
    return msched::Status::InvalidArgument(where + ": must be an expression string or integer");
  std::string err;
  ExprPtr e = Expr::Parse(text, &err);
  if (!e) return msched::Status::InvalidArgument(where + ": " + err);
  return e;
}

}  // namespace msim
