// A run store filled through RunStore with five made-up runs, so that every number the run
// history commands print is known exactly: the unit tests of the queries and views
// (tests/unit/app/presentation/run_history_test.cpp) and the `kiln runs` command line
// (tests/e2e/runs_command_test.cpp) read the same store.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/store/runs/writer.h"
#include "test_util.h"

namespace kiln::testing {

// A run row with made-up fields (seed 7, one rank, 3 planned steps): the store tests' new run.
inline NewRun new_run(const std::string& name) {
  return NewRun{name, "exp.toml", "[run]\n", "0123456789abcdef", 7, 1, 3, "", "host", "", "", ""};
}

struct FakeRun {
  std::string name;
  double lr = 1e-3;
  int64_t n_layer = 2;
  std::string hash;
  std::vector<double> losses;
  std::vector<std::pair<int64_t, double>> val;  // step, loss
  std::string status = "completed";
  int64_t seed = 1;
};

class FakeRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    // The third step of the drift run is one ulp away from the reference: "identical" must mean
    // bit for bit.
    const double drift = std::nextafter(2.1, 3.0);
    add({"lr1", 1e-3, 2, "aaaa", {4.0, 3.0, 2.5, 2.0}, {{4, 2.2}}});
    add({"lr3", 3e-3, 4, "bbbb", {4.0, 2.8, 2.1, 1.5}, {{2, 1.9}, {4, 1.7}}});
    add({"lr3-rerun", 3e-3, 4, "bbbb", {4.0, 2.8, 2.1, 1.5}, {{4, 1.7}}});
    add({"lr3-drift", 3e-3, 4, "bbbb", {4.0, 2.8, drift, 1.5}, {}});
    add({"lr3-short", 3e-3, 4, "bbbb", {4.0, 2.8, 2.1}, {}, "interrupted"});
  }

  std::string config(const FakeRun& run) const {
    return fmt::format(
        "[run]\ndb = \"{}\"\nname = \"{}\"\nout_dir = \"{}\"\nseed = {}\n\n"
        "[model]\ntype = \"gpt\"\nn_layer = {}\nbias = false\n\n"
        "[optimizer]\ntype = \"adamw\"\nlr = {}\n",
        db_path(), run.name, dir_ / "runs", run.seed, run.n_layer, run.lr);
  }

  void add(const FakeRun& run) {
    RunStore store(db_path());
    NewRun created;
    created.name = run.name;
    created.experiment = "exp.toml";
    created.config_toml = config(run);
    created.config_hash = run.hash;
    created.seed = run.seed;
    created.planned_steps = 4;
    created.git_commit = "abc123";
    created.host = "host";
    const int64_t id = store.create_run(created);
    for (size_t i = 0; i < run.losses.size(); ++i) {
      MetricRow m;
      m.step = static_cast<int64_t>(i) + 1;
      m.loss = run.losses[i];
      m.lr = run.lr;
      m.grad_norm = 0.5;
      m.tokens_per_sec = i == 0 ? 10.0 : 100.0;  // a slow first step the mean must leave out
      m.dt_ms = 250;
      m.tokens_seen = m.step * 1000;
      store.add_metric(id, m);
    }
    for (const auto& [step, loss] : run.val)
      store.add_eval(id, EvalRow{step, "val", loss, "", std::nullopt});
    store.finish_run(id, run.status);
  }

  std::string db_path() const { return dir_ / "kiln.db"; }

  TempDir dir_;
};

}  // namespace kiln::testing
