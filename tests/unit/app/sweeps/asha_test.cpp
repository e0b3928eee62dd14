// ASHA's pure part (core/app/sweeps/asha.h): the rungs, and which member a free worker promotes,
// against ladders worked out by hand from Li et al.'s rule (the best floor(n / eta) of a rung's n
// members go on, the highest rung first), and a simulated asynchronous search whose cost and
// winner follow from successive halving's arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/app/sweeps/asha.h"
#include "core/app/sweeps/spec.h"
#include "core/store/history/rung_ladder.h"
#include "core/store/runs/lookup.h"
#include "test_util.h"

namespace kiln {
namespace {

SweepSpec asha_spec(int64_t min_steps, int64_t max_steps, int64_t eta, int64_t grace = 0) {
  SweepSpec spec;
  spec.search.type = SweepSearch::Type::kAsha;
  spec.search.min_steps = min_steps;
  spec.search.max_steps = max_steps;
  spec.search.reduction_factor = eta;
  spec.search.grace = grace;
  spec.search.where = "sweep.toml:3:1";
  return spec;
}

AshaMember at(std::vector<double> results, bool busy = false, bool failed = false) {
  return AshaMember{std::move(results), busy, failed};
}

TEST(Asha, RungsAreMinStepsTimesPowersOfEtaBelowTheLastLessThoseBelowGrace) {
  EXPECT_EQ(asha_rungs(asha_spec(25, 400, 3)), (std::vector<int64_t>{25, 75, 225, 400}));
  EXPECT_EQ(asha_rungs(asha_spec(1, 8, 2)), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(asha_rungs(asha_spec(25, 400, 3, 50)), (std::vector<int64_t>{75, 225, 400}));
  EXPECT_EQ(asha_rungs(asha_spec(10, 30, 3)), (std::vector<int64_t>{10, 30}));
  const std::string error = testing::user_error_of([] { asha_rungs(asha_spec(400, 400, 3)); });
  EXPECT_NE(error.find("sweep.toml:3:1: asha's min_steps = 400 must be at least 1 and below "
                       "max_steps = 400"),
            std::string::npos)
      << error;
}

TEST(Asha, PromotesTheBestOfTheTopThirdThatIsNotPromotedYet) {
  // Five members at rung 0: floor(5/3) = 1 goes on, the one with 1.0.
  std::vector<AshaMember> ladder = {at({5}), at({3}), at({4}), at({1}), at({2})};
  auto p = asha_promotion(ladder, 3, 3);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->member, 3u);
  EXPECT_EQ(p->rung, 1u);
  // Once it is on its way (busy), nobody else is in the top 1 of 5: start a new trial.
  ladder[3].busy = true;
  EXPECT_FALSE(asha_promotion(ladder, 3, 3));
  // A sixth member makes the top 2 of 6: the one with 2.0 goes on, even though it finished
  // before the sixth arrived (it waited paused).
  ladder.push_back(at({6}));
  p = asha_promotion(ladder, 3, 3);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->member, 4u);
}

TEST(Asha, TheHighestRungPromotesFirstAndFailedMembersNeverGoOn) {
  // Rung 0: nine members (top 3 go on); three of them reached rung 1 (top 1 goes on).
  std::vector<AshaMember> ladder = {at({1, 7}), at({2, 5}), at({3, 6}), at({4}), at({5}),
                                    at({6}),    at({7}),    at({8}),    at({9})};
  auto p = asha_promotion(ladder, 3, 3);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->member, 1u);  // 5 is the best at rung 1
  EXPECT_EQ(p->rung, 2u);
  ladder[1].failed = true;  // it failed on its way: never promoted, still counted
  EXPECT_FALSE(asha_promotion(ladder, 3, 3)) << "rung 1's top 1 is taken, rung 0's top 3 too";
  // The last rung is no rung to promote from: a member there is done.
  EXPECT_FALSE(asha_promotion({at({1, 1}), at({2, 2}), at({3, 3})}, 2, 3));
  const AshaPlace place = asha_place(ladder, 2, 1);
  EXPECT_EQ(place.place, 2u);
  EXPECT_EQ(place.of, 3u);
}

TEST(Asha, WithNoTrialLeftTheBestOfTheHighestRungGoesOnUntilOneMemberIsAtTheTop) {
  // Rung 1 holds one member (the top 0 of 1 go on); rung 0's top 1 of 4 is it.
  std::vector<AshaMember> ladder = {at({3, 2}), at({2}), at({1}, false, true), at({4})};
  EXPECT_FALSE(asha_promotion(ladder, 3, 3));
  auto p = asha_closing_promotion(ladder, 3);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->member, 0u);
  EXPECT_EQ(p->rung, 2u);
  ladder[0].busy = true;  // on its way: the next best of the highest rung with one that can go on
  p = asha_closing_promotion(ladder, 3);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->member, 1u) << "the failed member is passed over";
  ladder[0].busy = false;
  ladder[0].results.push_back(1);  // at the top: the search is over
  EXPECT_FALSE(asha_closing_promotion(ladder, 3));
}

