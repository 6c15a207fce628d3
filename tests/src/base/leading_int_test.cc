// msched/leading_int.h: LeadingInt reads what std::stoi reads, and is empty
// where std::stoi throws.
#include "msched/leading_int.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <optional>
#include <stdexcept>
#include <string>

namespace msched {
namespace {

// std::stoi(text), or nullopt where it throws.
std::optional<int> Stoi(const std::string& text) {
  try {
    return std::stoi(text);
  } catch (const std::logic_error&) {  // invalid_argument, out_of_range
    return std::nullopt;
  }
}

TEST(LeadingIntTest, MatchesStoi) {
  for (const std::string text : {"0", "150", "-7", "+3", " 42", "\t8", "12abc", "7@8", "", "abc", "-", " ", "@8",
                                 "2147483647", "2147483648", "-2147483648", "-2147483649", "99999999999999999999"}) {
    SCOPED_TRACE(text);
    EXPECT_EQ(LeadingInt(text), Stoi(text));
  }
}

TEST(LeadingIntTest, LeavesErrnoAlone) {
  errno = EINTR;
  EXPECT_EQ(LeadingInt("99999999999999999999"), std::nullopt);
  EXPECT_EQ(errno, EINTR);
}

}  // namespace
}  // namespace msched
