// Every number in a shipped device profile (templates/devices/*.json) names
// its source in the profile's "sources": a paper's table, a datasheet, a
// driver default, or an assumption saying how it will be measured.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

TEST(SimProfileTest, EveryConstantOfEveryShippedProfileHasASource) {
  int profiles = 0;
  for (const auto& entry : std::filesystem::directory_iterator(DEVICES_DIR)) {
    if (entry.path().extension() != ".json") continue;
    ++profiles;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
    ASSERT_TRUE(doc.is_object()) << entry.path();
    ASSERT_TRUE(doc.contains("sources") && doc["sources"].is_object()) << entry.path() << ": no sources";
    const nlohmann::json& sources = doc["sources"];
    const auto each_has_a_source = [&](const nlohmann::json& numbers, const nlohmann::json& said) {
      for (const auto& [key, value] : numbers.items()) {
        if (!value.is_number() || key == "version") continue;
        ASSERT_TRUE(said.contains(key)) << entry.path() << ": '" << key << "' has no source";
        EXPECT_TRUE(said[key].is_string() && said[key].get<std::string>().size() > 10)
            << entry.path() << ": the source of '" << key << "' says nothing";
      }
    };
    each_has_a_source(doc, sources);
    if (doc.contains("link")) {
      ASSERT_TRUE(sources.contains("link") && sources["link"].is_object()) << entry.path() << ": the link's rates";
      each_has_a_source(doc["link"], sources["link"]);
    }
    for (const auto& [key, value] : sources.items()) {
      EXPECT_TRUE(doc.contains(key)) << entry.path() << ": a source for '" << key << "', which the profile lacks";
    }
  }
  EXPECT_GE(profiles, 2);
}

}  // namespace
