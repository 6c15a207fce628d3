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
    for (const auto& [key, value] : doc.items()) {
      if (!value.is_number() || key == "version") continue;
      ASSERT_TRUE(sources.contains(key)) << entry.path() << ": '" << key << "' has no source";
      EXPECT_TRUE(sources[key].is_string() && sources[key].get<std::string>().size() > 10)
          << entry.path() << ": the source of '" << key << "' says nothing";
    }
    for (const auto& [key, value] : sources.items()) {
      EXPECT_TRUE(doc.contains(key)) << entry.path() << ": a source for '" << key << "', which the profile lacks";
    }
  }
  EXPECT_GE(profiles, 2);
}

}  // namespace
