// `kiln runs list|rm|show|compare|plot` through the real binary, over the made-up run store of
// support/fake_runs.h: flags, exit codes and the one-line errors.
#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "fake_runs.h"

namespace kiln {
namespace {

using testing::run_kiln;
using RunsCommand = testing::FakeRuns;

// Two things a first hour meets: `kiln runs` alone lists the runs commands, as
// `kiln runs --help` does, and `kiln --version` names its commit (one git knows) and LibTorch.
TEST_F(RunsCommand, RunsAloneShowsItsHelpAndVersionNamesTheCommit) {
  const auto alone = run_kiln("runs");
  EXPECT_EQ(alone.exit_code, 0) << alone.output;
  EXPECT_EQ(alone.output, run_kiln("runs --help").output);
  EXPECT_NE(alone.output.find("compare"), std::string::npos) << alone.output;
  const auto version = run_kiln("--version");
  EXPECT_EQ(version.exit_code, 0) << version.output;
  EXPECT_EQ(version.output.rfind("kiln ", 0), 0u) << version.output;
  EXPECT_NE(version.output.find("(LibTorch "), std::string::npos) << version.output;
  // The commit it names is HEAD's: the build asks git each time, so a commit made since the last
  // configure is named too. (The test binary is built in the same build as kiln.)
  const size_t start = std::string("kiln ").size();
  const std::string named = version.output.substr(start, version.output.find(' ', start) - start);
  const std::string checkout = std::string(KILN_SOURCE_DIR);
  const auto head = testing::run_shell("git -C '" + checkout + "' rev-parse --short=12 HEAD");
  if (head.exit_code != 0) GTEST_SKIP() << "SKIP the commit check: this is no git checkout";
  EXPECT_EQ(named + "\n", head.output) << version.output;
}

// `kiln serve` without --db serves $KILN_DB, as every other --db does.
TEST_F(RunsCommand, ServeWithoutDbServesKilnDb) {
  add({"a1", 1e-3, 2, "ha", {4.0, 3.0}, {}, "completed", 1});
  ::setenv("KILN_DB", db_path().c_str(), 1);
  const std::string log = dir_ / "serve.log";
  const pid_t serve = testing::start_kiln({"serve", "--port", "0"}, log);
  ::unsetenv("KILN_DB");
  const bool listening = testing::wait_for(
      [&] { return testing::read_file(log).find("kiln serve: http://") != std::string::npos; },
      std::chrono::seconds(60));
  ::kill(serve, SIGTERM);
  ::waitpid(serve, nullptr, 0);
  ASSERT_TRUE(listening) << testing::read_file(log);
  EXPECT_NE(testing::read_file(log).find("(run store '" + db_path() + "'"), std::string::npos)
      << testing::read_file(log);
}

TEST_F(RunsCommand, ListRmShowCompareAndPlotFromTheCommandLine) {
  const std::string db = " --db " + db_path();
  auto list = run_kiln("runs list --format csv --where 'optimizer.lr < 2e-3'" + db);
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find(",lr1,"), std::string::npos) << list.output;
  EXPECT_EQ(list.output.find(",lr3,"), std::string::npos) << list.output;

  auto bad = run_kiln("runs list --where 'nme = 1'" + db);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.output.rfind("kiln: error: --where \"nme = 1\": unknown key 'nme' at column 1", 0),
            0u)
      << bad.output;

  auto refused = run_kiln("runs rm lr1" + db + " < /dev/null");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.output.find("pass --yes"), std::string::npos) << refused.output;
  auto removed = run_kiln("runs rm lr1 --yes" + db);
  EXPECT_EQ(removed.exit_code, 0) << removed.output;
  EXPECT_EQ(testing::scalar(db_path(), "select count(*) from runs where name = 'lr1'"), "0");

  auto show = run_kiln("runs show lr3" + db);
  EXPECT_NE(show.output.find("run lr3 (id 2): completed"), std::string::npos) << show.output;
  auto compare = run_kiln("runs compare lr3 lr3-rerun" + db);
  EXPECT_EQ(compare.exit_code, 0) << compare.output;
  EXPECT_NE(
      compare.output.find("lr3 and lr3-rerun (config bbbb): loss curves identical over 4 steps"),
      std::string::npos)
      << compare.output;
  EXPECT_EQ(compare.output.find("first differ"), std::string::npos) << compare.output;

  const std::string svg = dir_ / "out/curves.svg";
  auto plot = run_kiln("runs plot 'lr3*' --metric loss --smooth 2 -o " + svg + db);
  EXPECT_EQ(plot.exit_code, 0) << plot.output;
  EXPECT_TRUE(std::filesystem::exists(svg));
  auto wrong = run_kiln("runs plot lr3 -o curves.pdf" + db);
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.output.find(".svg or .png"), std::string::npos) << wrong.output;

  auto missing = run_kiln("runs list --db " + (dir_ / "none.db"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("no run store at"), std::string::npos) << missing.output;
}

TEST_F(RunsCommand, PlotGroupsRunsIntoMeanCurvesWithBands) {
  const std::string db = " --db " + db_path();
  const std::string svg = dir_ / "grouped.svg";
  // lr1 alone, and lr3 with its rerun, drift and short siblings: one band, for the group of four.
  auto plot = run_kiln("runs plot 'lr*' --group-by optimizer.lr --band ci -o " + svg + db);
  ASSERT_EQ(plot.exit_code, 0) << plot.output;
  const std::string text = testing::read_file(svg);
  size_t bands = 0;
  for (size_t at = text.find("<path class=\"band\""); at != std::string::npos;
       at = text.find("<path class=\"band\"", at + 1))
    ++bands;
  EXPECT_EQ(bands, 1u) << text;
  EXPECT_NE(text.find(">4 runs: "), std::string::npos) << text;
  EXPECT_NE(text.find(">1 run: "), std::string::npos) << text;

  const std::string args = "runs plot 'lr*' --group-by auto --x time -o " + svg + db;
  testing::expect_one_error_line(run_kiln(args), args, "--x time with --group-by");
}

TEST_F(RunsCommand, DiffGivesBothValuesAndUnknownSourcesForRunsThatKeptNone) {
  const std::string db = " --db " + db_path();
  auto diff = run_kiln("runs diff lr1 lr3" + db);
  ASSERT_EQ(diff.exit_code, 0) << diff.output;
  EXPECT_NE(diff.output.find("lr1 and lr3: 2 config keys differ"), std::string::npos)
      << diff.output;
  using Words = std::vector<std::string>;
  EXPECT_EQ(testing::words_of_line(diff.output, "model.n_layer"),
            Words({"model.n_layer", "2", "unknown", "4", "unknown"}))
      << diff.output;
  EXPECT_EQ(testing::words_of_line(diff.output, "optimizer.lr"),
            Words({"optimizer.lr", "0.001", "unknown", "0.003", "unknown"}))
      << diff.output;
  auto same = run_kiln("runs diff lr3 lr3-rerun" + db);
  EXPECT_EQ(same.output, "lr3 and lr3-rerun: no config key differs besides run.name\n");
  EXPECT_NE(run_kiln("runs show lr1" + db).output.find("files: not recorded"), std::string::npos);
  const std::string args = "runs diff lr1" + db;
  testing::expect_one_error_line(run_kiln(args), args, "runs");
}

}  // namespace
}  // namespace kiln
