// The Tree-structured Parzen Estimator (Bergstra, Bardenet, Bengio and Kégl, "Algorithms for
// Hyper-Parameter Optimization", NeurIPS 2011), in the form Hyperopt and Optuna's default sampler
// share: after `startup` trials drawn as a random search draws them, the finished trials are split
// into good and bad at the best ceil(γ n) of their scores (Hyperopt takes ceil(0.25 sqrt(n)),
// Optuna min(ceil(0.1 n), 25): a larger good group, steadier with the few trials a sweep runs);
// each key of [space] gets a density of each group, Optuna 5's Parzen estimator with
// TPESampler's defaults (core/app/sweeps/tpe_parzen.h), and takes, of `candidates` values drawn
// from the good density, the one with the largest ratio good / bad (which maximises the expected
// improvement). Where Optuna 5's default TPESampler differs: besides γ, it proposes the keys of a
// single objective jointly (multivariate), where Kiln proposes each key alone, as Hyperopt and
// Optuna's multivariate = False do; it counts running trials as bad (constant_liar), where Kiln
// uses finished ones only, so that a rerun proposes the same; and its draws are numpy's. A pure
// function of (seed, trial, the finished trials): a rerun that finished the same trials proposes
// the same values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/app/sweeps/search_space.h"

namespace kiln {

struct TpeOptions {
  int64_t startup = 10;  // random trials before the estimator is used
  double gamma = 0.25;   // the share of finished trials counted good (at least one)
  int candidates = 24;   // values drawn from the good density per key
};

// A finished trial: its value of each [space] key (TOML text, in [space] order) and its score,
// lower better (a metric with mode = "max" negated; +infinity for a trial that failed or
// diverged, which tpe_propose leaves out of both densities, as Optuna does, and counts towards
// no startup trial).
struct TpeTrial {
  std::vector<std::string> values;
  double score = 0;
};

// The values of trial `trial` of a search seeded `seed`, one per key of `space` (TOML text, as
// sample_value gives them), from the trials finished so far. Fewer than `startup` finished: the
// random search's draws for that trial.
std::vector<std::string> tpe_propose(const std::vector<SweepDistribution>& space,
                                     const std::vector<TpeTrial>& finished, int64_t seed,
                                     int64_t trial, const TpeOptions& options = {});

}  // namespace kiln
