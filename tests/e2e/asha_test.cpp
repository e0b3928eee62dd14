// Asynchronous successive halving (core/app/sweeps/asha.h) through the real binary: members
// pause at the rungs and are promoted by resuming them, so a member that went all the way has
// the curve of the same config run straight, bit for bit; and a sweep killed with its member, and
// run again, ends with the ladder an uninterrupted sweep of the same file ends with.
#include <csignal>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tiny_run.h"

namespace kiln {
namespace {

using testing::query;
using testing::run_kiln;
using testing::scalar;
using Asha = testing::TinyRun;

// A sweep file of `trials` learning rates over the tiny experiment (27 steps: rungs 3, 9, 27).
std::string asha_file(const std::string& dir, const std::string& base, const std::string& name,
                      int trials, const std::string& extra = "") {
  const std::string path = dir + name + ".toml";
  testing::write_text(path, fmt::format(R"(base = "{}"
name = "{}"
[set]
train.steps = 27
[search]
type = "asha"
trials = {}
seed = 3
metric = "val_loss"
min_steps = 3
{}
[space]
optimizer.lr = {{ log_uniform = [1e-4, 3e-1] }}
)",
                                        base, name, trials, extra));
  return path;
}

// Each run of the sweep, by its name after "SWEEP/": its steps, status and its value of
// val_loss at each step evaluated, exactly as stored.
std::map<std::string, std::string> ladder_of(const std::string& db, const std::string& sweep) {
  std::map<std::string, std::string> out;
  for (const auto& row :
       query(db,
             "select r.name, r.steps_done, r.status, group_concat(e.step || '=' || "
             "printf('%.17g', e.loss), ' ') from (select runs.*, (select max(step) from metrics "
             "m where m.run_id = runs.id) as steps_done from runs where sweep = '" +
                 sweep +
                 "') r left join evals e on e.run_id = r.id and e.split = 'val' "
                 "group by r.id order by r.name")) {
    out[row[0].substr(sweep.size() + 1)] = row[1] + " " + row[2] + " " + row[3];
  }
  return out;
}

// The losses of every step of a run, exactly as stored.
std::string curve_of(const std::string& db, const std::string& run) {
  return scalar(db,
                "select group_concat(printf('%.17g', loss), ' ') from (select m.loss from "
                "metrics m join runs r on r.id = m.run_id where r.name = '" +
                    run + "' order by m.step)");
}

TEST_F(Asha, PromotedMembersContinueBitForBitAsAStraightRunAndTheRestStopAtARung) {
  const std::string file = asha_file(dir_ / "", experiment(), "a", 6);
  auto dry = run_kiln("sweep " + file + " --dry-run");
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("asha: rungs at steps 3, 9, 27; the best 1/3 of each rung go on"),
            std::string::npos)
      << dry.output;
  auto ran = run_kiln("sweep " + file + " --jobs 2");
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_NE(ran.output.find("rung 1 of 3: step 3, 6 member(s), the best 2 go on"),
            std::string::npos)
      << ran.output;
  const auto rows = query(db(),
                          "select name, status, (select max(step) from metrics m where m.run_id = "
                          "runs.id) from runs where sweep = 'a' order by name");
  ASSERT_EQ(rows.size(), 6u) << ran.output;
  int completed = 0, at_first_rung = 0;
  for (const auto& row : rows) {
    const std::string& steps = row[2];
    ASSERT_TRUE(steps == "3" || steps == "9" || steps == "27") << row[0] << " " << steps;
    EXPECT_EQ(row[1], steps == "27" ? "completed" : "interrupted") << row[0];
    at_first_rung += steps == "3";
    if (steps != "27") continue;
    ++completed;
    // The member paused at steps 3 and 9 and was resumed twice: the same config run straight
    // has the same loss at every step and the same val_loss wherever both evaluated.
    const std::string lr = row[0].substr(row[0].find("optimizer.lr=") + 13);
    const std::string straight = fmt::format("straight{}", completed);
    auto plain = run_kiln(fmt::format("run {} --name {} --set train.steps=27 --set optimizer.lr={}",
                                      experiment(), straight, lr));
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    EXPECT_EQ(curve_of(db(), row[0]), curve_of(db(), straight)) << row[0];
    for (const char* step : {"10", "20", "27"}) {
      const std::string sql =
          "select printf('%.17g', e.loss) from evals e join runs r on r.id = "
          "e.run_id where e.split = 'val' and e.step = " +
          std::string(step) + " and r.name = '";
      EXPECT_EQ(scalar(db(), sql + row[0] + "'"), scalar(db(), sql + straight + "'"))
          << row[0] << " step " << step;
    }
  }
  EXPECT_GE(completed, 1) << ran.output;
  EXPECT_EQ(at_first_rung, 4) << "6 at rung 1, of which the best 2 go on\n" << ran.output;
  // Run again, nothing is left to do: the ladder stays as it is.
  const auto before = ladder_of(db(), "a");
  auto again = run_kiln("sweep " + file + " --jobs 2");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(ladder_of(db(), "a"), before) << again.output;
}

TEST_F(Asha, ASweepKilledWithItsMemberAndRunAgainEndsWithTheUninterruptedLadder) {
  const std::string exp = experiment();
  auto whole = run_kiln("sweep " + asha_file(dir_ / "", exp, "u", 6));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const std::string file = asha_file(dir_ / "", exp, "k", 6);
  const std::string log = dir_ / "killed.log";
  const testing::Outcome killed = testing::run_child_until({"sweep", file}, log, "", [&] {
    return scalar(db(), "select count(*) from runs where sweep = 'k'") == "4";
  });
  ASSERT_TRUE(killed.killed) << testing::read_file(log);
  // The member it was running is killed too (a member runs in its own process group).
  testing::run_shell("pkill -KILL -f 'k/trial=' ; sleep 0.2");
  auto again = run_kiln("sweep " + file);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(ladder_of(db(), "k"), ladder_of(db(), "u")) << again.output;
}

TEST_F(Asha, TpeProposesTheTrialsAfterTheStartupOnesAndAshaStopsThem) {
  const std::string file =
      asha_file(dir_ / "", experiment(), "t", 5, "sampler = \"tpe\"\nstartup = 3");
  auto ran = run_kiln("sweep " + file + " --jobs 2");
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 't'"), "5") << ran.output;
  EXPECT_EQ(scalar(db(),
                   "select count(*) from runs where sweep = 't' and name like "
                   "'t/trial=4,%'"),
            "1")
      << ran.output;
  EXPECT_GE(std::stoi(scalar(db(),
                             "select count(*) from runs where sweep = 't' and status = "
                             "'completed'")),
            1)
      << ran.output;
}

}  // namespace
}  // namespace kiln
