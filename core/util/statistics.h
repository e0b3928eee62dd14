// Statistics for comparing seeded runs: summaries with confidence intervals, Welch's t-test and
// how many seeds a comparison needs. Computed from the distributions themselves (Boost.Math's
// Student and noncentral t), not from normal approximations, so that small seed counts get the
// exact t answers that R and published tables give.
//
// Conventions: a NaN value (a sample value, t, p or the noncentrality) gives NaN results; a
// parameter outside its domain (dof <= 0 or NaN, p or a confidence outside (0, 1), a negative
// standard deviation, too few values for a test) throws UserError naming the function.
// dof = +infinity is allowed and means the normal distribution.
#pragma once

#include <cstddef>
#include <vector>

namespace kiln::stats {

// n, mean, sample standard deviation (n-1), and the two-sided `confidence` interval of the mean
// from Student's t with n-1 degrees of freedom. sd, ci_low, ci_high are NaN when n < 2; the mean
// is NaN when n = 0.
struct Summary {
  size_t n = 0;
  double mean = 0, sd = 0, ci_low = 0, ci_high = 0;
};
Summary summarize(const std::vector<double>& xs, double confidence = 0.95);

// Student's t distribution with `dof` > 0 degrees of freedom (real, not only integer).
double student_t_cdf(double t, double dof);       // P(T <= t)
double student_t_quantile(double p, double dof);  // the t with P(T <= t) = p, 0 < p < 1

// Welch's unequal-variances t-test of mean(b) - mean(a), with the Welch-Satterthwaite degrees of
// freedom and a two-sided p-value. Each group needs n >= 2 (UserError otherwise). When both
// groups are constant, dof is n_a + n_b - 2 and t is 0 (p = 1) or +-infinity (p = 0).
struct Welch {
  double difference = 0;  // mean(b) - mean(a)
  double t = 0, dof = 0, p_value = 0;
};
Welch welch_test(const std::vector<double>& a, const std::vector<double>& b);

// Seeds per group for a two-sided two-sample t-test at significance `alpha` to detect
// `difference` with `power`, given the two groups' standard deviations (equal group sizes). The
// power is exact for the t statistic: both tails of the noncentral t with the Welch-Satterthwaite
// dof, which is Student's 2n - 2 when the sds are equal (as R's power.t.test). The smallest n >= 2
// reaching `power`, found by doubling then bisection (power grows with n), capped at 1e6.
// Returns 0 when difference is 0 (no seed count detects it) and 2 when both sds are 0 (noiseless:
// the smallest groups a t-test can use already show the difference).
size_t seeds_needed(double difference, double sd_a, double sd_b, double alpha = 0.05,
                    double power = 0.8);

// P(T <= t) for the noncentral t with `dof` degrees of freedom and noncentrality `noncentrality`
// (the distribution of (Z + noncentrality) / sqrt(V / dof), Z normal, V chi-squared).
double noncentral_t_cdf(double t, double dof, double noncentrality);

}  // namespace kiln::stats
