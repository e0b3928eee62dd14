// Asynchronous successive halving (core/app/sweeps/asha.h) through the real binary: members
// pause at the rungs and are promoted by resuming them, so a member that went all the way has
// the curve of the same config run straight, bit for bit; and a sweep killed with its member, and
// run again, ends with the ladder an uninterrupted sweep of the same file ends with.
#include <algorithm>
#include <csignal>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/store/history/reader.h"
#include "core/store/history/rung_ladder.h"
#include "core/store/runs/sweep_claims.h"
#include "core/store/runs/writer.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::query;
using testing::query_doubles;
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
  // Run again, nothing is left to do, and the header says so: the ladder stays as it is.
  const auto before = ladder_of(db(), "a");
  auto again = run_kiln("sweep " + file + " --jobs 2");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(ladder_of(db(), "a"), before) << again.output;
  const std::string count = "select count(*) from runs where sweep = 'a' and status = ";
  EXPECT_NE(again.output.find(fmt::format("6 members, {} completed, {} paused at a rung, 0 to run",
                                          scalar(db(), count + "'completed'"),
                                          scalar(db(), count + "'interrupted'"))),
            std::string::npos)
      << again.output;
  // By name alone, `sweep best` ranks by the search's own metric at its last rung, as the
  // ladder does, from the shape its workers recorded.
  auto best = run_kiln("sweep best a --db " + db());
  ASSERT_EQ(best.exit_code, 0) << best.output;
  EXPECT_NE(best.output.find("by val_loss@step=27"), std::string::npos) << best.output;
}

