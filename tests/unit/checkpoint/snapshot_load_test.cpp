// Loading a snapshot (a resume) puts its weights into the model's own parameters: the values
// come back, and the gradient-accumulator hooks that ddp, zero and fsdp overlap their
// communication with (core/distributed/data_parallel.h) still fire afterwards. Module::load alone
// replaces the accumulators on LibTorch 1.13, which left a resumed zero stage 2 holding every
// gradient and a resumed ddp communicating only after backward.
#include <gtest/gtest.h>

#include <fstream>

#include <fmt/format.h>
#include <torch/serialize/output-archive.h>
#include <nlohmann/json.hpp>
#define XXH_INLINE_ALL
#include <xxhash.h>

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

// A snapshot as Kiln wrote it before shards (manifest format 1): model.pt and optimizer.pt, the
// model and the optimizer each saved whole by LibTorch's own serializer. It loads, weights and
// optimizer state (adamw's moments and step count) equal to what was saved.
TEST(SnapshotLoad, ASnapshotOfWholeLibTorchArchivesFromAnOlderKilnStillLoads) {
  ResolvedConfig c =
      load_config_text("[model]\ntype = \"gpt\"\n", "t.toml",
                       {"model.n_layer=1", "model.n_head=2", "model.n_embd=8", "model.block_size=8",
                        "model.vocab_size=16", "optimizer.type=adamw", "optimizer.lr=0.01"});
  const auto make = [&] {
    auto model = build_model(*ModelRegistry::create("gpt", c.params("model")));
    auto optimizer = OptimizerRegistry::create("adamw", c.params("optimizer"), model->parameters());
    return std::make_pair(model, optimizer);
  };
  auto [model, optimizer] = make();
  model->forward(torch::randint(0, 16, {2, 8}, torch::kLong)).sum().backward();
  optimizer->step();
  ScratchDir dir;
  const std::string folder = dir.str() + "/step_000001";
  std::filesystem::create_directories(folder);
  SnapshotState state;
  state.step = 1;
  state.data_positions.resize(1);
  nlohmann::json files = nlohmann::json::object();
  const auto listed = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(folder + "/" + name, std::ios::binary) << bytes;
    files[name] = {{"bytes", bytes.size()},
                   {"xxh3", fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size()))}};
  };
  const auto archive_bytes = [](const auto& saved) {
    torch::serialize::OutputArchive archive;
    saved.save(archive);
    std::ostringstream bytes;
    archive.save_to(bytes);
    return bytes.str();
  };
  listed("model.pt", archive_bytes(*model));
  listed("optimizer.pt", archive_bytes(*optimizer));
  listed("state.json", state_to_json(state).dump());
  std::ofstream(folder + "/manifest.json")
      << nlohmann::json{{"format", 1}, {"files", files}}.dump();

  auto [fresh, fresh_optimizer] = make();
  const SnapshotRef ref = list_snapshots(dir.str()).at(0);
  verify_snapshot(ref);
  EXPECT_EQ(load_snapshot(ref, *fresh, fresh_optimizer.get(), false).step, 1);
  const auto before = model->parameters(), after = fresh->parameters();
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(at::equal(before[i], after[i])) << "parameter " << i;
    const auto saved = parameter_state(*optimizer, before[i]);
    const auto loaded = parameter_state(*fresh_optimizer, after[i]);
    ASSERT_EQ(saved.size(), loaded.size());
    for (size_t k = 0; k < saved.size(); ++k)
      EXPECT_TRUE(at::equal(*saved[k], *loaded[k])) << "parameter " << i << " state " << k;
  }
}

}  // namespace
}  // namespace kiln
