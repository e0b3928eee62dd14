// checkpoint.async's writer (core/checkpoint/background_save.h): the snapshot it writes from host
// copies holds the state as it was when the save started, however training changes the tensors
// meanwhile, and a save that fails says so when waited for.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/checkpoint/background_save.h"
#include "core/checkpoint/snapshot.h"
#include "core/checkpoint/state_shards.h"
#include "core/checkpoint/weights_io.h"
#include "core/config/config.h"
#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {
namespace {

struct AdamTrainable {
  std::shared_ptr<Model> model;
  std::shared_ptr<torch::optim::Optimizer> optimizer;  // the adam plugin
};

AdamTrainable adam_gpt() {
  ResolvedConfig c =
      load_config_text("[model]\ntype = \"gpt\"\n", "t.toml",
                       {"model.n_layer=1", "model.n_head=2", "model.n_embd=8", "model.block_size=8",
                        "model.vocab_size=16", "optimizer.type=adam", "optimizer.lr=0.01"});
  AdamTrainable t;
  t.model = build_model(*ModelRegistry::create("gpt", c.params("model")));
  t.optimizer = OptimizerRegistry::create("adam", c.params("optimizer"), t.model->parameters());
  return t;
}

// One Adam step on a made-up loss: the weights and the moments change in place.
void train_a_step(AdamTrainable& t) {
  t.optimizer->zero_grad();
  at::Tensor loss = at::zeros({});
  for (const auto& p : t.model->parameters())
    loss = loss + (p * p).sum();
  loss.backward();
  t.optimizer->step();
}

std::map<std::string, at::Tensor> parameter_copies(const Model& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : model.named_parameters())
    out[item.key()] = item.value().detach().clone();
  return out;
}

TEST(BackgroundSave, TheSnapshotHoldsTheStateWhenTheSaveStarted) {
  ScratchDir dir;
  AdamTrainable t = adam_gpt();
  train_a_step(t);  // the optimizer has moments to save
  const auto before = parameter_copies(*t.model);
  SnapshotState state;
  state.data_positions.resize(1);
  state.step = 1;

  std::vector<StateSlice> host;
  copy_to_host(whole_state_slices(*t.model, t.optimizer.get(), true), host);
  const RankSnapshot mine{0, host, optimizer_settings(*t.optimizer, host)};
  BackgroundSave save;
  save.start([&] {
    commit_snapshot(dir.str(), "step_000001", state,
                    write_rank_files(dir.str(), "step_000001", mine));
  });
  EXPECT_TRUE(save.in_flight());
  for (int i = 0; i < 3; ++i)
    train_a_step(t);  // training goes on while the thread writes
  EXPECT_GE(save.wait(), 0.0);
  EXPECT_FALSE(save.in_flight());
  EXPECT_NE(parameter_copies(*t.model).begin()->second.sum().item<double>(),
            before.begin()->second.sum().item<double>());

  const SnapshotRef ref = list_snapshots(dir.str()).at(0);
  EXPECT_EQ(ref.label, "step_000001");
  verify_snapshot(ref);
  // The shard, read as a plain safetensors file, holds the weights of step 1, bit for bit.
  const auto read = read_weights(ref.path + "/" + state_shard_name(0));
  for (const auto& [name, expected] : before)
    EXPECT_TRUE(at::equal(read.at("model/" + name), expected)) << name;
}

TEST(BackgroundSave, ASaveThatFailsSaysSoWhenWaitedFor) {
  ScratchDir dir;
  std::ofstream(dir / "not_a_folder") << "x";
  AdamTrainable t = adam_gpt();
  SnapshotState state;
  state.data_positions.resize(1);
  const RankSnapshot mine{0, whole_state_slices(*t.model, t.optimizer.get(), true), {}};
  BackgroundSave save;
  save.start([&] { write_rank_files(dir / "not_a_folder", "step_000001", mine); });
  EXPECT_THROW(save.wait(), UserError);
  EXPECT_FALSE(save.in_flight());
  EXPECT_EQ(save.wait(), 0.0);  // nothing in flight any more
}

}  // namespace
}  // namespace kiln