// Random and TPE proposals alike: a rerun proposes nothing twice (TPE's trials are in the store).
TEST_F(Asha, ASweepKilledWithItsMemberAndRunAgainEndsWithTheUninterruptedLadder) {
  const std::string exp = experiment();
  for (const std::string sampler : {"random", "tpe"}) {
    SCOPED_TRACE(sampler);
    const std::string lines =
        sampler == "tpe" ? "sampler = \"tpe\"\nstartup = 3\n" : "sampler = \"random\"\n";
    const std::string whole_name = "u" + sampler, killed_name = "k" + sampler;
    auto whole = run_kiln("sweep " + asha_file(dir_ / "", exp, whole_name, 6, lines));
    ASSERT_EQ(whole.exit_code, 0) << whole.output;
    const std::string file = asha_file(dir_ / "", exp, killed_name, 6, lines);
    const std::string log = dir_ / (killed_name + ".log");
    const testing::Outcome killed = testing::run_child_until({"sweep", file}, log, "", [&] {
      const std::string started =
          scalar(db(), "select count(*) from runs where sweep = '" + killed_name + "'");
      return !started.empty() && std::stoi(started) >= 4;
    });
    ASSERT_TRUE(killed.killed) << testing::read_file(log);
    // The member it was running stops by itself: it asked for SIGTERM at its worker's death (its
    // own process group keeps it from the worker's other signals), and takes it as a Ctrl-C.
    // Soon no member process is left (a step, a snapshot and an exit: 30 s for a busy machine).
    const std::string pattern = "'" + killed_name + "/tria[l]='";
    EXPECT_TRUE(
        testing::wait_for([&] { return testing::run_shell("pgrep -f " + pattern).exit_code != 0; },
                          std::chrono::seconds(30)))
        << testing::run_shell("ps -ef | grep " + pattern).output;
    auto again = run_kiln("sweep " + file);
    ASSERT_EQ(again.exit_code, 0) << again.output;
    EXPECT_EQ(ladder_of(db(), killed_name), ladder_of(db(), whole_name)) << again.output;
  }
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

// A wsd schedule whose stable phase the rungs lie in (its decay: the last 20% of the steps).
const char* const kWsd =
    "[schedule]\ntype = \"wsd\"\ndecay_fraction = 0.2\ndecay_shape = \"1-sqrt\"\n";

std::string val_at(const std::string& db, const std::string& run, int64_t step) {
  return scalar(db,
                "select printf('%.17g', e.loss) from evals e join runs r on r.id = e.run_id where "
                "e.split = 'val' and r.name = '" +
                    run + "' and e.step = " + std::to_string(step));
}

// A cooldown probe at step 9 of 2 steps scores exactly what a straight wsd run of 11 steps, its
// decay those 2 steps, scores at its end; and the probed run, resumed, follows the curve of the
// same run paused without a probe, bit for bit: the branch is thrown away.
TEST_F(Asha, ACooldownProbeScoresWhatAStraightWsdRunScoresAndLeavesTheTrunkAsItWas) {
  const std::string exp = experiment(kWsd);
  auto probed = run_kiln("run " + exp + " --name trunk --set train.steps=27 --until 9 " +
                         "--probe-cooldown 2");
  ASSERT_EQ(probed.exit_code, 0) << probed.output;
  EXPECT_NE(probed.output.find("rung probe at step 9: val_loss "), std::string::npos)
      << probed.output;
  const std::string probe =
      scalar(db(),
             "select cooldown_steps || ' ' || printf('%.17g', val_loss) from rung_probes join "
             "runs on runs.id = run_id where name = 'trunk' and step = 9");
  auto straight = run_kiln(fmt::format(
      "run {} --name straight --set train.steps=11 --set schedule.decay_fraction={:.17g}", exp,
      2.0 / 11.0));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_EQ(probe, "2 " + val_at(db(), "straight", 11));
  // The trunk goes on from its step-9 snapshot as if no branch had been trained.
  ASSERT_EQ(run_kiln("resume trunk --db " + db()).exit_code, 0);
  ASSERT_EQ(run_kiln("run " + exp + " --name plain --set train.steps=27 --until 9").exit_code, 0);
  ASSERT_EQ(run_kiln("resume plain --db " + db()).exit_code, 0);
  EXPECT_EQ(curve_of(db(), "trunk"), curve_of(db(), "plain"));
  EXPECT_EQ(val_at(db(), "trunk", 27), val_at(db(), "plain", 27));
}

// An asha sweep with rung_cooldown scores each member at rungs 3 and 9 by a probe of 1 and 2
// steps (0.2 of the rung, at least 1): the ladder ranks by the probe's val loss, shows the
// trajectory's own beside it, and counts the probes' steps in what the search cost.
TEST_F(Asha, RungCooldownScoresTheRungsByTheirProbes) {
  const std::string file = asha_file(dir_ / "", experiment(kWsd), "c", 5, "rung_cooldown = 0.2\n");
  auto ran = run_kiln("sweep " + file + " --jobs 2");
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_EQ(scalar(db(),
                   "select count(*) from rung_probes p join runs r on r.id = p.run_id "
                   "where r.sweep = 'c' and p.step = 3 and p.cooldown_steps = 1"),
            "5")
      << ran.output;
  EXPECT_NE(scalar(db(), "select count(*) from rung_probes where step = 9 and cooldown_steps = 2"),
            "0");
  EXPECT_NE(ran.output.find("(cooled; un-cooled "), std::string::npos) << ran.output;
  // Each rung-3 score in the ladder is that member's probe, not its own val_loss at step 3.
  const std::string best_probe =
      scalar(db(),
             "select printf('%.4f', min(p.val_loss)) from rung_probes p join runs r on r.id = "
             "p.run_id where r.sweep = 'c' and p.step = 3");
  EXPECT_NE(ran.output.find("1. "), std::string::npos);
  EXPECT_NE(ran.output.find("val_loss " + best_probe + " (cooled"), std::string::npos)
      << ran.output;
  // --where reads the cooled score as it reads val_loss: at a point, and over the run.
  const std::string best_run =
      scalar(db(),
             "select r.name from rung_probes p join runs r on r.id = p.run_id where r.sweep = 'c' "
             "and p.step = 3 order by p.val_loss, r.id limit 1");
  // SQLite's printf does not round-trip a double: the values are read as doubles and written
  // as fmt's shortest exact text.
  const std::string lowest = fmt::format(
      "{}", query_doubles(db(), "select min(val_loss) from rung_probes where step = 3").at(0));
  auto listed =
      run_kiln("runs list --db " + db() + " --where \"cooled_val_loss@step=3 <= " + lowest +
               "\" --sort cooled_val_loss@step=3 --limit 1");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find(best_run), std::string::npos) << listed.output;
  // min(): each member's lowest probe, counted against the store's own rows.
  const std::string bound =
      fmt::format("{}", query_doubles(db(), "select avg(val_loss) from rung_probes").at(0));
  listed = run_kiln("runs list --db " + db() + " --format csv --where \"min(cooled_val_loss) < " +
                    bound + "\"");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_EQ(
      std::to_string(std::count(listed.output.begin(), listed.output.end(), '\n') - 1),
      scalar(db(), "select count(distinct run_id) from rung_probes where val_loss < " + bound))
      << listed.output;
  const std::string members =
      scalar(db(),
             "select sum((select max(step) from metrics m where m.run_id = runs.id)) from runs "
             "where sweep = 'c'");
  const std::string probes = scalar(db(), "select sum(cooldown_steps) from rung_probes");
  EXPECT_NE(ran.output.find(fmt::format("steps trained: {} by the members' runs + {} by "
                                        "cooldown probes = {}",
                                        members, probes, std::stoll(members) + std::stoll(probes))),
            std::string::npos)
      << ran.output;
}

