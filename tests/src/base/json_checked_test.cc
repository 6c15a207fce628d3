// msched/json_checked.h: each accessor returns what nlohmann::json's own
// accessor returns, and on failure, word for word, the message of the
// exception that accessor throws (so parsers moved off exceptions report
// what they reported before), for json and ordered_json alike.
#include "msched/json_checked.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace msched {
namespace {

// The what() of the exception `f` throws; "" when it throws none.
std::string Thrown(const std::function<void()>& f) {
  try {
    f();
  } catch (const nlohmann::json::exception& e) {
    return e.what();
  }
  return "";
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
          Json::object({{"k", "v"}, {"b", false}, {"n", 3}})};
}

template <typename Json>
void CheckAgainstNlohmann() {
  for (const Json& j : Values<Json>()) {
    SCOPED_TRACE(j.dump());
    for (const std::string key : {"k", "b", "n", "missing"}) {
      SCOPED_TRACE(key);
      Result<const Json*> at = JsonAt(j, key);
      const std::string at_error = Thrown([&] { (void)j.at(key); });
      if (at_error.empty()) {
        ASSERT_TRUE(at.ok()) << at.status().message();
        EXPECT_EQ(*at, &j.at(key));
      } else {
        ASSERT_FALSE(at.ok());
        EXPECT_EQ(at.status().message(), at_error);
      }

      Result<std::string> s = JsonStringOr(j, key, "fallback");
      const std::string s_error = Thrown([&] { (void)j.value(key, std::string("fallback")); });
      if (s_error.empty()) {
        ASSERT_TRUE(s.ok()) << s.status().message();
        EXPECT_EQ(*s, j.value(key, std::string("fallback")));
      } else {
        ASSERT_FALSE(s.ok());
        EXPECT_EQ(s.status().message(), s_error);
      }

      Result<bool> b = JsonBoolOr(j, key, true);
      const std::string b_error = Thrown([&] { (void)j.value(key, true); });
      if (b_error.empty()) {
        ASSERT_TRUE(b.ok()) << b.status().message();
        EXPECT_EQ(*b, j.value(key, true));
      } else {
        ASSERT_FALSE(b.ok());
        EXPECT_EQ(b.status().message(), b_error);
      }
    }

    Result<std::string> s = JsonGetString(j);
    const std::string s_error = Thrown([&] { (void)j.template get<std::string>(); });
    if (s_error.empty()) {
      ASSERT_TRUE(s.ok());
      EXPECT_EQ(*s, j.template get<std::string>());
    } else {
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.status().message(), s_error);
    }

    Result<bool> b = JsonGetBool(j);
    const std::string b_error = Thrown([&] { (void)j.template get<bool>(); });
    if (b_error.empty()) {
      ASSERT_TRUE(b.ok());
      EXPECT_EQ(*b, j.template get<bool>());
    } else {
      ASSERT_FALSE(b.ok());
      EXPECT_EQ(b.status().message(), b_error);
    }
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
}

}  // namespace
}  // namespace msched
