// Sweep files and their expansion into members, in process: no run is started. Running the
// members through the real binary: tests/e2e/sweep_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/app/sweep_spec.h"
#include "core/util/error.h"
#include "test_util.h"

namespace kiln {
namespace {

using Strings = std::vector<std::string>;

class SweepSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_text(base(), "[model]\ntype = \"gpt\"\n\n[train]\nsteps = 10\n");
  }

  std::string base() const { return dir_ / "base.toml"; }

  // A sweep file over base() with `body` after its base line.
  std::string sweep_file(const std::string& name, const std::string& body) {
    const std::string path = dir_ / (name + ".toml");
    testing::write_text(path, "base = \"" + base() + "\"\n" + body);
    return path;
  }

  template <typename Fn>
  std::string error_of(Fn fn) {
    try {
      fn();
    } catch (const UserError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no UserError";
    return "";
  }

  testing::TempDir dir_;
};

TEST_F(SweepSpecTest, GridSeedsAndZipExpandInOdometerOrderWithTheFixedValuesFirst) {
  const std::string path = sweep_file("s",
                                      "seeds = [1, 2]\n"
                                      "[grid]\noptimizer.lr = [0.5, 0.25]\n"
                                      "[zip]\nschedule.warmup = [1, 2]\ntrain.steps = [20, 40]\n"
                                      "[set]\neval.every = 0\n");
  ASSERT_TRUE(is_sweep_file(path));
  ASSERT_FALSE(is_sweep_file(base()));
  const SweepSpec spec = load_sweep_file(path);
  EXPECT_EQ(spec.name, "s");  // the file's name when the file gives none
  const auto members = expand_sweep(spec);
  // 2 learning rates x 2 seeds x 2 zipped positions, written out by hand.
  const Strings expected_names = {
      "s/optimizer.lr=0.5,run.seed=1,schedule.warmup=1,train.steps=20",
      "s/optimizer.lr=0.5,run.seed=1,schedule.warmup=2,train.steps=40",
      "s/optimizer.lr=0.5,run.seed=2,schedule.warmup=1,train.steps=20",
      "s/optimizer.lr=0.5,run.seed=2,schedule.warmup=2,train.steps=40",
      "s/optimizer.lr=0.25,run.seed=1,schedule.warmup=1,train.steps=20",
      "s/optimizer.lr=0.25,run.seed=1,schedule.warmup=2,train.steps=40",
      "s/optimizer.lr=0.25,run.seed=2,schedule.warmup=1,train.steps=20",
      "s/optimizer.lr=0.25,run.seed=2,schedule.warmup=2,train.steps=40",
  };
  ASSERT_EQ(members.size(), expected_names.size());
  for (size_t i = 0; i < members.size(); ++i)
    EXPECT_EQ(members[i].name, expected_names[i]) << i;
  EXPECT_EQ(members[5].overrides, Strings({"eval.every=0", "optimizer.lr=0.25", "run.seed=1",
                                           "schedule.warmup=2", "train.steps=40"}));
}

TEST_F(SweepSpecTest, CommandLineAxesSplitOnCommasAndKeepStringQuotes) {
  const SweepAxis axis = parse_axis("optimizer.type=\"adamw\",\"lion\"");
  EXPECT_EQ(axis.key, "optimizer.type");
  EXPECT_EQ(axis.values, Strings({"\"adamw\"", "\"lion\""}));
  SweepSpec spec{"cli", base(), {axis}, {}, {}};
  const auto members = expand_sweep(spec);
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[1].name, "cli/optimizer.type=lion");  // no quotes in the name
  EXPECT_EQ(members[1].overrides, Strings({"optimizer.type=\"lion\""}));
  EXPECT_NE(error_of([] { parse_axis("optimizer.lr"); }).find("is not section.key=v1,v2"),
            std::string::npos);
}

TEST_F(SweepSpecTest, MistakesAreCaughtBeforeAnyMemberRuns) {
  auto expand = [&](const std::string& name, const std::string& body) {
    return error_of([&] { expand_sweep(load_sweep_file(sweep_file(name, body))); });
  };
  EXPECT_NE(expand("typo", "[grid]\noptimizer.lrr = [1e-3]\n").find("did you mean 'optimizer.lr'?"),
            std::string::npos);
  EXPECT_NE(expand("nothing", "[set]\ntrain.steps = 2\n").find("the sweep varies nothing"),
            std::string::npos);
  EXPECT_NE(expand("unequal", "[zip]\ntrain.steps = [1, 2]\nschedule.warmup = [1]\n")
                .find("[zip] lists must have equal lengths"),
            std::string::npos);
  EXPECT_NE(
      expand("range", "[grid]\ntrain.steps = [10, -1]\n").find("'train.steps' is -1, out of range"),
      std::string::npos);
  const std::string key = error_of([&] { load_sweep_file(sweep_file("key", "gird = 3\n")); });
  EXPECT_NE(key.find("key.toml:2:1: unknown sweep key 'gird': did you mean 'grid'?"),
            std::string::npos)
      << key;
}

}  // namespace
}  // namespace kiln
