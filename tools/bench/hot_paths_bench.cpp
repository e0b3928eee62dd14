// The per-step costs Kiln adds around the model, each measured alone:
//   BM_ShardRead       tokens/s of the token loader (pread of each window) producing int64
//   micro-batches BM_MetricsRow      one metrics row into the run store (buffered, committed ~once
//   a second) BM_MetricsCommit   one metrics row committed on its own (the worst case: a flush per
//   step) BM_SnapshotWrite   MB/s of a full snapshot (model, AdamW state, manifest, fsync, rename)
#include <benchmark/benchmark.h>

#include <filesystem>
#include <numeric>

#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/checkpoint/snapshot.h"
#include "core/config/config.h"
#include "core/data/shard.h"
#include "core/data/token_loader.h"
#include "core/store/runs/writer.h"
#include "core/util/fs.h"

namespace kiln {
namespace {

void BM_ShardRead(benchmark::State& state) {
  ScratchDir scratch;
  std::vector<uint16_t> tokens(16 << 20);
  std::iota(tokens.begin(), tokens.end(), 0);
  const std::string path = scratch / "train_000000.bin";
  write_shard(path, tokens);
  const int64_t batch = 16, seq = 1024;
  TokenLoader loader({{path}, batch, seq, 0, 1, 0, ShardFormat::kAuto});
  std::vector<int64_t> inputs(batch * seq), targets(batch * seq);
  for (auto _ : state) {
    loader.next(inputs.data(), targets.data());
    benchmark::DoNotOptimize(inputs.data());
  }
  state.SetItemsProcessed(state.iterations() * batch * seq);
}
BENCHMARK(BM_ShardRead);

void metrics_rows(benchmark::State& state, bool commit_each) {
  ScratchDir scratch;
  RunStore store(scratch / "kiln.db");
  const int64_t id =
      store.create_run(NewRun{"bench", "bench.toml", "[run]\n", "0", 0, 1, 0, "", "", "", "", ""});
  int64_t step = 0;
  for (auto _ : state) {
    ++step;
    MetricRow row;
    row.step = step;
    row.loss = 2.5;
    row.lr = 3e-4;
    row.grad_norm = 0.8;
    row.tokens_per_sec = 1e5;
    row.dt_ms = 100;
    row.tokens_seen = step * 2048;
    store.add_metric(id, row);
    if (commit_each) store.flush();
  }
  store.flush();
}
void BM_MetricsRow(benchmark::State& state) {
  metrics_rows(state, false);
}
void BM_MetricsCommit(benchmark::State& state) {
  metrics_rows(state, true);
}
BENCHMARK(BM_MetricsRow)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MetricsCommit)->Unit(benchmark::kMicrosecond);

void BM_SnapshotWrite(benchmark::State& state) {
  ScratchDir scratch;
  ResolvedConfig config = load_config_text(
      "[model]\ntype = \"gpt\"\nn_layer = 4\nn_embd = 256\nn_head = 4\nvocab_size = 8192\n"
      "block_size = 256\n",
      "bench.toml", {});
  auto model = build_model(*ModelRegistry::create("gpt", config.params("model")));
  auto optimizer =
      OptimizerRegistry::create("adamw", config.params("optimizer"), model->parameters());
  for (auto& p : model->parameters())
    p.mutable_grad() = torch::ones_like(p);
  optimizer->step();  // AdamW state exists, as in a real snapshot
  SnapshotState snapshot;
  int64_t bytes = 0;
  for (auto _ : state) {
    write_snapshot(scratch / "snapshots", "step_000001", *model, *optimizer, snapshot);
    for (const auto& f : std::filesystem::directory_iterator(scratch / "snapshots/step_000001")) {
      bytes += static_cast<int64_t>(f.file_size());
    }
  }
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_SnapshotWrite)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln
