#include "core/util/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <boost/math/distributions/non_central_t.hpp>
#include <boost/math/distributions/students_t.hpp>

#include "core/util/error.h"

// The distributions are Boost.Math's (students_t, non_central_t: the incomplete beta and the
// noncentral series, tested against published values by Boost's own suite). Kiln checks the
// parameters itself first, so every domain error is a UserError naming Kiln's function; a result
// beyond double's range is returned as +-infinity rather than thrown.
namespace kiln::stats {
namespace {

namespace bm = boost::math;
using Policy = bm::policies::policy<bm::policies::overflow_error<bm::policies::ignore_error>>;
using StudentT = bm::students_t_distribution<double, Policy>;
using NoncentralT = bm::non_central_t_distribution<double, Policy>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kMaxSeeds = 1000000;

double normal_upper_tail(double z) {
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

// P(T > t), apart from the cdf so the far upper tail keeps its relative precision.
double t_upper_tail(double t, double dof) {
  if (std::isnan(t)) return kNaN;
  if (std::isinf(t)) return t > 0 ? 0 : 1;
  if (std::isinf(dof)) return normal_upper_tail(t);
  return bm::cdf(bm::complement(StudentT(dof), t));
}

// The t with P(T > t) = tail, 0 < tail < 1.
double t_upper_quantile(double tail, double dof) {
  if (std::isinf(dof)) return std::sqrt(2.0) * bm::erfc_inv(2 * tail, Policy());
  return bm::quantile(bm::complement(StudentT(dof), tail));
}

void check_dof(double dof, const char* where) {
  if (!(dof > 0)) {
    throw UserError(fmt::format("{}: degrees of freedom must be > 0, got {}", where, dof));
  }
}

void check_open_unit(double value, const char* what, const char* where) {
  if (!(value > 0 && value < 1)) {
    throw UserError(
        fmt::format("{}: {} must be between 0 and 1 (exclusive), got {}", where, what, value));
  }
}

// Mean and unbiased variance by the corrected two-pass formula, on values shifted by the first:
// constant data gives exactly its value and 0, and a large common offset costs no digits.
struct Moments {
  double mean, variance;
};
Moments moments(const std::vector<double>& xs) {
  const double n = static_cast<double>(xs.size()), shift = xs.front();
  double sum = 0;
  for (double x : xs)
    sum += x - shift;
  const double shifted_mean = sum / n;
  double squares = 0, residual = 0;
  for (double x : xs) {
    const double deviation = x - shift - shifted_mean;
    squares += deviation * deviation;
    residual += deviation;
  }
  return {shift + shifted_mean, (squares - residual * residual / n) / (n - 1)};
}

// F(t) of the noncentral t. A noncentrality far beyond t answers at once, before Boost's series,
// which would take ~sqrt(delta^2 / 2) terms: a compare with one group's sd 0 and the other's 1e-6
// made delta^2 / 2 ~1e10. F(t) = P(Z + delta <= t sqrt(V / dof)) <= P(Z <= -delta / 2)
// + P(t^2 V / dof >= delta^2 / 4): the first below e^(-delta^2 / 8), the second below
// (u e^(1 - u))^(dof / 2) for u = delta^2 / (4 t^2) >= 1 (Chernoff's bound on chi-squared). Both
// below e^-745: F is 0 in double precision. For a negative delta, 1 - F(t) <= P(Z + delta > 0)
// < e^(-delta^2 / 2), below half an ulp of 1 from delta^2 / 2 > 40 on.
double noncentral_cdf_nonnegative(double t, double dof, double delta) {
  if (delta > 0) {
    const double u = t > 0 ? (delta / (2 * t)) * (delta / (2 * t)) : kInf;
    const double log_chi_tail = std::isinf(u) ? -kInf
                                : u > 1       ? dof / 2 * (std::log(u) + 1 - u)
                                              : 0.0;
    if (-delta * delta / 8 < -745 && log_chi_tail < -745) return 0;
  }
  if (delta < 0 && delta * delta / 2 > 40) return 1;
  if (std::isinf(t)) return 1;
  return bm::cdf(NoncentralT(dof, delta), t);
}

}  // namespace

double student_t_cdf(double t, double dof) {
  check_dof(dof, "student_t_cdf");
  return t < 0 ? t_upper_tail(-t, dof) : 1 - t_upper_tail(t, dof);
}

double student_t_quantile(double p, double dof) {
  check_dof(dof, "student_t_quantile");
  if (std::isnan(p)) return kNaN;
  check_open_unit(p, "p", "student_t_quantile");
  if (p < 0.5) return -t_upper_quantile(p, dof);
  return t_upper_quantile(1 - p, dof);  // exact: 1 - p has no rounding for p >= 1/2
}

Summary summarize(const std::vector<double>& xs, double confidence) {
  check_open_unit(confidence, "confidence", "summarize");
  Summary s{xs.size(), kNaN, kNaN, kNaN, kNaN};
  if (s.n == 0) return s;
  const Moments m = moments(xs);
  s.mean = m.mean;
  if (s.n < 2) return s;
  s.sd = std::sqrt(m.variance);
  const double half_width = t_upper_quantile((1 - confidence) / 2, static_cast<double>(s.n - 1)) *
                            s.sd / std::sqrt(static_cast<double>(s.n));
  s.ci_low = s.mean - half_width;
  s.ci_high = s.mean + half_width;
  return s;
}

Welch welch_test(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2 || b.size() < 2) {
    throw UserError(
        fmt::format("welch_test: each group needs at least 2 values, got {} and {}; run more seeds",
                    a.size(), b.size()));
  }
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  const Moments ma = moments(a), mb = moments(b);
  const double va = ma.variance / na, vb = mb.variance / nb;  // squared standard errors
  Welch w;
  w.difference = mb.mean - ma.mean;
  const bool both_constant = va == 0 && vb == 0;
  w.dof = both_constant ? na + nb - 2
                        : (va + vb) * (va + vb) / (va * va / (na - 1) + vb * vb / (nb - 1));
  w.t = both_constant && w.difference == 0 ? 0 : w.difference / std::sqrt(va + vb);
  w.p_value = 2 * t_upper_tail(std::fabs(w.t), w.dof);
  return w;
}

double noncentral_t_cdf(double t, double dof, double noncentrality) {
  check_dof(dof, "noncentral_t_cdf");
  if (std::isnan(t) || std::isnan(noncentrality)) return kNaN;
  if (std::isinf(noncentrality)) return noncentrality > 0 ? 0 : 1;
  if (std::isinf(dof)) return normal_upper_tail(noncentrality - t);
  // F(t; dof, delta) = 1 - F(-t; dof, -delta): T's sign flips with Z's.
  if (t < 0) return 1 - noncentral_cdf_nonnegative(-t, dof, -noncentrality);
  return noncentral_cdf_nonnegative(t, dof, noncentrality);
}

size_t seeds_needed(double difference, double sd_a, double sd_b, double alpha, double power) {
  check_open_unit(alpha, "alpha", "seeds_needed");
  check_open_unit(power, "power", "seeds_needed");
  if (!std::isfinite(difference) || !(sd_a >= 0 && sd_b >= 0) || std::isinf(sd_a + sd_b)) {
    throw UserError(
        fmt::format("seeds_needed: need a finite difference and finite sds >= 0, got {}, {}, {}",
                    difference, sd_a, sd_b));
  }
  if (difference == 0) return 0;
  if (sd_a == 0 && sd_b == 0) return 2;
  // Variances as fractions of the larger one, so that no square overflows.
  const double scale = std::max(sd_a, sd_b);
  const double va = (sd_a / scale) * (sd_a / scale), vb = (sd_b / scale) * (sd_b / scale);
  const double effect = std::fabs(difference) / scale;
  auto reaches = [&](size_t seeds) {
    const double n = static_cast<double>(seeds);
    const double dof = (n - 1) * (va + vb) * (va + vb) / (va * va + vb * vb);
    const double delta = effect / std::sqrt((va + vb) / n);
    const double critical = t_upper_quantile(alpha / 2, dof);
    return 1 - noncentral_t_cdf(critical, dof, delta) + noncentral_t_cdf(-critical, dof, delta) >=
           power;
  };
  size_t low = 1, high = 2;  // low misses the power (1 only stands for "below the search")
  while (!reaches(high)) {
    if (high == kMaxSeeds) return kMaxSeeds;
    low = high;
    high = std::min(2 * high, kMaxSeeds);
  }
  while (high - low > 1) {
    const size_t middle = low + (high - low) / 2;
    (reaches(middle) ? high : low) = middle;
  }
  return high;
}

}  // namespace kiln::stats
