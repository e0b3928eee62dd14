// Sweep files and their expansion into members, in process: no run is started. Running the
// members through the real binary: tests/e2e/sweep_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/app/sweeps/spec.h"
#include "core/app/sweeps/spec_file.h"
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

// The value of `key` a member's overrides give.
std::string value_of(const SweepMember& member, const std::string& key) {
  for (const auto& o : member.overrides)
    if (o.rfind(key + "=", 0) == 0) return o.substr(key.size() + 1);
  return "";
}

// |count - n p| within 4 standard deviations of a binomial(n, p): a fair sampler fails this
// about once in 16,000 tries, and the draws are fixed by the seed, so it never flakes.
void expect_binomial(int64_t count, int64_t n, double p, const std::string& what) {
  const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  EXPECT_LE(std::abs(static_cast<double>(count) - static_cast<double>(n) * p), 4 * sd)
      << what << ": " << count << " of " << n;
}

TEST_F(SweepSpecTest, RandomSearchDrawsEachKeyFromItsDistributionByTheSeed) {
  const std::string space =
      "[space]\noptimizer.lr = { log_uniform = [1e-4, 1e-2] }\n"
      "schedule.warmup = { int_uniform = [0, 3] }\n"
      "optimizer.type = { choice = [\"adamw\", \"lion\"] }\n";
  const std::string path =
      sweep_file("r", "[search]\ntype = \"random\"\ntrials = 400\nseed = 7\n" + space);
  const auto members = expand_sweep(load_sweep_file(path));
  ASSERT_EQ(members.size(), 400u);
  EXPECT_EQ(members[17].name.rfind("r/trial=17,optimizer.lr=", 0), 0u) << members[17].name;
  int64_t below_midpoint = 0, lion = 0;
  std::vector<int64_t> warmups(4, 0);
  for (const auto& m : members) {
    const double lr = std::stod(value_of(m, "optimizer.lr"));
    ASSERT_GE(lr, 1e-4);
    ASSERT_LE(lr, 1e-2);
    below_midpoint += lr < 1e-3;  // the log-midpoint: half of a log-uniform lies below it
    const int warmup = std::stoi(value_of(m, "schedule.warmup"));
    ASSERT_GE(warmup, 0);
    ASSERT_LE(warmup, 3);
    ++warmups[static_cast<size_t>(warmup)];
    lion += value_of(m, "optimizer.type") == "\"lion\"";
  }
  expect_binomial(below_midpoint, 400, 0.5, "learning rates below 1e-3");
  expect_binomial(lion, 400, 0.5, "lion");
  for (int w = 0; w < 4; ++w)
    expect_binomial(warmups[static_cast<size_t>(w)], 400, 0.25, "warmup " + std::to_string(w));

  // A pure function of (seed, trial, key): the same again; another seed, other draws; a key
  // added to [space] leaves the others' draws alone.
  EXPECT_EQ(expand_sweep(load_sweep_file(path))[123].overrides, members[123].overrides);
  const auto reseeded = expand_sweep(load_sweep_file(
      sweep_file("r2", "[search]\ntype = \"random\"\ntrials = 400\nseed = 8\n" + space)));
  EXPECT_NE(value_of(reseeded[5], "optimizer.lr"), value_of(members[5], "optimizer.lr"));
  const auto wider = expand_sweep(load_sweep_file(
      sweep_file("r3", "[search]\ntype = \"random\"\ntrials = 400\nseed = 7\n" + space +
                           "optimizer.weight_decay = { uniform = [0.0, 0.2] }\n")));
  for (size_t i = 0; i < 400; i += 37)
    EXPECT_EQ(value_of(wider[i], "optimizer.lr"), value_of(members[i], "optimizer.lr")) << i;
}

