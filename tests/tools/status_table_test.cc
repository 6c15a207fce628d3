// `msched status` as a table (tools/status_table.cc): every line within the
// width, columns left out in the documented order, long names shortened
// before any column goes, guests' hidden fields shown as "-", and a
// document of another shape rendered without throwing.
#include "status_table.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

json Job(uint64_t id, const std::string& name, const std::string& state) {
  return {{"id", id},
          {"name", name},
          {"uid", 1000},
          {"pid", 4242},
          {"state", state},
          {"on_gpu", state == "running"},
          {"class", "long"},
          {"priority", -3},
          {"declared_bytes", 8ull << 30},
          {"allocated_bytes", 6ull << 30},
          {"working_set_bytes", 3ull << 30},
          {"resident_bytes", 2ull << 30},
          {"budget_bytes", 4ull << 30},
          {"submitted_ns", 5},
          {"waited_ns", 125'000'000'000ull},
          {"finished_ns", 0},
          {"slices", 9},
          {"swaps_in", 7}};
}

json Status(std::vector<json> jobs) {
  return {{"coordinator",
           {{"pid", 77},
            {"socket", "/run/msched/gpu0.sock"},
            {"hbm_bytes", 16ull << 30},
            {"oversubscribe", 2.0},
            {"device_time_ns", 1},
            {"groups", 2},
            {"slice_end_ns", nullptr},
            {"switches", 12},
            {"link_gbps", 25.0}}},
          {"jobs", jobs}};
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Terminal columns: one per UTF-8 code point.
size_t Columns(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The header row: the line that starts with JOB.
std::string Header(const std::string& text) {
  for (const std::string& line : Lines(text)) {
    if (line.rfind("JOB", 0) == 0) return line;
  }
  return "";
}

bool Has(const std::string& header, const std::string& column) {
  std::istringstream in(header);
  for (std::string word; in >> word;) {
    if (word == column) return true;
  }
  return false;
}

const std::vector<std::string> kAll = {"JOB",       "NAME",    "UID",      "PID",    "STATE",  "ON_GPU", "CLASS", "PRIO",
                                       "DECLARED", "ALLOCATED", "WORKSET", "RESIDENT", "BUDGET", "WAITED", "SWAPS"};

TEST(StatusTableTest, WithoutALimitEveryColumnShowsInFull) {
  const std::string name = "a-rather-long-training-job-name-of-40-ch";
  const std::string out = msched::RenderStatus(Status({Job(1, name, "running"), Job(2, "b", "waiting")}), 0);
  for (const std::string& column : kAll) EXPECT_TRUE(Has(Header(out), column)) << column << "\n" << out;
  EXPECT_NE(out.find(name), std::string::npos) << out;
  EXPECT_NE(out.find("2m05s"), std::string::npos) << "waited 125 s\n" << out;
  EXPECT_NE(out.find("16.0 GiB HBM"), std::string::npos) << out;
  EXPECT_NE(out.find("2 jobs (1 running, 1 waiting)"), std::string::npos) << out;
}

TEST(StatusTableTest, EveryLineFitsEveryWidth) {
  const json s = Status({Job(1, "a-rather-long-training-job-name-of-40-ch", "running"), Job(22, "ß-名前", "paused")});
  // 24 columns hold JOB, a 6-column NAME and STATE; the summary wraps.
  for (size_t width = 24; width <= 220; ++width) {
    for (const std::string& line : Lines(msched::RenderStatus(s, width))) {
      EXPECT_LE(Columns(line), width) << "width " << width << ": '" << line << "'";
    }
  }
}

TEST(StatusTableTest, NarrowTablesLeaveOutColumnsInTheDocumentedOrder) {
  const json s = Status({Job(1, "train", "running")});
  const size_t full = Columns(Header(msched::RenderStatus(s, 0)));
  const std::vector<std::string> drop_order = {"SWAPS", "BUDGET", "PID",      "CLASS",     "DECLARED", "PRIO",
                                               "WAITED", "WORKSET", "UID", "RESIDENT", "ALLOCATED", "ON_GPU"};
  size_t previously_dropped = 0;
  for (size_t width = full; width >= 24; --width) {
    const std::string header = Header(msched::RenderStatus(s, width));
    size_t dropped = 0;
    while (dropped < drop_order.size() && !Has(header, drop_order[dropped])) ++dropped;
    for (size_t i = dropped; i < drop_order.size(); ++i) {
      EXPECT_TRUE(Has(header, drop_order[i])) << "width " << width << ": " << drop_order[i] << " left out before "
                                              << drop_order[dropped] << "\n" << header;
    }
    EXPECT_GE(dropped, previously_dropped) << "a narrower table shows a column a wider one left out";
    previously_dropped = dropped;
    for (const char* kept : {"JOB", "NAME", "STATE"}) EXPECT_TRUE(Has(header, kept)) << width << ": " << header;
  }
  EXPECT_EQ(previously_dropped, drop_order.size()) << "at 24 columns only JOB, NAME and STATE are left";
  EXPECT_TRUE(Has(Header(msched::RenderStatus(s, full)), "SWAPS")) << "the full width shows everything";
  EXPECT_FALSE(Has(Header(msched::RenderStatus(s, full - 1)), "SWAPS"));
}

TEST(StatusTableTest, LongNamesAreShortenedBeforeAnyColumnIsLeftOut) {
  const std::string name = "a-rather-long-training-job-name-of-40-ch";
  const json s = Status({Job(1, name, "running")});
  const size_t full = Columns(Header(msched::RenderStatus(s, 0)));
  const size_t shortened = full - (name.size() - 16);  // the name at 16 columns
  const std::string out = msched::RenderStatus(s, shortened);
  for (const std::string& column : kAll) EXPECT_TRUE(Has(Header(out), column)) << column << "\n" << out;
  EXPECT_NE(out.find(name.substr(0, 15) + "…"), std::string::npos) << out;
  EXPECT_EQ(out.find(name), std::string::npos) << out;
  // Room beyond that goes back to the name.
  EXPECT_NE(msched::RenderStatus(s, shortened + 4).find(name.substr(0, 19) + "…"), std::string::npos);
}

TEST(StatusTableTest, WhatAGuestMayNotSeeShowsAsADash) {
  json other = Job(3, "", "running");
  other["pid"] = 0;
  const std::vector<std::string> lines = Lines(msched::RenderStatus(Status({other}), 0));
  ASSERT_FALSE(lines.empty());
  std::istringstream row(lines.back());
  std::vector<std::string> cells;
  for (std::string cell; row >> cell;) cells.push_back(cell);
  ASSERT_GE(cells.size(), 5u) << lines.back();
  EXPECT_EQ(cells[0], "3");
  EXPECT_EQ(cells[1], "-") << "name";
  EXPECT_EQ(cells[2], "1000") << "uid";
  EXPECT_EQ(cells[3], "-") << "pid";
}

TEST(StatusTableTest, ADocumentOfAnotherShapeRendersWithDefaults) {
  json odd = Status({Job(1, "x", "running")});
  odd["jobs"][0]["allocated_bytes"] = "lots";
  odd["jobs"][0]["pid"] = nullptr;
  odd["jobs"].push_back(42);
  odd["coordinator"]["hbm_bytes"] = -1;
  std::string out;
  EXPECT_NO_THROW(out = msched::RenderStatus(odd, 100));
  EXPECT_NE(out.find("HBM not yet known"), std::string::npos) << out;
  EXPECT_NO_THROW(out = msched::RenderStatus(json::array({1, 2}), 80));
  EXPECT_NE(out.find("0 jobs"), std::string::npos) << out;
  EXPECT_EQ(Header(out), "") << "no jobs, no table";
}

TEST(StatusTableTest, WidthComesFromColumnsThenTheTerminal) {
  const char* saved = std::getenv("COLUMNS");
  const std::string restore = saved ? saved : "";
  const int file = ::open("/dev/null", O_WRONLY);
  ASSERT_GE(file, 0);
  ::setenv("COLUMNS", "77", 1);
  EXPECT_EQ(msched::OutputWidth(file), 77u);
  ::setenv("COLUMNS", "wide", 1);
  EXPECT_EQ(msched::OutputWidth(file), 0u) << "not a number: the terminal's width, and /dev/null has none";
  ::unsetenv("COLUMNS");
  EXPECT_EQ(msched::OutputWidth(file), 0u) << "a file gets every column";
  ::close(file);
  if (saved) ::setenv("COLUMNS", restore.c_str(), 1);
}

}  // namespace
