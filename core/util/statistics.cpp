#include "core/util/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kHalfLog2Pi = 0.91893853320467274178;
constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kSqrtPi = 1.77245385090551602730;
constexpr double kPi = 3.14159265358979323846;
constexpr double kTolerance = 1e-15;  // relative, for the continued fraction and the series
constexpr size_t kMaxSeeds = 1000000;
constexpr int kMaxFractionTerms = 10000000;  // ~sqrt(max(a, b)) are needed; a safety stop

// lgamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2), Stirling's series; below 1e-15 for x >= 10.
double stirling_remainder(double x) {
  const double r = 1 / (x * x);
  return (1.0 / 12 -
          r * (1.0 / 360 -
               r * (1.0 / 1260 - r * (1.0 / 1680 - r * (1.0 / 1188 - r * 691 / 360360))))) /
         x;
}

// log B(a, b). Subtracting lgammas directly would lose ~1e-16 * a absolute for large a (dof in
// the millions), so large arguments go through Stirling's form, where the big terms cancel exactly.
double log_beta(double a, double b) {
  const double p = std::min(a, b), q = std::max(a, b), s = p + q;
  if (q < 10) return std::lgamma(p) + std::lgamma(q) - std::lgamma(s);
  const double corr = stirling_remainder(q) - stirling_remainder(s);
  if (p < 10) return std::lgamma(p) + corr + p - p * std::log(s) + (q - 0.5) * std::log1p(-p / s);
  return kHalfLog2Pi - 0.5 * std::log(s) + stirling_remainder(p) + corr +
         (p - 0.5) * std::log(p / s) + (q - 0.5) * std::log1p(-p / s);
}

// log(x) where x = 1 - y and whichever of the two is small is the one known exactly.
double log_of(double x, double y) {
  return x < 0.5 ? std::log(x) : std::log1p(-y);
}

// x^a (1-x)^b / (a B(a, b)) = I_x(a, b) - I_x(a + 1, b), in logs so neither power underflows alone.
double beta_step(double a, double b, double x, double y) {
  return std::exp(a * log_of(x, y) + b * log_of(y, x) - log_beta(a, b)) / a;
}

// The continued fraction I_x(a, b) = beta_step(a, b, x) / (1 + d1 / (1 + d2 / (1 + ...))), by
// the modified Lentz method; it converges quickly for x < (a + 1) / (a + b + 2).
double beta_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;  // stands in for a zero denominator (Lentz)
  auto guard = [](double v) { return std::fabs(v) < kTiny ? kTiny : v; };
  double c = 1, d = 1 / guard(1 - (a + b) * x / (a + 1)), f = d;
  for (int m = 1; m < kMaxFractionTerms; ++m) {
    for (double coefficient : {m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                               -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))}) {
      d = 1 / guard(1 + coefficient * d);
      c = guard(1 + coefficient / c);
      f *= c * d;
    }
    if (std::fabs(c * d - 1) < kTolerance) break;
  }
  return f;
}

// I_x(a, b) for large a, x >= 1/2 and b a multiple of 1/2 (Didonato and Morris's BGRAT idea),
// where the continued fraction loses about a ulps. With x = e^-u and s = e^-w,
// I = 1/B(a, b) int_u^inf e^(-a w) w^(b-1) h(w)^(b-1) dw, h(w) = (1 - e^-w) / w, and the Taylor
// series h^(b-1) = sum c_k w^k turns it into sum_k c_k Gamma(b + k, a u) / a^(b + k) / B(a, b),
// whose terms fall like (b + k) / (2 pi a).
double beta_large_a(double a, double b, double x, double y) {
  const double u = -log_of(x, y), z = a * u;
  // Gamma(b, z) from Gamma(1/2, z) or Gamma(1, z) by Gamma(s + 1, z) = s Gamma(s, z) + z^s e^-z.
  double shape = std::fmod(b, 1.0) == 0 ? 1 : 0.5;
  double gamma = shape == 1 ? std::exp(-z) : kSqrtPi * std::erfc(std::sqrt(z));
  for (; shape < b; ++shape)
    gamma = shape * gamma + std::exp(shape * std::log(z) - z);
  constexpr int kTerms = 40;
  double h[kTerms + 1], c[kTerms + 1];  // Taylor coefficients of h and of h^(b-1)
  h[0] = c[0] = 1;
  double sum = gamma, scaled_gamma = gamma, u_power = std::exp(b * std::log(z) - z);
  for (int k = 1; k <= kTerms; ++k) {
    h[k] = -h[k - 1] / (k + 1);
    c[k] = 0;  // J. C. P. Miller's recurrence for a power of a series
    for (int i = 1; i <= k; ++i)
      c[k] += (b * i - k) * h[i] * c[k - i];
    c[k] /= k;
    scaled_gamma = ((b + k - 1) * scaled_gamma + u_power) / a;  // Gamma(b + k, z) / a^k
    u_power *= u;
    sum += c[k] * scaled_gamma;
    if (std::fabs(c[k] * scaled_gamma) < kTolerance * sum) break;
  }
  return std::exp(-b * std::log(a) - log_beta(a, b)) * sum;
}

