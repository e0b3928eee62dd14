// The memory floor a run is checked against before its model is built (core/train/memory_check.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/api/optimizer.h"
#include "core/config/config.h"
#include "core/train/memory_check.h"
#include "core/util/error.h"

namespace kiln {
namespace {

ModelPlan small_plan() {
  ModelPlan plan;
  plan.description = "a test model";
  plan.parameters = 1000;
  plan.buffers = 24;
  plan.vocab_size = 50;
  plan.context_length = 8;
  return plan;
}

TEST(MemoryFloor, CountsWeightsGradientsStateAndLogitsInFloat32) {
  const MemoryFloor floor = training_floor(small_plan(), 2.0, 2, 4 * 8);
  EXPECT_EQ(floor.weights, 4.0 * (1000 + 24));  // every rank holds the whole model
  EXPECT_EQ(floor.gradients, 4.0 * 1000 / 2);   // sharded over the 2 ranks at best
  EXPECT_EQ(floor.optimizer_state, 4.0 * 2 * 1000 / 2);
  EXPECT_EQ(floor.logits, 2 * 4.0 * 4 * 8 * 50);  // logits and their gradient
  EXPECT_EQ(floor.total(), 4096.0 + 2000 + 4000 + 12800);
  const MemoryFloor loading = loading_floor(small_plan());
  EXPECT_EQ(loading.total(), 4.0 * 1024);
}

// The state each optimizer keeps per parameter, as its algorithm defines it: Adam(W) two moving
// averages (Kingma and Ba, Algorithm 1), Lion one momentum (Chen et al. 2023, Algorithm 2), SGD
// a momentum buffer only with momentum.
TEST(MemoryFloor, MeasuresTheOptimizersStatePerParameter) {
  struct Case {
    std::string type;
    std::vector<std::string> sets;
    double expected;
  };
  const std::vector<Case> cases = {{"adamw", {}, 2},
                                   {"adam", {}, 2},
                                   {"lion", {}, 1},
                                   {"sgd", {}, 0},
                                   {"sgd", {"optimizer.momentum=0.9"}, 1}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.type + (c.sets.empty() ? "" : " " + c.sets.front()));
    const ResolvedConfig config = load_config_text(
        "[model]\ntype = \"gpt\"\n[optimizer]\ntype = \"" + c.type + "\"\n", "t.toml", c.sets);
    torch::Tensor parameter = torch::zeros({256, 256});
    parameter.requires_grad_();
    auto optimizer = OptimizerRegistry::create(c.type, config.params("optimizer"),
                                               std::vector<torch::Tensor>{parameter});
    parameter.mutable_grad() = torch::ones_like(parameter);
    optimizer->step();
    EXPECT_DOUBLE_EQ(state_per_parameter(*optimizer, parameter.numel()), c.expected);
  }
}

TEST(MemoryFloor, RefusesAFloorAboveTheUsableMemoryAndSaysWhatToChange) {
  const ResolvedConfig config = load_config_text("[model]\ntype = \"gpt\"\n", "m.toml", {});
  const ModelPlan plan = small_plan();
  const MemoryFloor model_bound = training_floor(plan, 2.0, 1, 1);
  const MemoryFloor batch_bound = training_floor(plan, 2.0, 1, 64 * 8);
  const c10::Device cpu(c10::kCPU);
  EXPECT_NO_THROW(check_memory_floor(config, plan, model_bound, cpu, model_bound.total()));
  EXPECT_NO_THROW(check_memory_floor(config, plan, model_bound, cpu, 0));  // unknown: no check
  auto message = [&](const MemoryFloor& floor) {
    try {
      check_memory_floor(config, plan, floor, cpu, 1000);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no UserError";
    return std::string();
  };
  const std::string model_message = message(model_bound);
  EXPECT_EQ(model_message.rfind("m.toml:2:8: training a test model", 0), 0u) << model_message;
  EXPECT_NE(model_message.find("of memory"), std::string::npos) << model_message;
  EXPECT_NE(model_message.find("make the model smaller"), std::string::npos) << model_message;
  EXPECT_NE(message(batch_bound).find("lower train.micro_batch"), std::string::npos);
  EXPECT_NE(message(loading_floor(plan)).find("its weights alone take 4 KiB"), std::string::npos);
}

}  // namespace
}  // namespace kiln