// One worker runs 27 trials of 27 steps at eta = 3 (rungs 1, 3, 9, 27). Each trial's value at
// every rung is its own quality, so the rankings agree across rungs. Synchronous successive
// halving would spend 27 x 1 + 9 x 2 + 3 x 6 + 1 x 18 = 81 steps; the asynchronous version
// promotes earlier on thinner evidence, so it may spend somewhat more, but far below the 729 of
// training every trial fully, and the best trial reaches the top rung.
TEST(Asha, ASimulatedSearchSpendsAFractionOfTheFullStepsAndFinishesTheBestTrial) {
  const std::vector<int64_t> rungs = asha_rungs(asha_spec(1, 27, 3));
  ASSERT_EQ(rungs, (std::vector<int64_t>{1, 3, 9, 27}));
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> quality(0, 1);
  std::vector<double> truth;
  std::vector<AshaMember> ladder;
  int64_t steps = 0;
  for (int jobs = 0; jobs < 1000; ++jobs) {
    size_t member = ladder.size(), rung = 0;
    if (auto p = asha_promotion(ladder, rungs.size(), 3)) {
      member = p->member;
      rung = p->rung;
    } else if (ladder.size() < 27) {
      truth.push_back(quality(rng));
      ladder.emplace_back();
    } else {
      break;
    }
    steps += rungs[rung] - (rung > 0 ? rungs[rung - 1] : 0);
    ladder[member].results.push_back(truth[member]);
  }
  const size_t best =
      static_cast<size_t>(std::min_element(truth.begin(), truth.end()) - truth.begin());
  EXPECT_EQ(ladder[best].results.size(), rungs.size()) << "the best trial completes";
  EXPECT_GE(steps, 81);
  EXPECT_LE(steps, 729 / 3) << "at most a third of the full steps";
  std::cout << "ASHA spent " << steps << " of 729 steps (synchronous halving: 81)\n";
}

// rung_cooldown asks the base's schedule where its decay starts, at the end of each [space] draw
// that starts it soonest: wsd over 30 steps decays over its last round(f x 30) steps, so with f
// drawn up to 0.5 a member may decay from step 15, and the rung at 27 is refused; drawn up to 0.1,
// from step 27 at the earliest, which the rung may still branch at. A cosine has no stable phase.
TEST(Asha, RungCooldownRefusesARungAfterTheEarliestDecayTheSpaceCanDraw) {
  testing::TempDir dir;
  const std::string base = dir / "base.toml";
  testing::write_text(base, "[model]\ntype = \"gpt\"\n[train]\nsteps = 30\n");
  const auto spec = [&](const std::string& type, double highest) {
    SweepSpec s = asha_spec(3, 30, 3);
    s.base = base;
    s.fixed = {"schedule.type=\"" + type + "\""};
    if (type == "wsd") s.fixed.push_back("schedule.decay_fraction=0.05");
    s.search.metric = "val_loss";
    s.search.rung_cooldown = 0.2;
    s.search.rung_cooldown_where = "sweep.toml:7:17";
    SweepDistribution drawn;
    drawn.key = "schedule.decay_fraction";
    drawn.low = 0.05;
    drawn.high = highest;
    drawn.where = "sweep.toml:9:1";
    s.space = {drawn};
    return s;
  };
  EXPECT_EQ(asha_rungs(spec("wsd", 0.5)), (std::vector<int64_t>{3, 9, 27, 30}));
  EXPECT_EQ(testing::user_error_of([&] { check_rung_cooldown(spec("wsd", 0.5)); }),
            "sweep.toml:7:17: the rung at step 27 lies in the decay (the wsd schedule warms up for "
            "0 steps and decays from step as early as 15 ([space] at sweep.toml:9:1) of 30): a "
            "branch there cannot be cooled from the stable lr; lower schedule.decay_fraction");
  EXPECT_NO_THROW(check_rung_cooldown(spec("wsd", 0.1)));
  const std::string cosine =
      testing::user_error_of([&] { check_rung_cooldown(spec("cosine", 0.1)); });
  EXPECT_NE(cosine.find("rung_cooldown branches a wsd schedule's stable phase, and the base's "
                        "schedule is 'cosine'"),
            std::string::npos)
      << cosine;
}

// `kiln sweep --rerun-changed` trains a changed member again as NAME:v2, NAME:v3: the ladder and
// the member counts read the latest version of each member alone, never the one it replaced.
TEST(Asha, TheLadderReadsTheLatestVersionOfEachMember) {
  std::vector<RunRecord> runs;
  for (const char* name : {"s/a", "s/b", "s/c:v2", "s/a:v2", "s/c:v3", "s/d:v10", "s/d:v9"}) {
    RunRecord run;
    run.name = name;
    runs.push_back(run);
  }
  std::vector<std::string> kept;
  for (const RunRecord& run : latest_versions(runs))
    kept.push_back(run.name);
  EXPECT_EQ(kept, (std::vector<std::string>{"s/b", "s/a:v2", "s/c:v3", "s/d:v10"}));
}

}  // namespace
}  // namespace kiln
