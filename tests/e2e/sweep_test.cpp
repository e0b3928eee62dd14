// Sweeps and reproducibility, through the real binary.
#include <sys/wait.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/app/sweeps/tpe.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using testing::scalar;
using Sweep = testing::TinyRun;

// The names in a folder, sorted; none for a folder that does not exist.
std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    names.insert(entry.path().filename().string());
  return names;
}

TEST_F(Sweep, GridWithTwoJobsRecordsEveryMemberTaggedAndSkipsThemOnRerun) {
  const std::string exp = experiment();
  const std::string args = "sweep " + exp +
                           " --name g --grid optimizer.lr=1e-3,1e-2 --grid run.seed=1,2 "
                           "--set train.steps=8 --set eval.every=0 --jobs 2";
  auto first = run_kiln(args);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 'g' and status = 'completed'"),
            "4");
  EXPECT_EQ(scalar(db(), "select count(*) from metrics"), "32");
  EXPECT_EQ(scalar(db(), "select count(*) from runs where name = 'g/optimizer.lr=1e-3,run.seed=1'"),
            "1");
  // jobs 2 on this machine's cores: each member gets its share of threads.
  EXPECT_NE(first.output.find("2 at a time"), std::string::npos) << first.output;
  for (const char* column : {"optimizer.lr", "run.seed", "final_loss", "best_val", "status"}) {
    EXPECT_NE(first.output.find(column), std::string::npos) << column << "\n" << first.output;
  }
  auto again = run_kiln(args);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("4 members, 4 completed, 0 to run"), std::string::npos)
      << again.output;
}

// The header says the threads the members train on: the tiny experiment's run.threads = 1 with
// one job (not the machine's cores), and both counts when a grid gives them different ones.
TEST_F(Sweep, TheHeaderSaysTheThreadsEachMemberTrainsOn) {
  const std::string exp = experiment();
  auto one = run_kiln("sweep " + exp + " --name t1 --grid run.seed=1,2 --set train.steps=2");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("2 members, 0 completed, 2 to run, 1 at a time (1 CPU thread each)"),
            std::string::npos)
      << one.output;
  auto mixed = run_kiln("sweep " + exp + " --name t2 --grid run.threads=1,3 --set train.steps=2");
  ASSERT_EQ(mixed.exit_code, 0) << mixed.output;
  EXPECT_NE(mixed.output.find("1 at a time (1 to 3 CPU threads each)"), std::string::npos)
      << mixed.output;
  EXPECT_EQ(scalar(db(),
                   "select group_concat(value, ' ') from (select e.value from "
                   "run_environment e join runs r on r.id = e.run_id where r.sweep = 't2' "
                   "and e.key = 'threads' order by e.value)"),
            "1 3");
}

// A sweep run again after its file changed (train.steps 4 -> 6) does not skip its members as
// completed: it is refused with the keys that changed, --keep-old keeps what they
// ran, and --rerun-changed trains them again as new runs NAME:v2 with the new steps.
TEST_F(Sweep, AChangedMemberIsRefusedOrKeptOrRerunAsANewVersion) {
  const std::string exp = experiment();
  const std::string args =
      "sweep " + exp + " --name e --grid run.seed=1,2 --set eval.every=0 --set train.steps=";
  ASSERT_EQ(run_kiln(args + "4").exit_code, 0);
  const std::string changed = args + "6";
  testing::expect_one_error_line(
      run_kiln(changed), changed,
      "2 of the sweep's members ran before with another config: 'e/run.seed=1' (train.steps 4 "
      "-> 6); 'e/run.seed=2' (train.steps 4 -> 6): pass --rerun-changed");
  auto kept = run_kiln(changed + " --keep-old");
  ASSERT_EQ(kept.exit_code, 0) << kept.output;
  EXPECT_NE(kept.output.find("keep e/run.seed=1 as it ran (train.steps 4 -> 6 now differ)"),
            std::string::npos)
      << kept.output;
  EXPECT_EQ(scalar(db(), "select count(*) from runs"), "2");
  auto rerun = run_kiln(changed + " --rerun-changed");
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  EXPECT_EQ(scalar(db(),
                   "select count(*) || ' ' || max(steps) from runs where name like "
                   "'e/run.seed=_:v2' and status = 'completed'"),
            "2 6")
      << rerun.output;
  // The old runs are as they ran.
  EXPECT_EQ(scalar(db(),
                   "select count(*) from metrics m join runs r on r.id = m.run_id where "
                   "r.name = 'e/run.seed=1'"),
            "4");
}