// The regularized incomplete beta I_x(a, b), given x and y = 1 - x each to full precision.
double regularized_beta(double a, double b, double x, double y) {
  if (x <= 0) return 0;
  if (y <= 0) return 1;
  auto large_a_fits = [](double big, double small, double x_big) {
    return big >= 1000 && small <= 100 && std::fmod(2 * small, 1.0) == 0 && x_big >= 0.5;
  };
  if (large_a_fits(a, b, x)) return beta_large_a(a, b, x, y);
  if (x < (a + 1) / (a + b + 2)) return beta_step(a, b, x, y) * beta_fraction(a, b, x);
  if (large_a_fits(b, a, y)) return 1 - beta_large_a(b, a, y, x);
  return 1 - beta_step(b, a, y, x) * beta_fraction(b, a, y);
}

// x = t^2 / (dof + t^2) and y = dof / (dof + t^2), without overflow for huge |t|.
struct BetaArgument {
  double x, y;
};
BetaArgument beta_argument(double t, double dof) {
  if (t * t <= dof) return {t * t / (dof + t * t), dof / (dof + t * t)};
  const double r = dof / t / t;
  return {1 / (1 + r), r / (1 + r)};
}

double normal_upper_tail(double z) {
  return 0.5 * std::erfc(z / kSqrt2);
}

// P(T > t) for t >= 0, apart from the cdf so the far upper tail keeps its relative precision.
double t_upper_tail(double t, double dof) {
  if (std::isnan(t) || std::isnan(dof)) return kNaN;
  if (std::isinf(dof)) return normal_upper_tail(t);
  // Past t^2 = 1e17 dof the fraction is 1 to double precision; logs, as dof / t^2 may underflow.
  const double log_y = std::log(dof) - 2 * std::log(t);
  if (log_y < -40) return std::exp(dof / 2 * log_y - std::log(dof) - log_beta(dof / 2, 0.5));
  const BetaArgument arg = beta_argument(t, dof);
  return 0.5 * regularized_beta(dof / 2, 0.5, arg.y, arg.x);
}

double t_density(double t, double dof) {
  if (std::isinf(dof)) return std::exp(-t * t / 2 - kHalfLog2Pi);
  return std::exp(-(dof + 1) / 2 * std::log1p(t * t / dof) - 0.5 * std::log(dof) -
                  log_beta(dof / 2, 0.5));
}

