// Loading a snapshot (a resume) puts its weights into the model's own parameters: the values
// come back, and the gradient-accumulator hooks that ddp, zero and fsdp overlap their
// communication with (core/distributed/data_parallel.h) still fire afterwards. Module::load alone
// replaces the accumulators on LibTorch 1.13, which left a resumed zero stage 2 holding every
// gradient and a resumed ddp communicating only after backward.
#include <gtest/gtest.h>

#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/checkpoint/snapshot.h"
#include "core/config/config.h"
#include "core/distributed/gradient_buckets.h"
#include "core/util/fs.h"

namespace kiln {
namespace {

TEST(SnapshotLoad, WeightsComeBackIntoTheSameParametersWhoseHooksStillFire) {
  ResolvedConfig c =
      load_config_text("[model]\ntype = \"gpt\"\n", "t.toml",
                       {"model.n_layer=1", "model.n_head=2", "model.n_embd=8", "model.block_size=8",
                        "model.vocab_size=16", "optimizer.type=sgd", "optimizer.lr=0.1"});
  auto model = build_model(*ModelRegistry::create("gpt", c.params("model")));
  auto optimizer = OptimizerRegistry::create("sgd", c.params("optimizer"), model->parameters());
  const std::vector<at::Tensor> parameters = model->parameters();
  size_t fired = 0;
  auto hooked = on_gradient_accumulated(parameters, [&](size_t) { ++fired; });

  ScratchDir dir;
  SnapshotState state;
  state.world_size = 1;
  state.data_positions.resize(1);
  write_snapshot(dir.str(), "step_000001", *model, *optimizer, state);
  std::vector<at::Tensor> saved;
  for (const auto& p : parameters)
    saved.push_back(p.detach().clone());
  {
    at::NoGradGuard no_grad;
    for (const auto& p : parameters)
      p.detach().add_(1.0);
  }
  load_snapshot(list_snapshots(dir.str()).at(0), *model, optimizer.get(), /*restore_rng=*/false);

  for (size_t i = 0; i < parameters.size(); ++i)
    EXPECT_TRUE(at::equal(parameters[i], saved[i])) << "parameter " << i;
  model->forward(torch::randint(0, 16, {2, 8}, torch::kLong)).sum().backward();
  EXPECT_EQ(fired, parameters.size());
}

}  // namespace
}  // namespace kiln
