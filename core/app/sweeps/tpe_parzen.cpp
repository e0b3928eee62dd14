// TPE's Parzen estimators (core/app/sweeps/tpe_parzen.h).
#include "core/app/sweeps/tpe_parzen.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/util/counter_hash.h"

namespace kiln {

namespace {

// Optuna's names for TPESampler's defaults.
constexpr double kPriorWeight = 1.0;
constexpr size_t kUnfadedTrials = 25;

double normal_cdf(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

// log(sum of exp(terms)), steady where the terms are far below 0.
double log_sum_exp(const std::vector<double>& terms) {
  const double top = *std::max_element(terms.begin(), terms.end());
  if (!std::isfinite(top)) return top;
  double sum = 0;
  for (double t : terms)
    sum += std::exp(t - top);
  return top + std::log(sum);
}

// The trials' weights with the prior's appended, normalised.
std::vector<double> mixture_weights(size_t n) {
  std::vector<double> w = trial_weights(n);
  w.push_back(kPriorWeight);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w)
    x /= total;
  return w;
}

// The index whose share of [0, 1) holds u, by `weights` summing to 1.
size_t pick_by_weight(const std::vector<double>& weights, double u) {
  size_t i = 0;
  while (i + 1 < weights.size() && u >= weights[i])
    u -= weights[i++];
  return i;
}

// Each point's width: the larger gap to its sorted neighbours, with the bounds neighbours of a
// lone point only, clipped to [range / min(100, n + 2), range].
std::vector<double> widths(const std::vector<double>& points, double low, double high) {
  const size_t n = points.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return points[a] < points[b]; });
  const double range = high - low;
  const double narrowest = range / std::min(100.0, static_cast<double>(n) + 2);
  std::vector<double> sigma(n);
  for (size_t r = 0; r < n; ++r) {
    const double x = points[order[r]];
    const double left = r > 0 ? x - points[order[r - 1]] : n == 1 ? x - low : 0;
    const double right = r + 1 < n ? points[order[r + 1]] - x : n == 1 ? high - x : 0;
    sigma[order[r]] = std::clamp(std::max(left, right), narrowest, range);
  }
  return sigma;
}

}  // namespace

TpeDraws::TpeDraws(int64_t seed, int64_t trial, const std::string& key)
    // As the random search's draws, (seed, trial, key) go in as a chain, not a symmetric xor;
    // the stream is apart from the random search's by its own constant.
    : state_(
          splitmix64_output(splitmix64_output(splitmix64(static_cast<uint64_t>(seed) ^ 0x7e5eULL),
                                              static_cast<uint64_t>(trial)),
                            fnv1a64(key))) {}

double TpeDraws::uniform() {
  return unit_interval(splitmix64_output(state_, next_++));
}

double TpeDraws::normal() {  // Box-Muller
  const double u = std::max(uniform(), 1e-300), v = uniform();
  return std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * v);
}

std::vector<double> trial_weights(size_t n) {
  std::vector<double> w(n, 1.0);
  if (n <= kUnfadedTrials) return w;
  // numpy's linspace(1 / n, 1, n - 25): the oldest at 1 / n, rising by equal steps.
  const size_t faded = n - kUnfadedTrials;
  const double first = 1.0 / static_cast<double>(n);
  const double step = faded > 1 ? (1.0 - first) / static_cast<double>(faded - 1) : 0;
  for (size_t i = 0; i < faded; ++i)
    w[i] = first + static_cast<double>(i) * step;
  if (faded > 1) w[faded - 1] = 1.0;
  return w;
}

NumberParzen::NumberParzen(const std::vector<double>& points, double low, double high, bool integer)
    : low_(integer ? low - 0.5 : low), high_(integer ? high + 0.5 : high), integer_(integer) {
  mu_ = points;
  sigma_ = widths(points, low_, high_);
  mu_.push_back((low_ + high_) / 2);
  sigma_.push_back(high_ - low_);
  weight_ = mixture_weights(points.size());
  for (size_t i = 0; i < mu_.size(); ++i)
    mass_.push_back(normal_cdf((high_ - mu_[i]) / sigma_[i]) -
                    normal_cdf((low_ - mu_[i]) / sigma_[i]));
}

double NumberParzen::sample(TpeDraws& draws) const {
  const size_t i = pick_by_weight(weight_, draws.uniform());
  double x = std::clamp(mu_[i], low_, high_);  // a component almost wholly outside: its centre
  for (int attempt = 0; attempt < 100; ++attempt) {
    const double drawn = mu_[i] + sigma_[i] * draws.normal();
    if (drawn >= low_ && drawn <= high_) {
      x = drawn;
      break;
    }
  }
  return integer_ ? std::clamp(std::round(x), low_ + 0.5, high_ - 0.5) : x;
}

double NumberParzen::log_density(double x) const {
  std::vector<double> terms;
  for (size_t i = 0; i < mu_.size(); ++i) {
    double density;
    if (integer_) {
      density =
          normal_cdf((x + 0.5 - mu_[i]) / sigma_[i]) - normal_cdf((x - 0.5 - mu_[i]) / sigma_[i]);
    } else {
      const double z = (x - mu_[i]) / sigma_[i];
      density = std::exp(-0.5 * z * z) / (sigma_[i] * std::sqrt(2 * M_PI));
    }
    terms.push_back(std::log(weight_[i] * density / mass_[i]));
  }
  return log_sum_exp(terms);
}

ChoiceParzen::ChoiceParzen(const std::vector<size_t>& picks, size_t options)
    : probability_(options, 0.0) {
  const std::vector<double> weights = mixture_weights(picks.size());
  const double spread = kPriorWeight / static_cast<double>(picks.size() + 1);
  const double row_sum = spread * static_cast<double>(options) + 1;
  for (size_t k = 0; k < picks.size(); ++k) {
    for (size_t c = 0; c < options; ++c)
      probability_[c] += weights[k] * (spread + (c == picks[k] ? 1.0 : 0.0)) / row_sum;
  }
  for (double& p : probability_)
    p += weights.back() / static_cast<double>(options);
}

size_t ChoiceParzen::sample(TpeDraws& draws) const {
  return pick_by_weight(probability_, draws.uniform());
}

}  // namespace kiln