// A member that fails while training (its learning rate makes the loss diverge) is recorded and
// the others go on; one that fails at assembly never starts (below).
TEST_F(Sweep, AFailingMemberIsRecordedAndTheOthersGoOn) {
  const std::string exp = experiment();
  auto result = run_kiln("sweep " + exp +
                         " --name f --zip optimizer.lr=1e-2,1e6 --zip train.steps=4,4 "
                         "--set eval.every=0");
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_EQ(scalar(db(), "select status from runs where name like 'f/optimizer.lr=1e-2%'"),
            "completed");
  EXPECT_EQ(scalar(db(), "select status from runs where name like 'f/optimizer.lr=1e6%'"),
            "failed");
  EXPECT_NE(scalar(db(), "select error from runs where status = 'failed'").find("not finite"),
            std::string::npos);
}

// Every member is assembled before any starts: a warmup as long as the run, which only the
// schedule plugin refuses, stops the sweep with exit 2 and the member's name, and the store is
// as it was (its one earlier run, no member row, no member folder).
TEST_F(Sweep, AMemberThatCannotBeAssembledStopsTheSweepBeforeAnyStarts) {
  const std::string exp = experiment();
  ASSERT_EQ(run_kiln("run " + exp + " --name before --set train.steps=2").exit_code, 0);
  const std::string rows =
      "select group_concat(name || ':' || status || ':' || "
      "ifnull(sweep, '-')) from runs";
  const std::string rows_before = scalar(db(), rows);
  const auto folders_before = names_in(dir_ / "runs");
  testing::write_text(dir_ / "warm.toml", "base = \"" + exp +
                                              "\"\n[set]\nschedule.type = \"cosine\"\n"
                                              "[zip]\nschedule.warmup = [2, 8]\n"
                                              "train.steps = [8, 8]\n");
  auto result = run_kiln("sweep " + (dir_ / "warm.toml"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("sweep member 'warm/schedule.warmup=8,train.steps=8': "
                               "--set schedule.warmup=8: schedule.warmup = 8 must be smaller "
                               "than train.steps = 8"),
            std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("start "), std::string::npos) << result.output;
  EXPECT_EQ(scalar(db(), rows), rows_before);
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep is not null"), "0");
  EXPECT_EQ(names_in(dir_ / "runs"), folders_before);
}

// --dry-run: each member checked and listed, with what the test works out itself for the tiny
// GPT (2 layers, width 32, 32 positions, 64 tokens): nothing run, no store made.
TEST_F(Sweep, DryRunListsTheMembersOfVariantsWithoutTouchingTheStore) {
  const std::string exp = experiment();
  testing::write_text(dir_ / "opt.toml", "base = \"" + exp +
                                             "\"\nseeds = [1, 2]\n"
                                             "[[variant]]\nname = \"adamw\"\noptimizer.lr = 1e-2\n"
                                             "[[variant]]\nname = \"lion\"\n"
                                             "optimizer.type = \"lion\"\noptimizer.lr = 1e-3\n");
  auto result = run_kiln("sweep " + (dir_ / "opt.toml") + " --dry-run");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const int64_t c = 32, layers = 2, positions = 32, vocab = 64;
  const int64_t parameters = vocab * c + positions * c + layers * (12 * c * c + 13 * c) + 2 * c;
  const int64_t tokens_per_step = 8 * 32;  // micro_batch x seq_len, one rank, no accumulation
  std::vector<std::string> rows;
  for (const char* member : {"opt/adamw,run.seed=1", "opt/adamw,run.seed=2", "opt/lion,run.seed=1",
                             "opt/lion,run.seed=2"}) {
    const size_t at = result.output.find(std::string("\n") + member + " ");
    ASSERT_NE(at, std::string::npos) << member << "\n" << result.output;
    rows.push_back(result.output.substr(at + 1, result.output.find('\n', at + 1) - at - 1));
  }
  for (const auto& row : rows) {
    EXPECT_NE(row.find(" " + std::to_string(parameters) + " "), std::string::npos) << row;
    EXPECT_NE(row.find(" " + std::to_string(tokens_per_step) + " "), std::string::npos) << row;
    EXPECT_NE(row.find(" 30 "), std::string::npos) << row;  // train.steps
  }
  EXPECT_NE(rows[2].find(" lion "), std::string::npos) << rows[2];
  EXPECT_NE(rows[2].find(" 0.001 "), std::string::npos) << rows[2];
  EXPECT_NE(rows[0].find(" adamw "), std::string::npos) << rows[0];
  EXPECT_FALSE(std::filesystem::exists(db()));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "runs"));
}

