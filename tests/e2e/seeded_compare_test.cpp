// Seeds grouped by config through the real binary: the table a sweep with seeds ends with, and
// `kiln runs compare --group-by`, checked against the run store read with SQLite directly.
#include <sys/wait.h>

#include <algorithm>
#include <regex>

#include "core/util/text.h"
#include "tiny_run.h"

namespace kiln {
namespace {

using testing::run_kiln;
using SeededCompare = testing::TinyRun;

// The cells (two spaces or more apart) of the first line after `from` that starts with
// `label` once indented.
std::vector<std::string> row_after(const std::string& output, const std::string& from,
                                   const std::string& label) {
  const size_t start = output.find(from);
  EXPECT_NE(start, std::string::npos) << from << "\n" << output;
  const size_t at = output.find("\n  " + label + "  ", start);
  EXPECT_NE(at, std::string::npos) << label << "\n" << output;
  if (start == std::string::npos || at == std::string::npos) return {};
  const std::string line = output.substr(at + 3, output.find('\n', at + 1) - at - 3);
  std::vector<std::string> cells;
  const std::regex gap("\\s{2,}");
  for (std::sregex_token_iterator it(line.begin(), line.end(), gap, -1), end; it != end; ++it)
    cells.push_back(*it);
  return cells;
}

// The mean of the final losses of the member runs with this learning rate, from the store.
double mean_final_loss(const std::string& db, const std::string& lr) {
  const auto finals = testing::query_doubles(
      db,
      "select loss from metrics m join runs r on r.id = m.run_id where r.name like "
      "'s/optimizer.lr=" +
          lr + ",%' and m.step = (select max(step) from metrics where run_id = r.id)");
  EXPECT_EQ(finals.size(), 3u);
  double sum = 0;
  for (double v : finals)
    sum += v;
  return sum / static_cast<double>(finals.size());
}

TEST_F(SeededCompare, ASweepWithSeedsEndsWithOneRowPerConfigAndCompareGroupsTheSame) {
  const std::string exp = experiment();
  const auto sweep = run_kiln("sweep " + exp +
                              " --name s --grid optimizer.lr=1e-3,1e-2 --grid run.seed=1,2,3 "
                              "--set train.steps=3 --set eval.every=0 --jobs 2");
  ASSERT_EQ(sweep.exit_code, 0) << sweep.output;
  EXPECT_NE(sweep.output.find("2 groups, baseline 'optimizer.lr=0.001'"), std::string::npos)
      << sweep.output;
  for (const auto& [lr, label] :
       {std::pair{"1e-3", "optimizer.lr=0.001"}, std::pair{"1e-2", "optimizer.lr=0.01"}}) {
    const auto members = row_after(sweep.output, "2 groups", label);
    ASSERT_EQ(members.size(), 3u) << sweep.output;
    EXPECT_EQ(members[1], "3");
    // Members started together get their ids in the order they start: any order of seeds.
    std::string listed = members[2];
    listed.erase(std::remove(listed.begin(), listed.end(), ' '), listed.end());
    std::vector<std::string> seeds = split(listed, ',');
    std::sort(seeds.begin(), seeds.end());
    EXPECT_EQ(seeds, (std::vector<std::string>{"1", "2", "3"})) << members[2];
    const auto final_loss = row_after(sweep.output, "\nfinal loss", label);
    ASSERT_GE(final_loss.size(), 5u) << sweep.output;
    EXPECT_EQ(final_loss[1], "3");
    EXPECT_EQ(final_loss[2], fmt::format("{:.6f}", mean_final_loss(db(), lr))) << sweep.output;
  }
  // The Welch row of the second config, against the first.
  EXPECT_EQ(row_after(sweep.output, "\nfinal loss", "optimizer.lr=0.01").size(), 8u);

  const std::string compare =
      "runs compare s --group-by optimizer.lr --metric loss@step=2 --db " + db();
  const auto grouped = run_kiln(compare);
  ASSERT_EQ(grouped.exit_code, 0) << grouped.output;
  EXPECT_EQ(row_after(grouped.output, "\nfinal loss", "optimizer.lr=0.01")[2],
            fmt::format("{:.6f}", mean_final_loss(db(), "1e-2")));
  EXPECT_NE(grouped.output.find("\nloss@step=2 (the last value at or before step 2)"),
            std::string::npos)
      << grouped.output;

  const std::string too_far = "runs compare s --group-by auto --metric loss@step=4 --db " + db();
  const auto refused = run_kiln(too_far);
  testing::expect_one_error_line(refused, too_far,
                                 "--metric loss@step=4: run 's/optimizer.lr=1e-3,run.seed=");
  EXPECT_NE(refused.output.find("' has not reached step 4 (it stops at step 3)"),
            std::string::npos);
  // Without --group-by, compare is as it was.
  const auto plain = run_kiln("runs compare s --db " + db());
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("config keys that differ"), std::string::npos) << plain.output;
  EXPECT_EQ(plain.output.find("baseline"), std::string::npos) << plain.output;
}

// With run.threads = 0 a run takes the CPUs this process may use once, at its start, whatever
// else runs: two seeds run side by side follow the curve the same config gives alone, bit for
// bit, and each run records the thread count it ran with.
TEST_F(SeededCompare, RunsSideBySideFollowTheCurveOfTheSameRunAlone) {
  const std::string exp = experiment();
  const std::vector<std::string> set = {"--set", "run.threads=0", "--set", "train.steps=20"};
  auto alone = run_kiln("run " + exp + " --name alone --set run.threads=0 --set train.steps=20");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  std::vector<pid_t> pids;
  for (const std::string name : {"left", "right"}) {
    std::vector<std::string> args = {"run", exp, "--name", name};
    args.insert(args.end(), set.begin(), set.end());
    pids.push_back(testing::start_kiln(args, dir_ / (name + ".log")));
  }
  for (const pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << testing::read_file(dir_ / "left.log") << testing::read_file(dir_ / "right.log");
  }
  expect_same_curve("alone", "left", 20, 0.0);
  expect_same_curve("alone", "right", 20, 0.0);
  const std::string cpus = testing::run_shell("nproc").output;
  for (const std::string name : {"alone", "left", "right"}) {
    EXPECT_EQ(testing::scalar(db(),
                              "select value from run_environment join runs on id = run_id "
                              "where name = '" +
                                  name + "' and key = 'threads'") +
                  "\n",
              cpus)
        << name;
  }
  auto compared = run_kiln("runs compare alone left right --db " + db());
  EXPECT_NE(compared.output.find("alone and left (config "), std::string::npos) << compared.output;
  EXPECT_NE(compared.output.find("loss curves identical over 20 steps"), std::string::npos)
      << compared.output;
}

}  // namespace
}  // namespace kiln
