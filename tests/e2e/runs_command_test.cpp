// `kiln runs list|rm|show|compare|plot` through the real binary, over the made-up run store of
// support/fake_runs.h: flags, exit codes and the one-line errors.
#include <filesystem>

#include "fake_runs.h"

namespace kiln {
namespace {

using testing::run_kiln;
using RunsCommand = testing::FakeRuns;

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

}  // namespace
}  // namespace kiln
