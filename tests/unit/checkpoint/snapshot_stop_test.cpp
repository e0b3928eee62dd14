// A snapshot being written when a second stop signal arrives (core/checkpoint/snapshot.h): it is
// dropped, with its temporary folder, and the snapshots before it stay as they were; resume
// removes a temporary folder that a killed writer left.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <set>
#include <string>

#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/checkpoint/snapshot.h"
#include "core/config/config.h"
#include "core/util/fs.h"
#include "core/util/stop_signal.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.insert(entry.path().filename().string());
  return names;
}

struct Trainable {
  std::shared_ptr<Model> model;
  std::shared_ptr<torch::optim::Optimizer> optimizer;  // the sgd plugin
};

Trainable small_gpt() {
  ResolvedConfig c =
      load_config_text("[model]\ntype = \"gpt\"\n", "t.toml",
                       {"model.n_layer=1", "model.n_head=2", "model.n_embd=8", "model.block_size=8",
                        "model.vocab_size=16", "optimizer.type=sgd", "optimizer.lr=0.1"});
  Trainable t;
  t.model = build_model(*ModelRegistry::create("gpt", c.params("model")));
  t.optimizer = OptimizerRegistry::create("sgd", c.params("optimizer"), t.model->parameters());
  return t;
}

TEST(SnapshotStop, ASecondStopSignalDropsTheSnapshotBeingWritten) {
  ScratchDir dir;
  Trainable t = small_gpt();
  SnapshotState state;
  state.data_positions.resize(1);
  write_snapshot(dir.str(), "step_000001", *t.model, *t.optimizer, state);
  {
    const StopSignal stop(StopSignal::Second::kAbandon);
    std::raise(SIGINT);
    std::raise(SIGINT);
    EXPECT_THROW(write_snapshot(dir.str(), "step_000002", *t.model, *t.optimizer, state),
                 SnapshotAbandoned);
  }
  EXPECT_EQ(entries(dir.str()), std::set<std::string>{"step_000001"});
  verify_snapshot(list_snapshots(dir.str()).at(0));
  // With the StopSignal gone, snapshots are written again.
  write_snapshot(dir.str(), "step_000002", *t.model, *t.optimizer, state);
  EXPECT_EQ(list_snapshots(dir.str()).size(), 2u);
}

TEST(SnapshotStop, UnfinishedSnapshotsAreRemovedAndNothingElse) {
  ScratchDir dir;
  fs::create_directories(dir / "step_000004");
  fs::create_directories(dir / "step_000008.tmp");
  fs::create_directories(dir / "best_000006.tmp");
  EXPECT_EQ(remove_unfinished_snapshots(dir.str()).size(), 2u);
  EXPECT_EQ(entries(dir.str()), std::set<std::string>{"step_000004"});
  EXPECT_TRUE(remove_unfinished_snapshots(dir / "missing").empty());
}

}  // namespace
}  // namespace kiln
