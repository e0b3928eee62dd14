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
  SweepSpec spec{"cli", base(), {axis}, {}, {}, {}};
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

TEST_F(SweepSpecTest, VariantsAreCrossedWithTheGridSlowestEachWithItsOwnKeys) {
  const std::string path = sweep_file("v",
                                      "seeds = [1, 2]\n"
                                      "[set]\neval.every = 0\n"
                                      "[[variant]]\nname = \"fast\"\noptimizer.lr = 0.5\n"
                                      "[[variant]]\noptimizer.type = \"lion\"\n"
                                      "optimizer.lr = 0.25\n");
  ASSERT_TRUE(is_sweep_file(path));
  const SweepSpec spec = load_sweep_file(path);
  ASSERT_EQ(spec.variants.size(), 2u);
  EXPECT_EQ(spec.variants[0].where, path + ":5:1");  // its [[variant]] line
  const auto members = expand_sweep(spec);
  // 2 variants x 2 seeds, the variant slowest; a variant without a name is named by its keys.
  const Strings expected_names = {
      "v/fast,run.seed=1",
      "v/fast,run.seed=2",
      "v/optimizer.lr=0.25,optimizer.type=lion,run.seed=1",
      "v/optimizer.lr=0.25,optimizer.type=lion,run.seed=2",
  };
  ASSERT_EQ(members.size(), expected_names.size());
  for (size_t i = 0; i < members.size(); ++i)
    EXPECT_EQ(members[i].name, expected_names[i]) << i;
  EXPECT_EQ(members[0].overrides, Strings({"eval.every=0", "optimizer.lr=0.5", "run.seed=1"}));
  EXPECT_EQ(members[3].overrides, Strings({"eval.every=0", "optimizer.lr=0.25",
                                           "optimizer.type=\"lion\"", "run.seed=2"}));
}

TEST_F(SweepSpecTest, VariantMistakesAreReportedAtTheirLine) {
  auto expand = [&](const std::string& name, const std::string& body) {
    return error_of([&] { expand_sweep(load_sweep_file(sweep_file(name, body))); });
  };
  const std::string typo = expand("typo", "[[variant]]\noptimizer.lrr = 1\n");
  EXPECT_EQ(typo.rfind(dir_ / "typo.toml:2:1: [[variant]] 'optimizer.lrr=1': ", 0), 0u) << typo;
  EXPECT_NE(typo.find("did you mean 'optimizer.lr'?"), std::string::npos) << typo;
  EXPECT_NE(expand("foreign", "[[variant]]\noptimizer.type = \"sgd\"\noptimizer.beta1 = 0.9\n")
                .find("unknown key 'optimizer.beta1': optimizer plugin 'sgd' takes"),
            std::string::npos);
  EXPECT_NE(expand("empty", "variant = []\n").find("'variant' must be a non-empty list of tables"),
            std::string::npos);
  EXPECT_NE(expand("values", "variant = [1]\n").find("each variant must be a table"),
            std::string::npos);
  EXPECT_NE(expand("nothing", "[[variant]]\nname = \"x\"\n").find("this [[variant]] sets nothing"),
            std::string::npos);
  EXPECT_NE(expand("bare", "[[variant]]\nlr = 1\n").find("'lr' is not section.key"),
            std::string::npos);
  EXPECT_NE(expand("list", "[[variant]]\noptimizer.lr = [1, 2]\n")
                .find("[[variant]] takes single values"),
            std::string::npos);
  EXPECT_NE(expand("twice", "[grid]\noptimizer.lr = [1, 2]\n[[variant]]\noptimizer.lr = 3\n")
                .find("twice.toml:4:1: [[variant]] sets 'optimizer.lr', which [grid] varies too"),
            std::string::npos);
  EXPECT_NE(expand("same",
                   "[[variant]]\nname = \"a\"\noptimizer.lr = 1\n"
                   "[[variant]]\nname = \"a\"\noptimizer.lr = 2\n")
                .find("two members of the sweep are named 'same/a'"),
            std::string::npos);
}

TEST_F(SweepSpecTest, ASweepFileExtendsAnotherKeyByKey) {
  sweep_file("common",
             "name = \"common\"\nseeds = [1]\n[grid]\noptimizer.lr = [0.1, 0.2]\n"
             "[set]\ntrain.steps = 5\n");
  const std::string child = dir_ / "child.toml";
  testing::write_text(child,
                      "extends = \"common.toml\"\nname = \"child\"\n"
                      "[grid]\noptimizer.lr = [0.3]\n[set]\neval.every = 0\n");
  ASSERT_TRUE(is_sweep_file(child));
  const auto members = expand_sweep(load_sweep_file(child));
  ASSERT_EQ(members.size(), 1u);
  EXPECT_EQ(members[0].name, "child/optimizer.lr=0.3,run.seed=1");
  EXPECT_EQ(members[0].overrides,
            Strings({"train.steps=5", "eval.every=0", "optimizer.lr=0.3", "run.seed=1"}));
  const std::string wrong = dir_ / "wrong.toml";
  testing::write_text(wrong, "extends = \"base.toml\"\n[grid]\noptimizer.lr = [0.3]\n");
  const std::string error = error_of([&] { load_sweep_file(wrong); });
  EXPECT_NE(error.find("wrong.toml:1:11: extends 'base.toml': '" + base() +
                       "' is an experiment file (it has [model]), not a sweep file"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace kiln
