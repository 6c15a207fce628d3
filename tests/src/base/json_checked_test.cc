// msched/json_checked.h: each accessor returns what nlohmann::json's own
// accessor returns, and on failure, word for word, the message of the
// exception that accessor throws (so parsers moved off exceptions report
// what they reported before), for json and ordered_json alike.
#include "msched/json_checked.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace msched {
namespace {

// That `r` holds what `f`, the nlohmann accessor `r` stands for, returns;
// or, where `f` throws, that `r` fails with the exception's what().
template <typename T, typename F>
void ExpectSame(const Result<T>& r, F f) {
  try {
    const T expected = f();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(*r, expected);
  } catch (const nlohmann::json::exception& e) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message(), e.what());
  }
}

template <typename Json>
std::vector<Json> Values() {
  return {Json(),
          Json(true),
          Json(7),
          Json(-7),
          Json(1.5),
          Json("text"),
          Json::array({1, "a"}),
          Json::object({{"k", "v"}, {"b", false}, {"n", 3}, {"f", 1.5}})};
}

template <typename Json>
void CheckAgainstNlohmann() {
  for (const Json& j : Values<Json>()) {
    SCOPED_TRACE(j.dump());
    for (const std::string key : {"k", "b", "n", "f", "missing"}) {
      SCOPED_TRACE(key);
      ExpectSame(JsonAt(j, key), [&] { return &j.at(key); });
      ExpectSame(JsonStringOr(j, key, "fallback"), [&] { return j.value(key, std::string("fallback")); });
      ExpectSame(JsonBoolOr(j, key, true), [&] { return j.value(key, true); });
      ExpectSame(JsonNumberOr(j, key, 5), [&] { return j.value(key, 5); });
      ExpectSame(JsonNumberOr(j, key, int64_t{-5}), [&] { return j.value(key, int64_t{-5}); });
      ExpectSame(JsonNumberOr(j, key, uint64_t{5}), [&] { return j.value(key, uint64_t{5}); });
      ExpectSame(JsonNumberOr(j, key, 2.5), [&] { return j.value(key, 2.5); });
    }
    ExpectSame(JsonGetString(j), [&] { return j.template get<std::string>(); });
    ExpectSame(JsonGetBool(j), [&] { return j.template get<bool>(); });
    ExpectSame(JsonGetNumber<int>(j), [&] { return j.template get<int>(); });
    ExpectSame(JsonGetNumber<int64_t>(j), [&] { return j.template get<int64_t>(); });
    ExpectSame(JsonGetNumber<uint64_t>(j), [&] { return j.template get<uint64_t>(); });
    ExpectSame(JsonGetNumber<double>(j), [&] { return j.template get<double>(); });
  }
}

TEST(JsonCheckedTest, MatchesNlohmannJson) { CheckAgainstNlohmann<nlohmann::json>(); }

TEST(JsonCheckedTest, MatchesNlohmannOrderedJson) { CheckAgainstNlohmann<nlohmann::ordered_json>(); }

TEST(JsonCheckedTest, NamesTheMissingKeyAndTheWrongType) {
  const nlohmann::json doc = {{"steps", 3}};
  EXPECT_EQ(JsonAt(doc, "count").status().message(), "[json.exception.out_of_range.403] key 'count' not found");
  EXPECT_EQ(JsonGetString(doc["steps"]).status().message(),
            "[json.exception.type_error.302] type must be string, but is number");
  EXPECT_EQ(JsonAt(doc["steps"], "x").status().message(),
            "[json.exception.type_error.304] cannot use at() with number");
  EXPECT_EQ(*JsonNumberOr(doc, "steps", 0.0), 3.0);
  EXPECT_EQ(JsonGetNumber<double>(nlohmann::json("3")).status().message(),
            "[json.exception.type_error.302] type must be number, but is string");
  // As nlohmann does: a boolean is 0 or 1 for an int, but no double.
  EXPECT_EQ(*JsonGetNumber<int>(nlohmann::json(true)), 1);
  EXPECT_FALSE(JsonGetNumber<double>(nlohmann::json(true)).ok());
}

}  // namespace
}  // namespace msched
