// A fixture for tests that drive the kiln binary: a small corpus prepared in a scratch
// directory, and a tiny GPT experiment over it that trains in about a second.
#pragma once

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "test_util.h"

namespace kiln::testing {

class TinyRun : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text;
    for (int i = 0; i < 300; ++i) {
      text += fmt::format("In the beginning was the word number {}, and the word was {}.\n", i,
                          i % 7 == 0 ? "light" : "good");
    }
    write_text(dir_ / "corpus.txt", text);
    auto prepared = run_kiln(
        fmt::format("prepare {} --out {} --val-fraction 0.1", dir_ / "corpus.txt", dir_ / "data"));
    ASSERT_EQ(prepared.exit_code, 0) << prepared.output;
  }

  // A tiny GPT on the prepared corpus; `extra` appends TOML lines to the file.
  std::string experiment(const std::string& extra = "") {
    const std::string path = dir_ / "tiny.toml";
    write_text(path, fmt::format(R"([run]
db = "{}"
out_dir = "{}"
threads = 1

[model]
type = "gpt"
n_layer = 2
n_head = 2
n_embd = 32
block_size = 32
vocab_size = 64

[data]
train = "{}/train_*.bin"
val = "{}/val_*.bin"

[train]
steps = 30
micro_batch = 8
seq_len = 32

[optimizer]
lr = 1e-2
{}
[eval]
every = 10
steps = 2
{})",
                                 db(), dir_ / "runs", dir_ / "data", dir_ / "data",
                                 checkpoint_section(), extra));
    return path;
  }

  // The tiny experiment as a blend (data "blend") of two sources: the prepared train shards
  // (weight 3) and the val shard (weight 1).
  std::string blend_experiment() {
    const std::string path = experiment();
    std::string text = testing::read_file(path);
    const std::string data = fmt::format(
        "[data]\ntrain = \"{0}/train_*.bin\"\nval = \"{0}/val_*.bin\"\n", dir_ / "data");
    const size_t at = text.find(data);
    EXPECT_NE(at, std::string::npos) << text;
    text.replace(at, data.size(),
                 fmt::format(R"([data]
type = "blend"
[data.sources.big]
train = "{0}/train_*.bin"
weight = 3
[data.sources.small]
train = "{0}/val_*.bin"
val = "{0}/val_*.bin"
)",
                             dir_ / "data"));
    testing::write_text(path, text);
    return path;
  }

  // A tiny llama on the prepared corpus whose two blocks are mixtures of 4 experts, top 2:
  // `routing` adds [model] lines (router losses, capacity, bias, dropout); `train` and `eval` are
  // those sections' bodies.
  std::string moe_experiment(const std::string& routing, const std::string& train,
                             const std::string& eval) {
    const std::string path = dir_ / "moe.toml";
    write_text(path, fmt::format(R"([run]
db = "{0}"
out_dir = "{1}/runs"
threads = 1

[model]
type = "llama"
n_layer = 2
n_head = 4
n_embd = 32
ffn_dim = 64
block_size = 32
vocab_size = 64
moe_experts = 4
moe_top_k = 2
moe_ffn_dim = 32
{2}
[data]
train = "{1}/data/train_*.bin"
val = "{1}/data/val_*.bin"

[train]
{3}
[optimizer]
lr = 1e-2

[eval]
{4})",
                                 db(), dir_.str(), routing, train, eval));
    return path;
  }

  // A run's per-layer measures (layer_metrics) matching the SQL condition `where`, by step and
  // name.
  std::vector<double> layer_measures(const std::string& run, const std::string& where = "1 = 1") {
    return query_doubles(db(),
                         fmt::format("select value from layer_metrics join runs on id = run_id "
                                     "where runs.name = '{}' and {} order by step, "
                                     "layer_metrics.name",
                                     run, where));
  }

  std::string db() const { return dir_ / "kiln.db"; }

  // The [checkpoint] section of the experiments this fixture writes: empty (snapshots written on
  // the training thread, the default), or checkpoint.async under EachSnapshotWriter
  // (snapshot_writers.h).
  std::string checkpoint_section() const {
    return async_snapshots_ ? "\n[checkpoint]\nasync = true\n" : "";
  }

  // The run's folder, as its row names it (core/store/runs/paths.h: <out_dir>/<name>@<id>).
  std::string folder_of(const std::string& run) const {
    return scalar(db(), "select folder from runs where name = '" + run + "'");
  }

  // Per-step losses of a run, bit for bit as stored.
  std::vector<double> losses(const std::string& run) {
    return query_doubles(db(),
                         "select loss from metrics join runs on runs.id = run_id where "
                         "name = '" +
                             run + "' order by step");
  }

  // Runs `a` and `b` each recorded `steps` losses, step by step within `tolerance`.
  void expect_same_curve(const std::string& a, const std::string& b, size_t steps,
                         double tolerance = 1e-4) {
    const auto x = losses(a), y = losses(b);
    ASSERT_EQ(x.size(), steps) << a;
    ASSERT_EQ(y.size(), steps) << b;
    for (size_t i = 0; i < steps; ++i)
      EXPECT_NEAR(x[i], y[i], tolerance) << a << " and " << b << ", step " << i + 1;
  }

  TempDir dir_;
  bool async_snapshots_ = false;
};

}  // namespace kiln::testing
