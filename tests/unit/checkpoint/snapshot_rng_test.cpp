// A snapshot keeps every rank's RNG states and gives each rank its own back
// (core/checkpoint/snapshot.h); one written before per-rank states gives its one state to all.
#include <gtest/gtest.h>

#include <fstream>

#include <torch/utils.h>

#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/api/parallel.h"
#include "core/checkpoint/snapshot.h"
#include "core/config/config.h"
#include "core/util/fs.h"

namespace kiln {
namespace {

struct RankStates {
  std::vector<nlohmann::json> states;  // what capture_rng_states() saw under each seed
  std::vector<at::Tensor> draws;       // what the CPU generator drew next from there
};

RankStates seeded(std::initializer_list<uint64_t> seeds) {
  RankStates out;
  for (uint64_t seed : seeds) {
    torch::manual_seed(seed);
    out.states.push_back(capture_rng_states());
    out.draws.push_back(at::rand({8}));
  }
  return out;
}

struct Saved {
  ScratchDir dir;
  std::shared_ptr<Model> model;
  std::shared_ptr<torch::optim::Optimizer> optimizer;  // the sgd plugin
  SnapshotRef ref;

  explicit Saved(const RankStates& ranks) {
    ResolvedConfig c = load_config_text(
        "[model]\ntype = \"gpt\"\n", "t.toml",
        {"model.n_layer=1", "model.n_head=2", "model.n_embd=8", "model.block_size=8",
         "model.vocab_size=16", "optimizer.type=sgd", "optimizer.lr=0.1"});
    model = build_model(*ModelRegistry::create("gpt", c.params("model")));
    optimizer = OptimizerRegistry::create("sgd", c.params("optimizer"), model->parameters());
    SnapshotState state;
    state.world_size = static_cast<int64_t>(ranks.states.size());
    state.data_positions.resize(ranks.states.size());
    state.rng_by_rank = ranks.states;
    write_snapshot(dir.str(), "step_000001", *model, *optimizer, state);
    ref = list_snapshots(dir.str()).at(0);
  }

  // One process that says it is rank `rank` of a world, holding the whole state.
  struct AsRank : ParallelStrategy {
    explicit AsRank(int rank) : place(rank) {}
    int rank() const override { return place; }
    int place;
  };

  // What the CPU generator draws after loading as `rank`.
  at::Tensor draw_as(int rank) {
    torch::manual_seed(999);  // whatever was there before must not matter
    AsRank as(rank);
    load_snapshot(ref, *model, optimizer.get(), /*restore_rng=*/true, &as);
    return at::rand({8});
  }
};

TEST(RankRng, EachRankGetsItsOwnStatesBackAndAnExtraRankGetsRankZeros) {
  const RankStates ranks = seeded({11, 22});
  Saved saved(ranks);
  EXPECT_TRUE(at::equal(saved.draw_as(0), ranks.draws[0]));
  EXPECT_TRUE(at::equal(saved.draw_as(1), ranks.draws[1]));
  EXPECT_TRUE(at::equal(saved.draw_as(2), ranks.draws[0]));  // a world grown at resume
}

TEST(RankRng, ASnapshotWithOneStateFromBeforePerRankStatesGivesItToEveryRank) {
  const RankStates ranks = seeded({11, 22});
  Saved saved(ranks);
  // The earlier format: "rng", rank 0's states alone.
  const std::string path = saved.ref.path + "/state.json";
  nlohmann::json state = nlohmann::json::parse(std::ifstream(path));
  state["rng"] = state.at("rng_by_rank").at(0);
  state.erase("rng_by_rank");
  std::ofstream(path) << state.dump(1);
  EXPECT_TRUE(at::equal(saved.draw_as(1), ranks.draws[0]));
  SnapshotState loaded = load_snapshot(saved.ref, *saved.model, nullptr, false);
  EXPECT_EQ(loaded.rng_by_rank.size(), 1u);
}

}  // namespace
}  // namespace kiln
