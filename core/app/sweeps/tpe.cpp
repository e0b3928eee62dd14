// The Tree-structured Parzen Estimator (core/app/sweeps/tpe.h).
#include "core/app/sweeps/tpe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "core/util/counter_hash.h"

namespace kiln {

namespace {

using Kind = SweepDistribution::Kind;

// Uniform and normal draws for (seed, trial, key): keyed by the key's name, as a random search's
// draws are, so that each key's proposals do not depend on the other keys'.
class Draws {
 public:
  // As the random search's draws, (seed, trial, key) go in as a chain, not a symmetric xor; the
  // stream is apart from the random search's by its own constant.
  Draws(int64_t seed, int64_t trial, const std::string& key)
      : state_(
            splitmix64_output(splitmix64_output(splitmix64(static_cast<uint64_t>(seed) ^ 0x7e5eULL),
                                                static_cast<uint64_t>(trial)),
                              fnv1a64(key))) {}
  double uniform() { return unit_interval(splitmix64_output(state_, next_++)); }
  double normal() {  // Box-Muller
    const double u = std::max(uniform(), 1e-300), v = uniform();
    return std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * v);
  }

 private:
  uint64_t state_;
  uint64_t next_ = 0;
};

double normal_cdf(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

// A mixture of Gaussians truncated to [lo, hi]: one on each point, and a prior as wide as the
// range on its middle, all of equal weight. Each point's width is the larger gap to its
// neighbours (the prior's centre and the bounds count as neighbours), kept between
// range / min(100, n + 1) and the range: Hyperopt's adaptive Parzen estimator.
class Parzen {
 public:
  Parzen(std::vector<double> points, double lo, double hi) : lo_(lo), hi_(hi) {
    const double range = hi - lo;
    points.push_back((lo + hi) / 2);
    const size_t prior = points.size() - 1;
    std::vector<size_t> order(points.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return points[a] < points[b]; });
    const double narrowest = range / std::min(100.0, static_cast<double>(points.size()));
    mu_ = points;
    sigma_.assign(points.size(), range);
    for (size_t r = 0; r < order.size(); ++r) {
      const size_t i = order[r];
      if (i == prior) continue;
      const double left = r > 0 ? points[i] - points[order[r - 1]] : points[i] - lo;
      const double right = r + 1 < order.size() ? points[order[r + 1]] - points[i] : hi - points[i];
      sigma_[i] = std::clamp(std::max(left, right), narrowest, range);
    }
    for (size_t i = 0; i < mu_.size(); ++i)
      mass_.push_back(normal_cdf((hi - mu_[i]) / sigma_[i]) -
                      normal_cdf((lo - mu_[i]) / sigma_[i]));
  }

  double log_density(double x) const {
    double sum = 0;
    for (size_t i = 0; i < mu_.size(); ++i) {
      const double z = (x - mu_[i]) / sigma_[i];
      sum += std::exp(-0.5 * z * z) / (sigma_[i] * std::sqrt(2 * M_PI) * mass_[i]);
    }
    return std::log(std::max(sum / static_cast<double>(mu_.size()), 1e-300));
  }

  double sample(Draws& draws) const {
    const size_t i = std::min(mu_.size() - 1, static_cast<size_t>(draws.uniform() * mu_.size()));
    for (int attempt = 0; attempt < 100; ++attempt) {
      const double x = mu_[i] + sigma_[i] * draws.normal();
      if (x >= lo_ && x <= hi_) return x;
    }
    return std::clamp(mu_[i], lo_, hi_);  // a component almost wholly outside: its centre
  }

 private:
  double lo_, hi_;
  std::vector<double> mu_, sigma_, mass_;
};

// The value in the space where the estimator works: log for log_uniform.
double to_space(const SweepDistribution& d, double x) {
  return d.kind == Kind::kLogUniform ? std::log(x) : x;
}

// A numeric key: of the candidates drawn from the good trials' density, the one most likely
// under it relative to the bad trials'.
std::string propose_number(const SweepDistribution& d, const std::vector<double>& good,
                           const std::vector<double>& bad, Draws& draws, int candidates) {
  // An integer's range reaches half a step past each end, so that both ends are as likely.
  const double pad = d.kind == Kind::kIntUniform ? 0.5 : 0;
  const double lo = to_space(d, d.low) - pad, hi = to_space(d, d.high) + pad;
  const Parzen l(good, lo, hi), g(bad, lo, hi);
  double best = 0, best_ratio = -INFINITY;
  for (int c = 0; c < candidates; ++c) {
    const double x = l.sample(draws);
    const double ratio = l.log_density(x) - g.log_density(x);
    if (ratio > best_ratio) best = x, best_ratio = ratio;
  }
  return value_text(d, d.kind == Kind::kLogUniform ? std::exp(best) : best);
}

// A choice: each option's share of the group's picks, with a uniform prior of one trial's weight.
std::vector<double> choice_shares(const std::vector<size_t>& picks, size_t options) {
  std::vector<double> shares(options, 1.0 / static_cast<double>(options));
  for (size_t p : picks)
    shares[p] += 1;
  for (double& s : shares)
    s /= static_cast<double>(picks.size() + 1);
  return shares;
}

std::string propose_choice(const SweepDistribution& d, const std::vector<size_t>& good,
                           const std::vector<size_t>& bad, Draws& draws, int candidates) {
  const std::vector<double> l = choice_shares(good, d.choices.size());
  const std::vector<double> g = choice_shares(bad, d.choices.size());
  size_t best = 0;
  double best_ratio = -INFINITY;
  for (int c = 0; c < candidates; ++c) {
    double u = draws.uniform();
    size_t pick = 0;
    while (pick + 1 < l.size() && u >= l[pick])
      u -= l[pick++];
    const double ratio = std::log(l[pick]) - std::log(g[pick]);
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
  std::stable_sort(usable.begin(), usable.end(),
                   [](const TpeTrial* a, const TpeTrial* b) { return a->score < b->score; });
  const size_t good_count = std::max<size_t>(
      1, static_cast<size_t>(std::ceil(options.gamma * static_cast<double>(usable.size()))));
  for (size_t k = 0; k < space.size(); ++k) {
    const SweepDistribution& d = space[k];
    Draws draws(seed, trial, d.key);
    if (d.kind == Kind::kChoice) {
      std::vector<size_t> good, bad;
      for (size_t r = 0; r < usable.size(); ++r) {
        if (auto pick = choice_index(d, usable[r]->values[k])) {
          (r < good_count ? good : bad).push_back(*pick);
        }
      }
      values.push_back(propose_choice(d, good, bad, draws, options.candidates));
      continue;
    }
    std::vector<double> good, bad;
    for (size_t r = 0; r < usable.size(); ++r) {
      const double x = std::stod(usable[r]->values[k]);
      (r < good_count ? good : bad).push_back(to_space(d, x));
    }
    values.push_back(propose_number(d, good, bad, draws, options.candidates));
  }
  return values;
}

}  // namespace kiln
