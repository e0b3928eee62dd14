// The densities TPE (core/app/sweeps/tpe.h) compares: one key's Parzen estimator of a group of
// trials, as Optuna 5's _ParzenEstimator builds it with TPESampler's defaults (prior weight 1,
// the magic clip, consider_endpoints off, default_weights), one key at a time.
//   - A number: a mixture of Gaussians truncated to the range, one on each trial's value and a
//     prior on the range's middle as wide as the range. A value's width is the larger gap to its
//     sorted neighbours, the bounds counting as neighbours of a lone value only (the lowest and
//     highest of two or more take the gap to their one neighbour; the prior is no neighbour),
//     kept between range / min(100, n + 2) and the range, n being the group's trials.
//   - An integer: the same on [low - 0.5, high + 0.5], a value's density the mass of its bin
//     [x - 0.5, x + 0.5]; a log_uniform key: the same in log space.
//   - A choice: each trial a kernel with 1 on its pick plus the prior's 1 / (n + 1) spread on
//     every option, normalised; the prior's kernel uniform.
//   - The weights: 1 for each trial while the group holds under 25; past that the newest 25 keep
//     1 and the older fade linearly, the oldest to 1 / n (Bergstra et al. 2013); the prior 1; all
//     normalised. The trials come oldest first.
// tests/interop/tpe_optuna_test.cpp checks means, widths, weights and densities against Optuna's
// own estimator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

// Uniform and normal draws for (seed, trial, key): keyed by the key's name, as a random search's
// draws are, so that each key's proposals do not depend on the other keys'.
class TpeDraws {
 public:
  TpeDraws(int64_t seed, int64_t trial, const std::string& key);
  double uniform();  // [0, 1)
  double normal();

 private:
  uint64_t state_;
  uint64_t next_ = 0;
};

// The weights of n trials, oldest first, before the prior's is added (Optuna's default_weights).
std::vector<double> trial_weights(size_t n);

class NumberParzen {
 public:
  // `points`: the group's values in the estimator's space (log for log_uniform), oldest first;
  // [low, high] the key's range there; `integer` for an int_uniform key.
  NumberParzen(const std::vector<double>& points, double low, double high, bool integer);

  // Per component, the trials' first and the prior last.
  const std::vector<double>& mus() const { return mu_; }
  const std::vector<double>& sigmas() const { return sigma_; }
  const std::vector<double>& weights() const { return weight_; }

  // A draw from the mixture: a component by weight, then its truncated Gaussian; an integer
  // rounded to its value.
  double sample(TpeDraws& draws) const;
  // The log density at x (an integer's log mass of x's bin).
  double log_density(double x) const;

 private:
  double low_, high_;  // the truncation: an integer's half a step past each end
  bool integer_;
  std::vector<double> mu_, sigma_, weight_, mass_;
};

class ChoiceParzen {
 public:
  // `picks`: the group's options by index, oldest first, of `options`.
  ChoiceParzen(const std::vector<size_t>& picks, size_t options);

  // Each option's probability under the mixture.
  const std::vector<double>& probabilities() const { return probability_; }
  size_t sample(TpeDraws& draws) const;

 private:
  std::vector<double> probability_;
};

}  // namespace kiln
