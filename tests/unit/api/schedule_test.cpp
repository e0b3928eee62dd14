#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/api/schedule.h"
#include "core/config/config.h"
#include "core/config/registry.h"
#include "core/util/error.h"

namespace kiln {
namespace {

std::shared_ptr<Schedule> make(const std::string& type, const std::vector<std::string>& sets,
                               double lr, int64_t steps) {
  std::vector<std::string> all = {"schedule.type=" + type};
  all.insert(all.end(), sets.begin(), sets.end());
  ResolvedConfig c = load_config_text("[model]\ntype = \"gpt\"\n", "t.toml", all);
  return ScheduleRegistry::create(type, c.params("schedule"), lr, steps);
}

// The reference get_lr of the GPT-2 training script (seed 000), transcribed as written.
double reference_lr(int64_t step) {
  const double max_lr = 6e-4, min_lr = max_lr * 0.1;
  const int64_t warmup_steps = 10, max_steps = 50;
  if (step < warmup_steps) return max_lr * (step + 1) / warmup_steps;
  if (step > max_steps) return min_lr;
  double decay_ratio = double(step - warmup_steps) / (max_steps - warmup_steps);
  double coeff = 0.5 * (1.0 + std::cos(M_PI * decay_ratio));
  return min_lr + coeff * (max_lr - min_lr);
}

TEST(Schedule, CosineReproducesTheReferenceFormulaAtEveryStep) {
  auto s = make("cosine", {"schedule.warmup=10", "schedule.min_lr_ratio=0.1"}, 6e-4, 50);
  for (int64_t step = 0; step < 60; ++step) {
    EXPECT_NEAR(s->lr(step), reference_lr(step), 1e-15) << "step " << step;
  }
  EXPECT_DOUBLE_EQ(s->lr(0), 6e-5);   // warmup starts at lr / warmup
  EXPECT_DOUBLE_EQ(s->lr(9), 6e-4);   // and reaches the peak at its last step
  EXPECT_DOUBLE_EQ(s->lr(50), 6e-5);  // the floor at train.steps
}

TEST(Schedule, CosineRefusesWarmupAsLongAsTheRun) {
  EXPECT_THROW(make("cosine", {"schedule.warmup=50"}, 1e-3, 50), std::exception);
}

TEST(Schedule, ConstantWarmsUpLinearlyThenHolds) {
  auto s = make("constant", {"schedule.warmup=4"}, 1e-3, 100);
  EXPECT_DOUBLE_EQ(s->lr(0), 0.25e-3);
  EXPECT_DOUBLE_EQ(s->lr(2), 0.75e-3);
  EXPECT_DOUBLE_EQ(s->lr(3), 1e-3);
  EXPECT_DOUBLE_EQ(s->lr(99), 1e-3);
  EXPECT_DOUBLE_EQ(make("constant", {}, 2e-3, 10)->lr(0), 2e-3);
}

TEST(Schedule, LinearFallsToTheFloorAtTheLastStep) {
  auto s = make("linear", {"schedule.warmup=10", "schedule.min_lr_ratio=0.1"}, 1.0, 110);
  EXPECT_DOUBLE_EQ(s->lr(0), 0.1);
  EXPECT_DOUBLE_EQ(s->lr(9), 1.0);
  EXPECT_DOUBLE_EQ(s->lr(10), 1.0);
  for (int64_t step = 10; step <= 110; ++step) {
    EXPECT_NEAR(s->lr(step), 1.0 - 0.9 * (step - 10) / 100.0, 1e-15) << step;
  }
  EXPECT_DOUBLE_EQ(s->lr(500), 0.1);
}

TEST(Schedule, StepMultipliesByGammaEveryStepSize) {
  auto s = make("step", {"schedule.step_size=10", "schedule.gamma=0.95"}, 5.0, 100);
  for (int64_t step = 0; step < 100; ++step) {
    EXPECT_NEAR(s->lr(step), 5.0 * std::pow(0.95, step / 10), 1e-15) << step;
  }
  auto warm = make("step", {"schedule.step_size=10", "schedule.warmup=5"}, 1.0, 100);
  EXPECT_DOUBLE_EQ(warm->lr(0), 0.2);
  EXPECT_DOUBLE_EQ(warm->lr(14), 1.0);
  EXPECT_DOUBLE_EQ(warm->lr(15), 0.95);
}

TEST(Schedule, WsdWarmsUpHoldsThenDecays) {
  auto s = make("wsd",
                {"schedule.warmup=10", "schedule.decay_fraction=0.2", "schedule.min_lr_ratio=0.0"},
                2.0, 100);
  EXPECT_DOUBLE_EQ(s->lr(4), 1.0);
  for (int64_t step = 10; step < 80; ++step)
    EXPECT_DOUBLE_EQ(s->lr(step), 2.0) << step;
  for (int64_t step = 80; step <= 100; ++step) {
    EXPECT_NEAR(s->lr(step), 2.0 * (1.0 - (step - 80) / 20.0), 1e-15) << step;
  }
  EXPECT_THROW(make("wsd", {"schedule.warmup=90", "schedule.decay_fraction=0.2"}, 1.0, 100),
               std::exception);
}

// The three decay shapes from the peak (2.0) to min_lr_ratio x peak (0.2) over steps 80-100, as
// their formulas give them: linear, half a cosine, and Hägele et al.'s 1 - sqrt(progress).
TEST(Schedule, WsdDecaysLinearlyAlongACosineOrAsOneMinusTheSquareRoot) {
  const double pi = std::acos(-1.0);
  const std::vector<std::pair<std::string, std::function<double(double)>>> shapes = {
      {"linear", [](double p) { return 1.0 - p; }},
      {"cosine", [pi](double p) { return (1.0 + std::cos(pi * p)) / 2.0; }},
      {"1-sqrt", [](double p) { return 1.0 - std::sqrt(p); }}};
  for (const auto& [shape, left] : shapes) {
    auto s = make("wsd",
                  {"schedule.decay_fraction=0.2", "schedule.min_lr_ratio=0.1",
                   "schedule.decay_shape=\"" + shape + "\""},
                  2.0, 100);
    EXPECT_DOUBLE_EQ(s->lr(79), 2.0) << shape;
    for (int64_t step = 80; step <= 100; ++step) {
      const double progress = (step - 80) / 20.0;
      EXPECT_NEAR(s->lr(step), 0.2 + 1.8 * left(progress), 1e-14) << shape << " step " << step;
    }
  }
}

TEST(Schedule, InverseSqrtIsContinuousAfterWarmup) {
  auto s = make("inverse_sqrt", {"schedule.warmup=16"}, 1.0, 1000);
  EXPECT_DOUBLE_EQ(s->lr(15), 1.0);
  for (int64_t step = 16; step < 1000; step += 7) {
    EXPECT_NEAR(s->lr(step), std::sqrt(16.0 / (step + 1)), 1e-15) << step;
  }
}

// The cooldown answers of wsd, against its definition written out here: the decay takes the last
// round(decay_fraction x steps) steps, and a branch from step S over N steps is the schedule of a
// run of S + N steps whose decay is those N steps (warmup and peak as the trunk's, then a linear
// fall from the peak to min_lr_ratio x peak over steps S..S+N).
TEST(Schedule, WsdAnswersWhereItsDecayStartsAndHowABranchCoolsDown) {
  const ScheduleCooldown* wsd = ScheduleCooldowns::find("wsd");
  ASSERT_NE(wsd, nullptr);
  const auto params = [](const std::string& fraction) {
    return load_config_text("[model]\ntype = \"gpt\"\n", "t.toml",
                            {"schedule.type=\"wsd\"", "schedule.warmup=4",
                             "schedule.min_lr_ratio=0.1", "schedule.decay_fraction=" + fraction})
        .params("schedule");
  };
  EXPECT_EQ(wsd->decay_start(params("0.2"), 100), 80);
  EXPECT_EQ(wsd->decay_start(params("0.15"), 30), 25);  // 4.5 decay steps round to 5
  EXPECT_EQ(wsd->decay_start(params("0"), 30), 30);
  EXPECT_EQ(wsd->decay_start(params("1"), 30), 0);
  const int64_t from = 9, steps = 3;
  const auto cooled = wsd->cooled(params("0.2"), 2.0, from, steps);
  for (int64_t step = 0; step <= from + steps + 2; ++step) {
    const double progress = std::min(1.0, (step - from) / 3.0);
    const double want = step < 4      ? 2.0 * (step + 1) / 4.0
                        : step < from ? 2.0
                                      : 2.0 * (0.1 + 0.9 * (1.0 - progress));
    EXPECT_NEAR(cooled->lr(step), want, 1e-15) << "step " << step;
  }
  // A branch inside the warmup would overlap it.
  EXPECT_THROW(wsd->cooled(params("0.2"), 2.0, 3, 2), ParamError);
  EXPECT_EQ(wsd->later_decay, "lower schedule.decay_fraction");
}

// Only a schedule whose lr holds its peak between warmup and decay can be branched and cooled;
// those that fall from the warmup's end (or never) answer nothing, and a refusal names wsd.
TEST(Schedule, OnlySchedulesWithAStablePhaseCoolDown) {
  for (const char* falls : {"constant", "cosine", "linear", "step", "inverse_sqrt"}) {
    EXPECT_EQ(ScheduleCooldowns::find(falls), nullptr) << falls;
  }
  EXPECT_EQ(ScheduleCooldowns::names(), (std::vector<std::string>{"wsd"}));
  EXPECT_EQ(ScheduleCooldowns::names_text(false), "wsd");
  EXPECT_EQ(ScheduleCooldowns::names_text(true), "\"wsd\"");
}

TEST(Registry, ListsEveryKindWithItsPluginsAndParameters) {
  const Catalog& catalog = Catalog::global();
  for (const char* kind :
       {"model", "optimizer", "schedule", "precision", "parallel", "data", "tokenizer"}) {
    EXPECT_FALSE(catalog.plugins(kind).empty()) << kind;
  }
  const PluginSpec* gpt = catalog.find("model", "gpt");
  ASSERT_NE(gpt, nullptr);
  std::vector<std::string> names;
  for (const auto& p : gpt->params) {
    names.push_back(p.name);
    EXPECT_FALSE(p.doc.empty()) << p.name;
  }
  for (const char* key :
       {"n_layer", "n_head", "n_embd", "block_size", "vocab_size", "dropout", "bias"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), key), names.end()) << key;
  }
  EXPECT_NE(catalog.find("optimizer", "sgd"), nullptr);
  EXPECT_NE(catalog.find("schedule", "cosine"), nullptr);
  EXPECT_EQ(catalog.default_for("precision")->name, "fp32");
  EXPECT_EQ(catalog.default_for("parallel")->name, "single");
}

}  // namespace
}  // namespace kiln