// Each run of the sweep, by its name after "SWEEP/": its cooldown probes as "step:steps=val_loss",
// exactly as stored.
std::map<std::string, std::string> probes_of(const std::string& db, const std::string& sweep) {
  std::map<std::string, std::string> out;
  for (const auto& row :
       query(db,
             "select r.name, group_concat(p.step || ':' || p.cooldown_steps || '=' || "
             "printf('%.17g', p.val_loss), ' ') from runs r left join rung_probes p on "
             "p.run_id = r.id where r.sweep = '" +
                 sweep + "' group by r.id order by r.name")) {
    out[row[0].substr(sweep.size() + 1)] = row[1];
  }
  return out;
}

// A member stopped during its cooldown probe (killed in it: fault point probe.unscored, its sweep
// killed then) has not reached that rung: `sweep status` leaves it out of the rung, and the rerun
// takes the probe again from the rung's snapshot, ending with the probes and the ladder of the
// same sweep never stopped.
TEST_F(Asha, AMemberStoppedDuringItsProbeTakesItAgainAndEndsWithTheUninterruptedLadder) {
  const std::string exp = experiment(kWsd);
  auto whole = run_kiln("sweep " + asha_file(dir_ / "", exp, "u", 6, "rung_cooldown = 0.2\n"));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const std::string file = asha_file(dir_ / "", exp, "k", 6, "rung_cooldown = 0.2\n");
  const std::string log = dir_ / "k.log";
  const std::string owing =
      "select count(*) from runs r join evals e on e.run_id = r.id and e.split = 'val' and "
      "e.step = 3 where r.sweep = 'k' and not exists (select 1 from rung_probes p where "
      "p.run_id = r.id and p.step = 3)";
  const testing::Outcome killed =
      testing::run_child_until({"sweep", file}, log, "probe.unscored", [&] {
        const std::string owed = scalar(db(), owing);
        return !owed.empty() && owed != "0";
      });
  ASSERT_TRUE(killed.killed) << testing::read_file(log);
  EXPECT_TRUE(
      testing::wait_for([] { return testing::run_shell("pgrep -f 'k/tria[l]='").exit_code != 0; },
                        std::chrono::seconds(30)));
  ASSERT_NE(scalar(db(), owing), "0") << testing::read_file(log);
  // The ladder leaves the member out of rung 1 rather than rank it by its un-cooled loss.
  auto status = run_kiln("sweep status " + file);
  ASSERT_EQ(status.exit_code, 0) << status.output;
  const std::string rung1 = status.output.substr(0, status.output.find("rung 2 of 3"));
  EXPECT_EQ(std::count(rung1.begin(), rung1.end(), '\n') - 1,
            std::stoll(scalar(db(),
                              "select count(*) from rung_probes p join runs r on r.id = "
                              "p.run_id where r.sweep = 'k' and p.step = 3")))
      << status.output;
  auto again = run_kiln("sweep " + file);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("stopped in its cooldown probe at step 3: the probe is taken again "
                              "from the step-3 snapshot"),
            std::string::npos)
      << again.output;
  EXPECT_EQ(probes_of(db(), "k"), probes_of(db(), "u")) << again.output;
  EXPECT_EQ(ladder_of(db(), "k"), ladder_of(db(), "u")) << again.output;
}

