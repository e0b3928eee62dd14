// The dashboard at the size it is built for: 100 runs of 10,000 steps. The table and every run's
// rows must come back in well under the time a person would call a stall, and the numbers must be
// the ones the test wrote.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dashboard_server.h"
#include "test_util.h"

namespace kiln::testing {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(DashboardScale, HundredRunsOfTenThousandStepsAnswerQuickly) {
  TempDir dir;
  const std::string db = dir / "kiln.db";
  fill_big_store(db, 100, 10000);
  ServeProcess server(db, dir / "serve.log");
  ASSERT_GT(server.port(), 0) << server.output();

  auto start = Clock::now();
  HttpReply table = server.get("/api/runs?sort=-final_loss");
  const double table_seconds = seconds_since(start);
  ASSERT_EQ(table.status, 200) << table.body;
  const auto runs = nlohmann::json::parse(table.body)["runs"];
  ASSERT_EQ(runs.size(), 100u);
  EXPECT_EQ(runs[0]["name"], "big100");  // the highest final loss: 2 + 1/10000 + 100/1000
  EXPECT_LT(table_seconds, 2.0);

  start = Clock::now();
  double slowest = 0;
  size_t bytes = 0;
  for (int id = 1; id <= 100; ++id) {
    const auto one = Clock::now();
    HttpReply reply = server.get(fmt::format("/api/metrics?run={}", id));
    slowest = std::max(slowest, seconds_since(one));
    ASSERT_EQ(reply.status, 200) << reply.body;
    bytes += reply.body.size();
    if (id != 37) continue;
    const auto body = nlohmann::json::parse(reply.body);
    ASSERT_EQ(body["rows"]["step"].size(), 10000u);
    for (int step : {1, 7, 10000}) {
      const double expected = 2.0 + 1.0 / step + 37 / 1000.0;
      EXPECT_NEAR(body["rows"]["loss"][step - 1].get<double>(), expected, expected * 1e-5);
    }
    EXPECT_EQ(body["evals"]["step"].size(), 100u);
  }
  const double all_seconds = seconds_since(start);
  RecordProperty("runs_table_s", fmt::format("{:.3f}", table_seconds));
  RecordProperty("metrics_100_runs_s", fmt::format("{:.3f}", all_seconds));
  std::printf("runs table %.3f s; 100 runs' rows %.3f s (slowest %.3f s), %.1f MB\n", table_seconds,
              all_seconds, slowest, bytes / 1e6);
  EXPECT_LT(slowest, 1.0);
  EXPECT_LT(all_seconds, 20.0);
}

}  // namespace
}  // namespace kiln::testing
