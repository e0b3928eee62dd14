// The Tree-structured Parzen Estimator (core/app/sweeps/tpe.h).
#include "core/app/sweeps/tpe.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/app/sweeps/tpe_parzen.h"

namespace kiln {

namespace {

using Kind = SweepDistribution::Kind;

// The value in the space where the estimator works: log for log_uniform.
double to_space(const SweepDistribution& d, double x) {
  return d.kind == Kind::kLogUniform ? std::log(x) : x;
}

// A numeric key: of the candidates drawn from the good trials' density, the one most likely
// under it relative to the bad trials'.
std::string propose_number(const SweepDistribution& d, const std::vector<double>& good,
                           const std::vector<double>& bad, TpeDraws& draws, int candidates) {
  const bool integer = d.kind == Kind::kIntUniform;
  const double low = to_space(d, d.low), high = to_space(d, d.high);
  const NumberParzen l(good, low, high, integer), g(bad, low, high, integer);
  double best = 0, best_ratio = -INFINITY;
  for (int c = 0; c < candidates; ++c) {
    const double x = l.sample(draws);
    const double ratio = l.log_density(x) - g.log_density(x);
    if (ratio > best_ratio) best = x, best_ratio = ratio;
  }
  return value_text(d, d.kind == Kind::kLogUniform ? std::exp(best) : best);
}

std::string propose_choice(const SweepDistribution& d, const std::vector<size_t>& good,
                           const std::vector<size_t>& bad, TpeDraws& draws, int candidates) {
  const ChoiceParzen l(good, d.choices.size()), g(bad, d.choices.size());
  size_t best = 0;
  double best_ratio = -INFINITY;
  for (int c = 0; c < candidates; ++c) {
    const size_t pick = l.sample(draws);
    const double ratio = std::log(l.probabilities()[pick]) - std::log(g.probabilities()[pick]);
    if (ratio > best_ratio) best = pick, best_ratio = ratio;
  }
  return d.choices[best];
}

std::optional<size_t> choice_index(const SweepDistribution& d, const std::string& value) {
  const auto it = std::find(d.choices.begin(), d.choices.end(), value);
  if (it == d.choices.end()) return std::nullopt;
  return static_cast<size_t>(it - d.choices.begin());
}

}  // namespace

std::vector<std::string> tpe_propose(const std::vector<SweepDistribution>& space,
                                     const std::vector<TpeTrial>& finished, int64_t seed,
                                     int64_t trial, const TpeOptions& options) {
  // Trials of this space (one value per key) with a score: a failed or diverged trial says where
  // not to go, but as a density it would be counted good whenever fewer than gamma's share of the
  // trials scored (Optuna and Hyperopt leave them out too).
  std::vector<const TpeTrial*> usable;
  for (const auto& t : finished) {
    if (t.values.size() == space.size() && std::isfinite(t.score)) usable.push_back(&t);
  }
  std::vector<std::string> values;
  if (static_cast<int64_t>(usable.size()) < options.startup) {
    for (const auto& d : space)
      values.push_back(sample_value(d, seed, trial));
    return values;
  }
  // The best good_count are good, ties to the older; each group keeps the trials' order, which
  // the weights read (the oldest fade).
  std::vector<size_t> by_score(usable.size());
  for (size_t r = 0; r < by_score.size(); ++r)
    by_score[r] = r;
  std::stable_sort(by_score.begin(), by_score.end(),
                   [&](size_t a, size_t b) { return usable[a]->score < usable[b]->score; });
  const size_t good_count = std::max<size_t>(
      1, static_cast<size_t>(std::ceil(options.gamma * static_cast<double>(usable.size()))));
  std::vector<bool> is_good(usable.size(), false);
  for (size_t r = 0; r < good_count; ++r)
    is_good[by_score[r]] = true;
  for (size_t k = 0; k < space.size(); ++k) {
    const SweepDistribution& d = space[k];
    TpeDraws draws(seed, trial, d.key);
    if (d.kind == Kind::kChoice) {
      std::vector<size_t> good, bad;
      for (size_t r = 0; r < usable.size(); ++r) {
        if (auto pick = choice_index(d, usable[r]->values[k])) {
          (is_good[r] ? good : bad).push_back(*pick);
        }
      }
      values.push_back(propose_choice(d, good, bad, draws, options.candidates));
      continue;
    }
    std::vector<double> good, bad;
    for (size_t r = 0; r < usable.size(); ++r) {
      const double x = std::stod(usable[r]->values[k]);
      (is_good[r] ? good : bad).push_back(to_space(d, x));
    }
    values.push_back(propose_number(d, good, bad, draws, options.candidates));
  }
  return values;
}

}  // namespace kiln
