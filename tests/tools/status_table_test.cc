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

// `run_state` as `msched status` shows it: "running" (on the GPU),
// "waiting", "swapped out", "paused".
json Job(uint64_t id, const std::string& name, const std::string& run_state) {
  const bool on_gpu = run_state == "running";
  return {{"id", id},
          {"name", name},
          {"uid", 1000},
          {"user", "alice"},
          {"pid", 4242},
          {"state", run_state == "paused" ? "paused" : "running"},
          {"run_state", run_state},
          {"wait_reason", on_gpu                  ? ""
                          : run_state == "paused" ? "paused"
                                                  : "turn"},
          {"on_gpu", on_gpu},
          {"class", "long"},
          {"priority", -3},
          {"declared_bytes", 8ull << 30},
          {"allocated_bytes", 6ull << 30},
          {"working_set_bytes", 3ull << 30},
          {"resident_bytes", 2ull << 30},
          {"budget_bytes", 4ull << 30},
          {"submitted_ns", 5},
          {"waited_ns", 3'000'000'000ull},
          {"wait_ns", on_gpu ? 0 : 125'000'000'000ull},
          {"finished_ns", 0},
          {"slices", 9},
          {"swaps_in", 7},
          {"idle_yields", 1}};
}

json Status(std::vector<json> jobs) {
  return {{"coordinator",
           {{"pid", 77},
            {"socket", "/run/msched/gpu0.sock"},
            {"hbm_bytes", 16ull << 30},
            {"oversubscribe", 2.0},
            {"idle_yield_ns", 50'000'000},
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

const std::vector<std::string> kAll = {"JOB",     "NAME",     "USER",   "PID",  "STATE",    "WHY",
                                       "WAITED",  "SLICES",   "CLASS",  "PRIO", "DECLARED", "ALLOCATED",
                                       "WORKSET", "RESIDENT", "BUDGET", "SWAPS"};

TEST(StatusTableTest, WithoutALimitEveryColumnShowsInFull) {
  const std::string name = "a-rather-long-training-job-name-of-40-ch";
  const std::string out = msched::RenderStatus(Status({Job(1, name, "running"), Job(2, "b", "waiting")}), 0);
  for (const std::string& column : kAll) EXPECT_TRUE(Has(Header(out), column)) << column << "\n" << out;
  EXPECT_NE(out.find(name), std::string::npos) << out;
  EXPECT_NE(out.find("2m05s"), std::string::npos) << "waiting for 125 s\n" << out;
  EXPECT_EQ(out.find("3.0 s"), std::string::npos) << "the wait before admission is not the present wait\n" << out;
  EXPECT_NE(out.find("16.0 GiB HBM"), std::string::npos) << out;
  EXPECT_NE(out.find("2 jobs (1 running, 1 waiting)"), std::string::npos) << out;
}

// Who each job belongs to, whether it runs, waits, is swapped out
// or paused, why it waits, since when, and how many slices it has run.
TEST(StatusTableTest, EachRowSaysWhoseJobItIsAndWhyItWaits) {
  json idle = Job(3, "loader", "swapped out");
  idle["wait_reason"] = "idle";
  const std::string out = msched::RenderStatus(
      Status({Job(1, "train", "running"), Job(2, "infer", "waiting"), idle, Job(4, "eval", "paused")}), 0);
  auto row = [&](const std::string& name) {
    for (const std::string& line : Lines(out)) {
      if (line.find(name) != std::string::npos) return line;
    }
    return std::string();
  };
  auto cells = [](const std::string& line) {
    std::vector<std::string> words;
    std::istringstream in(line);
    for (std::string w; in >> w;) words.push_back(w);
    return words;
  };
  // JOB NAME USER PID STATE WHY WAITED SLICES ...
  const std::vector<std::string> train = cells(row("train")), infer = cells(row("infer"));
  ASSERT_GE(train.size(), 8u) << out;
  ASSERT_GE(infer.size(), 8u) << out;
  EXPECT_EQ(std::vector<std::string>(train.begin(), train.begin() + 8),
            (std::vector<std::string>{"1", "train", "alice", "4242", "running", "-", "-", "9"}));
  EXPECT_EQ(std::vector<std::string>(infer.begin() + 4, infer.begin() + 8),
            (std::vector<std::string>{"waiting", "turn", "2m05s", "9"}));
  EXPECT_NE(row("loader").find("swapped out  idle"), std::string::npos) << out;
  EXPECT_NE(row("eval").find("paused       paused"), std::string::npos) << out;
  EXPECT_NE(out.find("4 jobs (1 paused, 1 running, 1 swapped out, 1 waiting)"), std::string::npos) << out;
}

// An older coordinator sends neither the run state, the reason, the present
// wait nor the user's name: the table shows what it has.
TEST(StatusTableTest, ADocumentFromAnOlderCoordinatorShowsItsOwnFields) {
  json old = Job(1, "train", "waiting");
  for (const char* key : {"run_state", "wait_reason", "wait_ns", "user", "idle_yields"}) old.erase(key);
  const std::string out = msched::RenderStatus(Status({old}), 0);
  const std::vector<std::string> lines = Lines(out);
  std::istringstream row(lines.back());
  std::vector<std::string> cells;
  for (std::string cell; row >> cell;) cells.push_back(cell);
  ASSERT_GE(cells.size(), 7u) << out;
  EXPECT_EQ(cells[2], "1000") << "the uid";
  EXPECT_EQ(cells[4], "running") << "its state";
  EXPECT_EQ(cells[5], "-");
  EXPECT_EQ(cells[6], "3.0") << "the wait before admission: " << out;
}

TEST(StatusTableTest, EveryLineFitsEveryWidth) {
  json unresponsive = Job(5, "x", "waiting");
  unresponsive["wait_reason"] = "unresponsive";
  const json s = Status({Job(1, "a-rather-long-training-job-name-of-40-ch", "running"), Job(22, "ß-名前", "paused"),
                         Job(333, "third", "swapped out"), unresponsive});
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
  const std::vector<std::string> drop_order = {"SHARED", "SWAPS",     "OVER",     "BUDGET",  "PID",
                                               "CLASS",  "PRIO",      "SLICES",   "WORKSET", "DECLARED",
                                               "USER",   "ALLOCATED", "RESIDENT", "WAITED",  "WHY"};
  size_t previously_dropped = 0;
  // 19 columns hold JOB, the 5-column name and "running".
  for (size_t width = full; width >= 19; --width) {
    const std::string header = Header(msched::RenderStatus(s, width));
    size_t dropped = 0;
    while (dropped < drop_order.size() && !Has(header, drop_order[dropped])) ++dropped;
    for (size_t i = dropped; i < drop_order.size(); ++i) {
      EXPECT_TRUE(Has(header, drop_order[i]))
          << "width " << width << ": " << drop_order[i] << " left out before " << drop_order[dropped] << "\n"
          << header;
    }
    EXPECT_GE(dropped, previously_dropped) << "a narrower table shows a column a wider one left out";
    previously_dropped = dropped;
    for (const char* kept : {"JOB", "NAME", "STATE"}) EXPECT_TRUE(Has(header, kept)) << width << ": " << header;
  }
  EXPECT_EQ(previously_dropped, drop_order.size()) << "at 19 columns only JOB, NAME and STATE are left";
  EXPECT_TRUE(Has(Header(msched::RenderStatus(s, full)), "SHARED")) << "the full width shows everything";
  EXPECT_FALSE(Has(Header(msched::RenderStatus(s, full - 1)), "SHARED"));
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
  EXPECT_EQ(cells[2], "alice") << "user";
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