// `sweep best` of an asha search names its ladder's winner at the last rung, where the best value
// over each trajectory names another member: made-up members a (val_loss 2.0, 1.0, 1.5 at the
// rungs 3, 9, 27) and b (2.1, 1.2, 1.3) rank a first by min(val_loss), b at step 27.
TEST_F(Asha, SweepBestNamesTheLastRungsWinnerAsTheLadderDoes) {
  const LadderShape shape{"val_loss", false, 3, {3, 9, 27}, false};
  {
    RunStore store(db());
    const std::vector<std::pair<std::string, std::vector<double>>> members = {
        {"m/a", {2.0, 1.0, 1.5}}, {"m/b", {2.1, 1.2, 1.3}}};
    for (const auto& [name, values] : members) {
      NewRun run;
      run.name = name;
      run.experiment = "exp.toml";
      run.config_toml = "[run]\nname = \"" + name + "\"\n";
      run.config_hash = "0123456789abcdef";
      run.planned_steps = 27;
      run.sweep = "m";
      const int64_t id = store.create_run(run);
      for (int64_t step = 1; step <= 27; ++step) {
        MetricRow row;
        row.step = step;
        row.loss = 3.0;
        store.add_metric(id, row);
      }
      for (size_t j = 0; j < values.size(); ++j)
        store.add_eval(id, EvalRow{shape.rungs[j], "val", values[j], "", std::nullopt});
      store.finish_run(id, "completed");
    }
    SweepClaims(store, "m", "test:1", std::chrono::seconds(120)).record_ladder_shape(shape);
  }
  HistoryDb history(db());
  EXPECT_EQ(read_sweep_ladder(history, "m", shape, true).back().entries.at(0).name, "m/b");
  auto best = run_kiln("sweep best m --db " + db());
  ASSERT_EQ(best.exit_code, 0) << best.output;
  EXPECT_NE(best.output.find("by val_loss@step=27 (2 of its 2 members completed with a value):\n"
                             "#   m/b (id"),
            std::string::npos)
      << best.output;
  auto by_min = run_kiln("sweep best m --by 'min(val_loss)' --db " + db());
  ASSERT_EQ(by_min.exit_code, 0) << by_min.output;
  EXPECT_NE(by_min.output.find("#   m/a (id"), std::string::npos) << by_min.output;
}

// Schedule-free AdamW through the binary: a run paused and resumed follows the run that never
// stopped bit for bit (its snapshot holds the averaged iterate as the model, the training point in
// the optimizer's state); the val loss it logged at step 10 is what `kiln eval` of the step-10
// snapshot computes from model.pt alone, the averaged iterate; and an asha sweep of it scores its
// rungs without probes.
TEST_F(Asha, ScheduleFreeAdamWResumesExactlyAndEvaluatesItsAveragedIterate) {
  const std::string exp = experiment("[schedule]\ntype = \"constant\"\nwarmup = 3\n");
  std::string text = testing::read_file(exp);  // the tiny experiment's [optimizer] is AdamW's
  text.replace(text.find("[optimizer]\n"), 12, "[optimizer]\ntype = \"schedule_free_adamw\"\n");
  testing::write_text(exp, text);
  auto whole =
      run_kiln("run " + exp + " --name sf --set checkpoint.every=10 --set checkpoint.keep=3");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  ASSERT_EQ(run_kiln("run " + exp + " --name sf_paused --until 10").exit_code, 0);
  auto resumed = run_kiln("resume sf_paused --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(curve_of(db(), "sf"), curve_of(db(), "sf_paused"));
  EXPECT_EQ(val_at(db(), "sf", 30), val_at(db(), "sf_paused", 30));
  auto evaluated = run_kiln("eval sf --checkpoint 10 --split val --steps 2 --db " + db());
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.output;
  const std::string logged = val_at(db(), "sf", 10);
  EXPECT_NE(evaluated.output.find(fmt::format("loss {:.6f}", std::stod(logged))), std::string::npos)
      << logged << "\n"
      << evaluated.output;
  auto sweep = run_kiln("sweep " + asha_file(dir_ / "", exp, "s", 4));
  ASSERT_EQ(sweep.exit_code, 0) << sweep.output;
  EXPECT_EQ(scalar(db(), "select count(*) from rung_probes"), "0");
  EXPECT_NE(sweep.output.find("rung 1 of 3: step 3, 4 member(s)"), std::string::npos)
      << sweep.output;
}

}  // namespace
}  // namespace kiln