TEST_F(Sweep, SweepFilesExpandGridZipAndSeedsAndCatchTyposBeforeRunning) {
  const std::string exp = experiment();
  testing::write_text(dir_ / "s.toml", "base = \"" + exp +
                                           "\"\nseeds = [1, 2]\n"
                                           "[grid]\noptimizer.lr = [1e-3, 2e-3]\n"
                                           "[set]\ntrain.steps = 2\neval.every = 0\n");
  auto ok = run_kiln("sweep " + (dir_ / "s.toml"));
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 's'"), "4");
  testing::write_text(dir_ / "bad.toml", "base = \"" + exp + "\"\n[grid]\noptimizer.lrr = [1]\n");
  auto bad = run_kiln("sweep " + (dir_ / "bad.toml"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("did you mean 'optimizer.lr'?"), std::string::npos) << bad.output;
  testing::write_text(dir_ / "typo.toml", "base = \"" + exp + "\"\ngird = 3\n");
  auto typo = run_kiln("sweep " + (dir_ / "typo.toml"));
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.output.find("typo.toml:2:1: unknown sweep key 'gird': did you mean 'grid'?"),
            std::string::npos)
      << typo.output;
}

TEST_F(Sweep, SameConfigAndSeedIsBitIdenticalAndAnotherSeedIsNot) {
  const std::string exp = experiment() + " --set model.dropout=0.1 --set train.steps=15";
  ASSERT_EQ(run_kiln("run " + exp + " --name a").exit_code, 0);
  ASSERT_EQ(run_kiln("run " + exp + " --name b").exit_code, 0);
  ASSERT_EQ(run_kiln("run " + exp + " --name c --set run.seed=7").exit_code, 0);
  auto a = losses("a"), b = losses("b"), c = losses("c");
  ASSERT_EQ(a.size(), 15u);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
  EXPECT_NE(a[0], c[0]);  // different initial weights already
  EXPECT_EQ(scalar(db(), "select count(distinct config_hash) from runs"), "2");
  // `runs compare` says so too: the identical-case line, and never the mismatch one (which also
  // holds the word "identical", as in "after 3 identical steps").
  const std::string hash = scalar(db(), "select config_hash from runs where name = 'a'");
  auto compare = run_kiln("runs compare a b --db " + db());
  EXPECT_EQ(compare.exit_code, 0) << compare.output;
  EXPECT_NE(
      compare.output.find("a and b (config " + hash + "): loss curves identical over 15 steps"),
      std::string::npos)
      << compare.output;
  EXPECT_EQ(compare.output.find("first differ"), std::string::npos) << compare.output;
}