// Sweeps of seeds 1, 2 and 3 draw 27 trials each, and no trial of one is a trial of another: the
// draws hash (seed, trial, key) as a chain, not as a symmetric combination (where trial t of seed
// s was trial s of seed t).
TEST_F(SweepSpecTest, SweepSeedsOneTwoAndThreeShareNoTrial) {
  SweepDistribution wide;  // a trillion values: two draws that differ land apart
  wide.key = "train.seed";
  wide.kind = SweepDistribution::Kind::kIntUniform;
  wide.low = 0;
  wide.high = 1e12;
  std::set<std::string> seen;
  for (int64_t seed = 1; seed <= 3; ++seed) {
    for (int64_t trial = 0; trial < 27; ++trial)
      EXPECT_TRUE(seen.insert(sample_value(wide, seed, trial)).second)
          << "seed " << seed << " trial " << trial << " repeats a draw";
  }
  EXPECT_NE(sample_value(wide, 1, 2), sample_value(wide, 2, 1));
}

TEST_F(SweepSpecTest, RandomTrialsAreCrossedWithSeedsAndVariants) {
  const auto members = expand_sweep(
      load_sweep_file(sweep_file("c",
                                 "seeds = [1, 2]\n[search]\ntype = \"random\"\ntrials = 3\n"
                                 "[space]\noptimizer.lr = { log_uniform = [1e-4, 1e-2] }\n"
                                 "[[variant]]\nname = \"adamw\"\noptimizer.type = \"adamw\"\n"
                                 "[[variant]]\nname = \"lion\"\noptimizer.type = \"lion\"\n")));
  ASSERT_EQ(members.size(), 12u);  // 2 variants x 2 seeds x 3 trials
  EXPECT_EQ(members[0].name.rfind("c/adamw,run.seed=1,trial=0,optimizer.lr=", 0), 0u);
  EXPECT_EQ(members[11].name.rfind("c/lion,run.seed=2,trial=2,optimizer.lr=", 0), 0u);
  // A trial is one configuration: every seed and variant of it gets the same draw.
  EXPECT_EQ(value_of(members[1], "optimizer.lr"), value_of(members[10], "optimizer.lr"));
}

// [search] metric: one the members log, checked against the base with [set] applied; it orders
// the summary by its best value.
TEST_F(SweepSpecTest, TheSearchMetricIsOneTheMembersLog) {
  const std::string head = "seeds = [1, 2]\n[search]\nmetric = ";
  auto expand = [&](const std::string& body) {
    return expand_sweep(load_sweep_file(sweep_file("m", head + body)));
  };
  EXPECT_EQ(expand("\"loss\"\n").size(), 2u);
  EXPECT_NE(error_of([&] { expand("\"val_loss\"\n"); })
                .find("m.toml:4:10: metric val_loss is never logged: the base experiment has "
                      "eval.every = 0"),
            std::string::npos);
  EXPECT_EQ(expand("\"val_loss\"\n[set]\neval.every = 5\n").size(), 2u);
  EXPECT_NE(error_of([&] { expand("\"perplexity\"\n"); }).find("is not one the members log"),
            std::string::npos);
  testing::write_text(dir_ / "cloze.jsonl",
                      "{\"context\": \"a\", \"choices\": [\" b\", \" c\"], \"label\": 0}\n");
  testing::write_text(dir_ / "cloze.toml", "kind = \"choice\"\nitems = \"cloze.jsonl\"\n");
  const std::string tasks = "[set]\neval.tasks = \"" + (dir_ / "cloze.toml") + "\"\n";
  EXPECT_NE(error_of([&] { expand("\"cloze.acc\"\n"); })
                .find("metric 'cloze.acc' is never logged: the base experiment's eval.tasks has no "
                      "task"),
            std::string::npos);
  EXPECT_EQ(expand("\"cloze.acc_norm\"\nmode = \"max\"\n" + tasks).size(), 2u);
  EXPECT_NE(error_of([&] {
              expand("\"cloze.exact_match\"\n" + tasks);
            }).find("task 'cloze' scores acc, acc_norm and acc_bytes, not exact_match"),
            std::string::npos);

  SweepSearch search;
  EXPECT_EQ(search_sort_key(search), "");
  search.metric = "val_loss";
  EXPECT_EQ(search_sort_key(search), "min(val_loss)");
  search.metric = "cloze.acc";
  search.maximize = true;
  EXPECT_EQ(search_sort_key(search), "-max(cloze.acc)");
}

}  // namespace
}  // namespace kiln
