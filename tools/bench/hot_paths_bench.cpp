// The per-step costs Kiln adds around the model, each measured alone, and its attention kernels:
// - BM_ShardRead: tokens/s of the token loader (pread of each window) producing int64
//   micro-batches;
// - BM_MetricsRow: one metrics row into the run store (buffered, committed about once a second);
// - BM_MetricsCommit: one metrics row committed on its own (the worst case: a flush per step);
// - BM_SnapshotWrite: MB/s of a full snapshot (model, AdamW state, manifest, fsync, rename);
// - BM_GptAttention, BM_LlamaAttention: attention forward and backward, Kiln's fused kernel
//   against LibTorch's path.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <numeric>

#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/checkpoint/snapshot.h"
#include "core/config/config.h"
#include "core/data/shard.h"
#include "core/data/token_loader.h"
#include "core/layers/fused_attention.h"
#include "core/layers/rotary.h"
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

// Attention forward and backward, Kiln's fused kernel called directly (state.range(3) = 1)
// against the path model.kernels = "torch" takes: LibTorch's ops on 1.x, its
// scaled_dot_product_attention on 2.x. Arguments: rows, time, query heads, fused; head_dim 64.
// gpt's: q, k and v in one projection. llama's: the rotation, and a third as many key/value heads.
void BM_GptAttention(benchmark::State& state) {
  const int64_t rows = state.range(0), time = state.range(1), heads = state.range(2), dim = 64;
  torch::manual_seed(0);
  auto qkv = torch::randn({rows, time, 3 * heads * dim}).requires_grad_();
  auto upstream = torch::randn({rows, time, heads * dim});
  for (auto _ : state) {
    auto y = state.range(3) == 1 ? fused_causal_attention(qkv, heads)
                                 : causal_self_attention(qkv, heads, 0.0, true, false, 0);
    y.backward(upstream);
    benchmark::DoNotOptimize(qkv.grad().data_ptr<float>());
  }
}

void BM_LlamaAttention(benchmark::State& state) {
  const int64_t rows = state.range(0), time = state.range(1), heads = state.range(2), dim = 64;
  torch::manual_seed(0);
  auto q = torch::randn({rows, time, heads * dim}).requires_grad_();
  auto k = torch::randn({rows, time, heads / 3 * dim}).requires_grad_();
  auto v = torch::randn({rows, time, heads / 3 * dim}).requires_grad_();
  auto inv_freq = rotary_inverse_frequencies({dim});
  auto upstream = torch::randn({rows, time, heads * dim});
  for (auto _ : state) {
    auto y = state.range(3) == 1
                 ? fused_rotary_attention(q, k, v, heads, inv_freq)
                 : rotary_self_attention(q, k, v, heads, inv_freq, 0.0, true, false, 0);
    y.backward(upstream);
    benchmark::DoNotOptimize(q.grad().data_ptr<float>());
  }
}

void attention_shapes(benchmark::internal::Benchmark* b) {
  b->ArgsProduct({{16}, {64}, {12}, {0, 1}})
      ->ArgsProduct({{4}, {256}, {12}, {0, 1}})
      ->ArgsProduct({{1}, {1024}, {12}, {0, 1}})
      ->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_GptAttention)->Apply(attention_shapes);
BENCHMARK(BM_LlamaAttention)->Apply(attention_shapes);

}  // namespace
}  // namespace kiln