// A random search runs its drawn trials as members, and `kiln sweep best` prints the member with
// the lowest validation loss (found here by SQL over the evals) as a config that runs again.
TEST_F(Sweep, RandomSearchRunsItsDrawsAndBestPrintsTheWinnersConfig) {
  const std::string exp = experiment();
  const std::string file = dir_ / "search.toml";
  testing::write_text(file, "base = \"" + exp +
                                "\"\nname = \"rs\"\n[search]\ntype = \"random\"\ntrials = 3\n"
                                "seed = 5\nmetric = \"val_loss\"\n[space]\n"
                                "optimizer.lr = { log_uniform = [1e-4, 3e-2] }\n"
                                "[set]\ntrain.steps = 10\neval.every = 5\n");
  auto dry = run_kiln("sweep " + file + " --dry-run");
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  auto ran = run_kiln("sweep " + file + " --jobs 2");
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 'rs' and status = 'completed'"),
            "3");
  EXPECT_NE(ran.output.find("sorted by min(val_loss)"), std::string::npos) << ran.output;
  // --dry-run listed exactly the members that ran.
  for (const auto& row : testing::query(db(), "select name from runs where sweep = 'rs'"))
    EXPECT_NE(dry.output.find(row[0]), std::string::npos) << row[0] << "\n" << dry.output;
  const std::string winner =
      scalar(db(),
             "select r.name from runs r join evals e on e.run_id = r.id where r.sweep = 'rs' and "
             "e.split = 'val' group by r.id order by min(e.loss) limit 1");
  auto best = run_kiln("sweep best rs --db " + db());
  ASSERT_EQ(best.exit_code, 0) << best.output;
  EXPECT_NE(best.output.find("#   " + winner + " (id "), std::string::npos) << best.output;
  const std::string lr = winner.substr(winner.find("optimizer.lr=") + 13);
  EXPECT_NE(best.output.find("lr = " + lr), std::string::npos) << best.output;
  // The printed config runs as a new run, with the winner's learning rate and its numbers.
  const std::string again = dir_ / "best.toml";
  testing::write_text(again, best.output);
  auto rerun = run_kiln("run " + again + " --name again");
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  expect_same_curve(winner, "again", 10, 0.0);
  testing::expect_one_error_line(run_kiln("sweep best nope --db " + db()), "sweep best nope",
                                 "no sweep 'nope'");
  testing::expect_one_error_line(run_kiln("sweep best rs --by 'max(kjv.acc)' --db " + db()),
                                 "sweep best rs --by max(kjv.acc)", "unknown metric 'kjv.acc'");
}

// Two `kiln sweep` processes of one random search share its members through the store's claims:
// each member trains once, in one folder, and both processes end with every member completed.
TEST_F(Sweep, TwoProcessesOfOneRandomSearchSplitItsMembers) {
  const std::string exp = experiment();
  const std::string file = dir_ / "shared.toml";
  testing::write_text(file, "base = \"" + exp +
                                "\"\nname = \"sh\"\n[search]\ntype = \"random\"\ntrials = 4\n"
                                "seed = 2\n[space]\n"
                                "optimizer.lr = { log_uniform = [1e-4, 3e-2] }\n"
                                "[set]\ntrain.steps = 10\n");
  const pid_t first = testing::start_kiln({"sweep", file}, dir_ / "first.log");
  const pid_t second = testing::start_kiln({"sweep", file}, dir_ / "second.log");
  for (const pid_t pid : {first, second}) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << testing::read_file(dir_ / "first.log") << testing::read_file(dir_ / "second.log");
  }
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 'sh' and status = 'completed'"),
            "4");
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 'sh'"), "4");
  // Each member started once, by one of the two (the claims' record of who ran what).
  EXPECT_EQ(scalar(db(),
                   "select count(distinct member) || ' ' || count(*) from sweep_decisions "
                   "where sweep = 'sh'"),
            "4 4");
  // No second folder of a member holding only a loser's console.log: one folder each, its run's.
  size_t folders = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ / "runs/sh")) {
    ++folders;
    EXPECT_TRUE(std::filesystem::exists(entry.path() / "run.json")) << entry.path();
  }
  EXPECT_EQ(folders, 4u);
}

// A variant that switches the optimizer over a base with AdamW's own keys follows `kiln run
// --set optimizer.type=sgd`'s rule: the keys SGD does not take are left out, with the same note,
// in --dry-run as in `kiln run`.
TEST_F(Sweep, AVariantSwitchingAPluginNotesWhatKilnRunNotes) {
  const std::string exp = experiment();
  std::string text = testing::read_file(exp);
  text.replace(text.find("[optimizer]\n"), 12, "[optimizer]\nbeta1 = 0.8\n");
  testing::write_text(exp, text);
  const std::string file = dir_ / "variants.toml";
  testing::write_text(file, "base = \"" + exp +
                                "\"\nname = \"v\"\n[[variant]]\nname = \"sgd\"\n"
                                "optimizer.type = \"sgd\"\n");
  auto run = run_kiln("run " + exp + " --set optimizer.type=sgd --set train.steps=1 --name s");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const size_t at = run.output.find("note: --set optimizer.type=sgd");
  ASSERT_NE(at, std::string::npos) << run.output;
  const std::string note = run.output.substr(at, run.output.find('\n', at) - at);
  EXPECT_NE(note.find("optimizer.beta1"), std::string::npos) << note;
  auto dry = run_kiln("sweep " + file + " --dry-run");
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("sweep member 'v/sgd': " + note), std::string::npos) << dry.output;
}

// A tpe search runs its startup trials as a random search's draws, then proposes each later trial
// from the store: its values are what tpe_propose gives for the losses this test reads from the
// store itself, and the same sweep run again proposes the same trials, so it skips them all.
TEST_F(Sweep, TpeProposesFromTheStoredLossesAndARerunProposesTheSameTrials) {
  const std::string exp = experiment();
  const std::string file = dir_ / "tpe.toml";
  testing::write_text(file, "base = \"" + exp +
                                "\"\nname = \"tp\"\n[search]\ntype = \"tpe\"\ntrials = 5\n"
                                "startup = 3\nseed = 2\nmetric = \"loss\"\n[space]\n"
                                "optimizer.lr = { log_uniform = [1e-4, 3e-2] }\n"
                                "[set]\ntrain.steps = 6\n");
  auto dry = run_kiln("sweep " + file + " --dry-run");
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("and 2 trials more, which TPE proposes"), std::string::npos)
      << dry.output;
  auto ran = run_kiln("sweep " + file);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 'tp' and status = 'completed'"),
            "5");
  SweepDistribution lr;
  lr.key = "optimizer.lr";
  lr.kind = SweepDistribution::Kind::kLogUniform;
  lr.low = 1e-4;
  lr.high = 3e-2;
  std::vector<TpeTrial> finished;
  for (int trial = 0; trial < 5; ++trial) {
    const auto rows = testing::query(
        db(),
        "select r.name, min(m.loss) from runs r join metrics m on m.run_id = r.id where "
        "r.name like 'tp/trial=" +
            std::to_string(trial) + ",%' group by r.id");
    ASSERT_EQ(rows.size(), 1u) << "trial " << trial << "\n" << ran.output;
    const std::string value = rows[0][0].substr(rows[0][0].find("optimizer.lr=") + 13);
    if (trial >= 3) {
      EXPECT_EQ(value, tpe_propose({lr}, finished, 2, trial, {3})[0]) << "trial " << trial;
    } else {
      EXPECT_EQ(value, sample_value(lr, 2, trial)) << "trial " << trial;
      EXPECT_NE(dry.output.find(rows[0][0]), std::string::npos) << dry.output;
    }
    finished.push_back({{value}, std::stod(rows[0][1])});
  }
  auto again = run_kiln("sweep " + file);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(scalar(db(), "select count(*) from runs where sweep = 'tp'"), "5") << again.output;
  size_t skipped = 0;
  for (size_t at = again.output.find("(completed)"); at != std::string::npos;
       at = again.output.find("(completed)", at + 1)) {
    ++skipped;
  }
  EXPECT_EQ(skipped, 5u) << again.output;
}

}  // namespace
}  // namespace kiln