// The t >= 0 with P(T > t) = tail, 0 < tail <= 1/2: bracket by doubling, then Newton steps that
// fall back to bisection whenever they would leave the bracket.
double t_upper_quantile(double tail, double dof) {
  if (tail == 0.5) return 0;
  double low = 0, high = 1;
  while (t_upper_tail(high, dof) > tail) {
    low = high;
    high *= 2;
    if (std::isinf(high)) return kInf;
  }
  double t = high;
  for (int i = 0; i < 10000; ++i) {
    const double excess = t_upper_tail(t, dof) - tail;  // decreasing in t
    if (excess == 0) return t;
    (excess > 0 ? low : high) = t;
    double next = t + excess / t_density(t, dof);
    if (!(next > low && next < high)) next = low + (high - low) / 2;
    if (std::fabs(next - t) <= 1e-14 * next || high - low <= 1e-14 * high) return next;
    t = next;
  }
  return t;
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

// F(t) for t >= 0 by the series of Guenther (1978) as Lenth's AS 243 sums it: with x = t^2 /
// (t^2 + dof) and lambda = delta^2 / 2, F = Phi(-delta) + 1/2 sum_j [p_j I_x(j + 1/2, dof / 2) +
// q_j I_x(j + 1, dof / 2)], p_j = e^-lambda lambda^j / j!, q_j = delta / sqrt(2) e^-lambda
// lambda^j / Gamma(j + 3/2). Summed outwards from the Poisson mode so that a large delta neither
// underflows e^-lambda nor wastes terms; each I_x steps to its neighbour by beta_step.
//
// Bounded: terms farther than 60 sqrt(lambda) + 200 from the mode carry a Poisson weight below
// e^-300 (Chernoff), so the sums stop there whatever the tolerance says; and a noncentrality far
// beyond t, where that would still be ~sqrt(lambda) terms, answers at once (below). A compare
// with one group's sd 0 and the other's 1e-6 made lambda ~1e10 and spun for minutes (issue 39).
double noncentral_cdf_nonnegative(double t, double dof, double delta) {
  // F(t) = P(Z + delta <= t sqrt(V / dof)) <= P(Z <= -delta / 2) + P(t^2 V / dof >= delta^2 / 4):
  // the first below e^(-delta^2 / 8), the second below (u e^(1 - u))^(dof / 2) for
  // u = delta^2 / (4 t^2) >= 1 (Chernoff's bound on chi-squared). Both below e^-745: F is 0 in
  // double precision.
  if (delta > 0) {
    const double u = t > 0 ? (delta / (2 * t)) * (delta / (2 * t)) : kInf;
    const double log_chi_tail = std::isinf(u) ? -kInf
                                : u > 1       ? dof / 2 * (std::log(u) + 1 - u)
                                              : 0.0;
    if (-delta * delta / 8 < -745 && log_chi_tail < -745) return 0;
  }
  // A negative noncentrality: 1 - F(t) <= P(Z + delta > 0) < e^(-delta^2 / 2), below half an
  // ulp of 1 from delta^2 / 2 > 40 on.
  if (delta < 0 && delta * delta / 2 > 40) return 1;
  const BetaArgument arg = beta_argument(t, dof);
  const double lambda = delta * delta / 2, b = dof / 2;
  const double mode = std::floor(lambda);
  const double span = 60 * std::sqrt(lambda) + 200;  // terms beyond weigh below e^-300
  // p at the mode; for a large mode via Stirling, as -lambda + mode log(lambda) - lgamma(mode + 1)
  // would cancel millions to leave a number of order one; q / p = delta B(j + 1, 1/2) / sqrt(2 pi).
  const double p_mode =
      mode == 0   ? std::exp(-lambda)
      : mode < 10 ? std::exp(-lambda + mode * std::log(lambda) - std::lgamma(mode + 1))
                  : std::exp(-mode * std::log1p((mode - lambda) / lambda) - (lambda - mode) -
                             0.5 * std::log(2 * kPi * mode) - stirling_remainder(mode));
  const double q_mode = delta / kSqrt2 * p_mode * std::exp(log_beta(mode + 1, 0.5)) / kSqrtPi;
  const double i_half = regularized_beta(mode + 0.5, b, arg.x, arg.y);
  const double i_one = regularized_beta(mode + 1, b, arg.x, arg.y);
  // q_j <= p_j |delta| sqrt(2 / pi) for every j, so (1 + q_bound) p_j bounds a term.
  const double q_bound = std::fabs(delta) * kSqrt2OverPi;

  // Away from the mode p_j falls at least geometrically, by r = j / lambda below it and
  // r = lambda / (j + 1) above, so the unsummed terms are below p_j (1 + q_bound) r / (1 - r) times
  // the largest I_x left (at most 1 below the mode, the current one above it, as I_x falls in a).
  double sum = 0;
  double p = p_mode, q = q_mode, ih = i_half, io = i_one;
  for (double j = mode; j >= 0; --j) {
    sum += p * ih + q * io;
    if (j == 0 || mode - j > span ||
        !(p * (1 + q_bound) * j / (lambda - j) > kTolerance * std::fabs(sum)))
      break;
    ih += beta_step(j - 0.5, b, arg.x, arg.y);
    io += beta_step(j, b, arg.x, arg.y);
    p *= j / lambda;
    q *= (j + 0.5) / lambda;
  }
  p = p_mode, q = q_mode, ih = i_half, io = i_one;
  for (double j = mode + 1;; ++j) {
    ih -= beta_step(j - 0.5, b, arg.x, arg.y);
    io -= beta_step(j, b, arg.x, arg.y);
    p *= lambda / j;
    q *= lambda / (j + 0.5);
    sum += p * ih + q * io;
    // Written negated so that a NaN stops the loop too.
    if (j - mode > span || !(p * (1 + q_bound) * std::max(ih, 0.0) * lambda / (j + 1 - lambda) >
                             kTolerance * std::fabs(sum)))
      break;
  }
  return normal_upper_tail(delta) + sum / 2;
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
