// File: msched/json_checked.h
// Non-throwing forms of the nlohmann::json accessors that throw on a missing
// key or a wrong type: at(key), value(key, default) for a string, a bool or
// a number, and get<std::string>() / get<bool>() / get<number>(); and
// JsonU64, a counter read through nested objects. Each returns a Result
// whose error message is, word for word, the what() of the exception the
// accessor would have thrown (nlohmann/json 3.10-3.11, JSON_DIAGNOSTICS
// off), e.g. "[json.exception.out_of_range.403] key 'steps' not found", so
// a parser that moves off exceptions reports what it reported before.
// Stateless templates (nlohmann::json and ordered_json alike); thread-safe.
//
// Header-only, like msched/bounded_input.h: the simulator's msim-run, which
// links nothing of msched, and its driver's module parser use it as well as
// the core.
//
// Example:
//   Result<const json*> steps = JsonAt(doc, "steps");
//   if (!steps.ok()) return steps.status();
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "msched/status.h"

namespace msched {
namespace json_checked_internal {

// nlohmann's type_error `id`: "<what><the type of j>".
template <typename Json>
Status TypeError(int id, const char* what, const Json& j) {
  return Status::InvalidArgument("[json.exception.type_error." + std::to_string(id) + "] " + what + j.type_name());
}

}  // namespace json_checked_internal

// j.at(key): the member `key` of object `j`.
template <typename Json>
Result<const Json*> JsonAt(const Json& j, const std::string& key) {
  if (!j.is_object()) return json_checked_internal::TypeError(304, "cannot use at() with ", j);
  auto it = j.find(key);
  if (it == j.end()) return Status::InvalidArgument("[json.exception.out_of_range.403] key '" + key + "' not found");
  return &*it;
}

// j.get<std::string>().
template <typename Json>
Result<std::string> JsonGetString(const Json& j) {
  if (!j.is_string()) return json_checked_internal::TypeError(302, "type must be string, but is ", j);
  return j.template get<std::string>();
}

// j.get<bool>().
template <typename Json>
Result<bool> JsonGetBool(const Json& j) {
  if (!j.is_boolean()) return json_checked_internal::TypeError(302, "type must be boolean, but is ", j);
  return j.template get<bool>();
}

// j.get<T>() for an arithmetic T (int, int64_t, uint64_t, double...): a
// number, converted as nlohmann converts it. Like nlohmann, a boolean is
// taken too (as 0 or 1) for any T but the json's own three number types.
template <typename T, typename Json>
Result<T> JsonGetNumber(const Json& j) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, "a bool is JsonGetBool's");
  constexpr bool kTakesBool = !std::is_same_v<T, typename Json::number_integer_t> &&
                              !std::is_same_v<T, typename Json::number_unsigned_t> &&
                              !std::is_same_v<T, typename Json::number_float_t>;
  if (!j.is_number() && !(kTakesBool && j.is_boolean())) {
    return json_checked_internal::TypeError(302, "type must be number, but is ", j);
  }
  return j.template get<T>();
}

// j.value(key, fallback) for a string: the member if present (it must be a
// string), else `fallback`. `j` must be an object.
template <typename Json>
Result<std::string> JsonStringOr(const Json& j, const std::string& key, std::string fallback) {
  if (!j.is_object()) return json_checked_internal::TypeError(306, "cannot use value() with ", j);
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  return JsonGetString(*it);
}

// j.value(key, fallback) for a bool.
template <typename Json>
Result<bool> JsonBoolOr(const Json& j, const std::string& key, bool fallback) {
  if (!j.is_object()) return json_checked_internal::TypeError(306, "cannot use value() with ", j);
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  return JsonGetBool(*it);
}

// j.value(key, fallback) for an arithmetic T, the type of `fallback`.
template <typename T, typename Json>
Result<T> JsonNumberOr(const Json& j, const std::string& key, T fallback) {
  if (!j.is_object()) return json_checked_internal::TypeError(306, "cannot use value() with ", j);
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  return JsonGetNumber<T>(*it);
}

// The unsigned number at `path` through nested objects (a run's statistics:
// {"bytes", "h2d", "fault"}), or 0 when a key is missing or the value is no
// number: for reading counters that a run may or may not have written.
template <typename Json>
uint64_t JsonU64(const Json& j, std::initializer_list<const char*> path) {
  const Json* node = &j;
  for (const char* key : path) {
    if (!node->is_object() || !node->contains(key)) return 0;
    node = &(*node)[key];
  }
  return node->is_number() ? node->template get<uint64_t>() : 0;
}

}  // namespace msched
