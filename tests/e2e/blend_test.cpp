// Blends (data "blend", plugins/data_blend.cpp) driven through `kiln`: every step's rows come
// from the sources in the proportions asked, within the binomial bound this test computes, every
// step logs what it took from each (all of the step's tokens), `kiln runs show` sets the realised
// mixture against the weights, a sweep varies a source's weight by name, and a source capped at
// one epoch is refused at the step the uncapped run's own log says it would run out.
#include <cmath>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;

using Blend = testing::TinyRun;

TEST_F(Blend, RowsFollowTheWeightsAndEveryStepLogsItsSources) {
  auto run = run_kiln("run " + blend_experiment() + " --name mix --set train.steps=60");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("a blend of 2 sources"), std::string::npos) << run.output;
  const auto rows =
      testing::query(db(),
                     "select m.source_tokens from metrics m join runs r on r.id = m.run_id where "
                     "r.name = 'mix' order by m.step");
  ASSERT_EQ(rows.size(), 60u);
  std::map<std::string, int64_t> total;
  for (const auto& row : rows) {
    const nlohmann::json step = nlohmann::json::parse(row[0]);
    int64_t sum = 0;
    for (const auto& [name, tokens] : step.items()) {
      total[name] += tokens.get<int64_t>();
      sum += tokens.get<int64_t>();
    }
    EXPECT_EQ(sum, 8 * 32);  // micro_batch 8 rows of seq_len 32: every token of the step
  }
  // 480 rows, each from big with probability 3/4: within 4.5 standard deviations.
  const double n = 480, p = 0.75;
  EXPECT_NEAR(static_cast<double>(total["big"]) / 32, n * p, 4.5 * std::sqrt(n * p * (1 - p)));
  EXPECT_EQ(total["big"] + total["small"], 480 * 32);

  auto show = run_kiln("runs show mix --db " + db());
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("data mixture"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("75.00%"), std::string::npos) << show.output;
  const std::string realised =
      fmt::format("{:.2f}%", 100.0 * static_cast<double>(total["big"]) / (480 * 32));
  EXPECT_NE(show.output.find(realised), std::string::npos) << realised << "\n" << show.output;
}

TEST_F(Blend, ASweepVariesASourcesWeightByName) {
  const std::string sweep = dir_ / "weights.toml";
  testing::write_text(sweep, fmt::format(R"(base = "{}"
name = "weights"
[grid]
data.sources.small.weight = [0.5, 2.0]
[set]
train.steps = 3
eval.every = 0
checkpoint.every = 0
)",
                                         blend_experiment()));
  auto result = run_kiln("sweep " + sweep);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto weights = testing::query(db(), "select count(*) from runs where sweep = 'weights'");
  EXPECT_EQ(weights[0][0], "2");

  // A random search draws it as any key: three trials, each member named by its draw.
  const std::string search = dir_ / "search.toml";
  testing::write_text(search, fmt::format(R"(base = "{}"
name = "drawn"
[search]
type = "random"
trials = 3
[space]
data.sources.small.weight = {{ uniform = [0.1, 0.9] }}
)",
                                          blend_experiment()));
  auto drawn = run_kiln("sweep " + search + " --dry-run");
  ASSERT_EQ(drawn.exit_code, 0) << drawn.output;
  size_t members = 0;
  for (size_t at = 0;
       (at = drawn.output.find("data.sources.small.weight=", at)) != std::string::npos; ++at)
    ++members;
  EXPECT_EQ(members, 3u) << drawn.output;
}

TEST_F(Blend, ASourceCappedAtOneEpochIsRefusedAtTheStepItWouldRunOut) {
  auto free = run_kiln("run " + blend_experiment() +
                       " --name free --set train.steps=120 --set eval.every=0");
  ASSERT_EQ(free.exit_code, 0) << free.output;
  // The val shard's rows: (tokens - 1) / 32 windows, its tokens read from its llm.c header.
  std::filesystem::path shard;
  for (const auto& f : std::filesystem::directory_iterator(dir_ / "data"))
    if (f.path().filename().string().rfind("val_", 0) == 0) shard = f.path();
  const int64_t tokens = (std::filesystem::file_size(shard) - 1024) / 2;
  const int64_t windows = (tokens - 1) / 32;
  int64_t taken = 0, out_at = 0;
  const auto rows = testing::query(
      db(),
      "select m.step, m.source_tokens from metrics m join runs r on r.id = m.run_id where "
      "r.name = 'free' order by m.step");
  for (const auto& row : rows) {
    taken += nlohmann::json::parse(row[1]).value("small", 0) / 32;
    if (taken > windows) {
      out_at = std::stoll(row[0]);
      break;
    }
  }
  ASSERT_GT(out_at, 0) << "120 steps never used up the small source's " << windows << " rows";
  auto capped = run_kiln("run " + blend_experiment() +
                         " --name capped --set train.steps=120 --set data.sources.small.epochs=1");
  EXPECT_EQ(capped.exit_code, 2) << capped.output;
  EXPECT_NE(capped.output.find(fmt::format("runs out at step {} of", out_at)), std::string::npos)
      << out_at << "\n"
      << capped.output;
}

}  // namespace
}  // namespace kiln
