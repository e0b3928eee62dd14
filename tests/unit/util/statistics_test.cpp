#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "core/util/error.h"
#include "core/util/statistics.h"

namespace kiln::stats {
namespace {

constexpr double kPi = 3.14159265358979323846;
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

double normal_cdf(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

// Two-sided critical values from the standard t table (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2).
TEST(StatisticsStudentT, QuantilesMatchThePublishedTable) {
  const struct {
    double p, dof, t;
  } table[] = {{0.975, 1, 12.7062047}, {0.975, 2, 4.30265273},  {0.975, 5, 2.57058184},
               {0.975, 7, 2.36462425}, {0.975, 10, 2.22813885}, {0.975, 30, 2.04227246},
               {0.995, 3, 5.84090931}, {0.95, 20, 1.72471824}};
  for (const auto& row : table) {
    EXPECT_NEAR(student_t_quantile(row.p, row.dof), row.t, 1e-6) << row.p << " " << row.dof;
    EXPECT_NEAR(student_t_quantile(1 - row.p, row.dof), -row.t, 1e-6) << row.p << " " << row.dof;
  }
  EXPECT_EQ(student_t_quantile(0.5, 4), 0);
}

// dof 1 (Cauchy), 2 and 3 have closed forms, written out here independently of the module.
TEST(StatisticsStudentT, CdfMatchesTheClosedFormsFromTheFarTailsToTheCentre) {
  for (double t : {-1e12, -1e4, -37.0, -5.0, -1.0, -0.01, 0.0, 0.3, 2.0, 50.0, 1e6}) {
    const double cauchy = t < 0 ? std::atan(-1 / t) / kPi : 0.5 + std::atan(t) / kPi;
    EXPECT_NEAR(student_t_cdf(t, 1), cauchy, 1e-13 * cauchy) << t;
    // 1/2 + t / (2 sqrt(2 + t^2)), for t < 0 as e / (2 (1 + r) r), e = 2 / t^2, r = sqrt(1 + e).
    const double e = 2 / (t * t), r = std::sqrt(1 + e);
    const double two = t < 0 ? e / (2 * (1 + r) * r) : 0.5 + t / (2 * std::sqrt(2 + t * t));
    EXPECT_NEAR(student_t_cdf(t, 2), two, 1e-12 * two) << t;
    const double u = t / std::sqrt(3.0);
    const double three = 0.5 + (u / (1 + u * u) + std::atan(u)) / kPi;
    EXPECT_NEAR(student_t_cdf(t, 3), three, 1e-13) << t;
  }
  EXPECT_NEAR(student_t_cdf(2.0, 3), 0.930337, 1e-6);  // the t table's P(T <= 2 | 3 dof)
}

TEST(StatisticsStudentT, QuantileInvertsTheClosedFormsDownToTinyP) {
  for (double p : {1e-300, 1e-40, 1e-10, 0.001, 0.2, 0.5, 0.7, 0.975, 1 - 1e-12}) {
    // tan(pi (p - 1/2)), without rounding pi p next to pi.
    const double cauchy = p < 0.5 ? -1 / std::tan(kPi * p) : 1 / std::tan(kPi * (1 - p));
    EXPECT_NEAR(student_t_quantile(p, 1), cauchy, 1e-10 * std::fabs(cauchy) + 1e-15) << p;
    const double two = (2 * p - 1) / std::sqrt(2 * p * (1 - p));
    EXPECT_NEAR(student_t_quantile(p, 2), two, 1e-10 * std::fabs(two) + 1e-15) << p;
  }
}

// As dof grows, t tends to the normal: within 1e-12 at 1e12 dof, 5e-5 at 1e3 (the first-order
// gap is phi(t) (t^3 + t) / (4 dof)), and exactly normal at infinity.
TEST(StatisticsStudentT, HugeDegreesOfFreedomApproachTheNormal) {
  for (double t : {-6.0, -1.96, 0.5, 3.0}) {
    EXPECT_NEAR(student_t_cdf(t, 1e12), normal_cdf(t), 1e-12) << t;
    EXPECT_NEAR(student_t_cdf(t, 1e300), normal_cdf(t), 1e-14) << t;
    EXPECT_NEAR(student_t_cdf(t, kInf), normal_cdf(t), 1e-15) << t;
    const double phi = std::exp(-t * t / 2) / std::sqrt(2 * kPi);
    EXPECT_NEAR(student_t_cdf(t, 1e6), normal_cdf(t) - phi * (t * t * t + t) / 4e6, 1e-11) << t;
  }
  EXPECT_NEAR(student_t_quantile(0.975, 1e12), 1.959963984540054, 1e-10);  // z_0.975
  EXPECT_NEAR(student_t_quantile(0.975, kInf), 1.959963984540054, 1e-12);
  // Relative precision deep in the tail, against the first-order expansion (next term ~1e-10).
  const double phi8 = std::exp(-32.0) / std::sqrt(2 * kPi);
  EXPECT_NEAR(student_t_cdf(-8.0, 1e8) / (normal_cdf(-8.0) + phi8 * 520 / 4e8), 1, 1e-8);
}

TEST(StatisticsStudentT, NanPropagatesAndBadParametersAreUserErrors) {
  EXPECT_TRUE(std::isnan(student_t_cdf(kNaN, 3)));
  EXPECT_TRUE(std::isnan(student_t_quantile(kNaN, 3)));
  EXPECT_EQ(student_t_cdf(-kInf, 3), 0);
  EXPECT_EQ(student_t_cdf(kInf, 3), 1);
  for (double dof : {0.0, -1.0, kNaN}) {
    EXPECT_THROW(student_t_cdf(1, dof), UserError);
    EXPECT_THROW(student_t_quantile(0.5, dof), UserError);
    EXPECT_THROW(noncentral_t_cdf(1, dof, 1), UserError);
  }
  for (double p : {0.0, 1.0, -0.5, 2.0})
    EXPECT_THROW(student_t_quantile(p, 3), UserError);
}

TEST(StatisticsSummary, MeanSdAndTIntervalOfASmallSample) {
  const Summary s = summarize({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_EQ(s.n, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 5);
  EXPECT_NEAR(s.sd, std::sqrt(32.0 / 7), 1e-14);
  const double half_width = 2.36462425 * std::sqrt(32.0 / 7) / std::sqrt(8.0);  // t_0.975,7
  EXPECT_NEAR(s.ci_low, 5 - half_width, 1e-7);
  EXPECT_NEAR(s.ci_high, 5 + half_width, 1e-7);
  const Summary wide = summarize({2, 4, 4, 4, 5, 5, 7, 9}, 0.99);
  EXPECT_NEAR(wide.ci_high - wide.mean, 3.49948330 * std::sqrt(32.0 / 7) / std::sqrt(8.0), 1e-7);
}

TEST(StatisticsSummary, TooFewValuesGiveNanAndBadConfidenceIsAUserError) {
  const Summary one = summarize({3.5});
  EXPECT_EQ(one.n, 1u);
  EXPECT_EQ(one.mean, 3.5);
  EXPECT_TRUE(std::isnan(one.sd) && std::isnan(one.ci_low) && std::isnan(one.ci_high));
  EXPECT_TRUE(std::isnan(summarize({}).mean));
  const Summary constant = summarize({1e9 + 0.1, 1e9 + 0.1, 1e9 + 0.1});
  EXPECT_EQ(constant.mean, 1e9 + 0.1);
  EXPECT_EQ(constant.sd, 0);
  EXPECT_EQ(constant.ci_low, constant.mean);
  EXPECT_THROW(summarize({1, 2}, 1.0), UserError);
  EXPECT_THROW(summarize({1, 2}, 0.0), UserError);
}

// R: t.test(ts1, ts2) gives t = -1.8325, df = 17.9, p-value = 0.08356 and the 95% interval
// -2.1469104 0.1469104 for mean(ts1) - mean(ts2); t and dof are also recomputed here by
// Welch-Satterthwaite directly.
TEST(StatisticsWelch, MatchesRsTTestAndTheWelchSatterthwaiteFormula) {
  const std::vector<double> ts1 = {11, 9, 10, 11, 10, 12, 9, 11, 12, 9};
  const std::vector<double> ts2 = {11, 13, 10, 13, 12, 9, 11, 12, 12, 11};
  const Welch w = welch_test(ts1, ts2);
  EXPECT_NEAR(w.difference, 1.0, 1e-14);
  const double va = 12.4 / 9 / 10, vb = 14.4 / 9 / 10;  // sample variances over n
  EXPECT_NEAR(w.t, 1.0 / std::sqrt(va + vb), 1e-12);
  EXPECT_NEAR(w.dof, (va + vb) * (va + vb) / (va * va / 9 + vb * vb / 9), 1e-10);
  EXPECT_NEAR(w.t, 1.8325, 5e-5);
  EXPECT_NEAR(w.dof, 17.9, 5e-2);
  EXPECT_NEAR(w.p_value, 0.08356, 5e-6);
  EXPECT_NEAR(student_t_quantile(0.975, w.dof) * std::sqrt(va + vb), 1.1469104, 1e-7);
  EXPECT_NEAR(welch_test(ts2, ts1).t, -w.t, 1e-15);
}

TEST(StatisticsWelch, ConstantGroupsAndTooFewValues) {
  const Welch same = welch_test({2, 2, 2}, {2, 2});
  EXPECT_EQ(same.t, 0);
  EXPECT_EQ(same.p_value, 1);
  const Welch apart = welch_test({2, 2, 2}, {3, 3});
  EXPECT_EQ(apart.t, kInf);
  EXPECT_EQ(apart.p_value, 0);
  EXPECT_EQ(apart.dof, 3);
  EXPECT_THROW(welch_test({1}, {1, 2, 3}), UserError);
  EXPECT_THROW(welch_test({1, 2}, {}), UserError);
  EXPECT_TRUE(std::isnan(welch_test({1, kNaN}, {1, 2}).p_value));
}

// Mathematica's CDF[NoncentralStudentTDistribution[df, delta], t], as tabulated (to 10 digits)
// in John Burkardt's test_values (student_noncentral_cdf_values), used to check AS 243.
TEST(StatisticsNoncentralT, MatchesPublishedMathematicaValues) {
  const struct {
    double dof, delta, t, cdf;
  } table[] = {{1, 0, 3, 0.8975836177},   {2, 0.5, 3, 0.9049021510},  {3, 1, 3, 0.8774010255},
               {1, 2, 3, 0.5248571617},   {2, 4, 3, 0.2112148916},    {15, 7, 15, 0.9981130072},
               {25, 7, 15, 0.9998391562}, {1, 1, 0.05, 0.1686105670}, {3, 1, 0.05, 0.1701041003},
               {10, 2, 4, 0.9247683363},  {10, 4, 4, 0.4659802096},   {10, 3, 5, 0.8979689357},
               {10, 2, 6, 0.9923658945},  {10, 4, 6, 0.8688007350}};
  for (const auto& row : table) {
    EXPECT_NEAR(noncentral_t_cdf(row.t, row.dof, row.delta), row.cdf, 1e-9)
        << row.dof << " " << row.delta << " " << row.t;
  }
}

// delta = 0 is Student's t, delta -> -delta mirrors t, and t = 0 leaves Phi(-delta).
TEST(StatisticsNoncentralT, ReducesToKnownDistributions) {
  for (double t : {-30.0, -2.0, 0.4, 7.0}) {
    const double cauchy = t < 0 ? std::atan(-1 / t) / kPi : 0.5 + std::atan(t) / kPi;
    EXPECT_NEAR(noncentral_t_cdf(t, 1, 0), cauchy, 1e-14) << t;
    EXPECT_NEAR(noncentral_t_cdf(t, kInf, 1.5), normal_cdf(t - 1.5), 1e-15) << t;
    EXPECT_NEAR(noncentral_t_cdf(t, 1e12, 1.5), normal_cdf(t - 1.5), 1e-11) << t;
  }
  for (double delta : {-3.0, 0.5, 40.0})
    EXPECT_NEAR(noncentral_t_cdf(0, 4, delta), normal_cdf(-delta), 1e-15);
  EXPECT_TRUE(std::isnan(noncentral_t_cdf(1, 4, kNaN)));
  EXPECT_TRUE(std::isnan(noncentral_t_cdf(kNaN, 4, 1)));
}

// R's power.t.test(delta = d, sd = 1, power = 0.8) gives n = 16.71477 (d = 1), 63.76576
// (d = 0.5) and 393.4057 (d = 0.2) per group.
TEST(StatisticsSeedsNeeded, MatchesRsPowerTTest) {
  EXPECT_EQ(seeds_needed(1, 1, 1), 17u);
  EXPECT_EQ(seeds_needed(0.5, 1, 1), 64u);
  EXPECT_EQ(seeds_needed(0.2, 1, 1), 394u);
  EXPECT_EQ(seeds_needed(-0.5, 1, 1), 64u);          // the test is two-sided
  EXPECT_EQ(seeds_needed(5, 10, 10), 64u);           // only difference / sd matters
  EXPECT_EQ(seeds_needed(1, 1, 1, 0.05, 0.9), 23u);  // power.t.test: n = 22.02110
}

TEST(StatisticsSeedsNeeded, EdgeCasesAndBadInput) {
  EXPECT_EQ(seeds_needed(0, 1, 1), 0u);
  EXPECT_EQ(seeds_needed(1, 0, 0), 2u);
  EXPECT_EQ(seeds_needed(100, 1, 1), 2u);
  EXPECT_EQ(seeds_needed(1e-4, 1, 1), 1000000u);
  EXPECT_THROW(seeds_needed(1, -1, 1), UserError);
  EXPECT_THROW(seeds_needed(kNaN, 1, 1), UserError);
  EXPECT_THROW(seeds_needed(1, 1, kInf), UserError);
  EXPECT_THROW(seeds_needed(1, 1, 1, 0), UserError);
  EXPECT_THROW(seeds_needed(1, 1, 1, 0.05, 1), UserError);
}

// Near-zero spreads answer at once (a compare with sds 0 and 1e-6 once spun for minutes).
// The values follow from the tail bounds alone: with delta = 7e4 and t = 12.7 (dof 1), F is
// below e^(-delta^2 / 8) + P(chi2_1 > (delta / 2t)^2), zero in double precision.
TEST(NoncentralT, AFarNoncentralityIsZeroOrOneAtOnce) {
  EXPECT_EQ(noncentral_t_cdf(12.7062, 1, 7.07e4), 0);
  EXPECT_EQ(noncentral_t_cdf(-12.7062, 1, 7.07e4), 0);
  EXPECT_EQ(noncentral_t_cdf(12.7062, 1, -7.07e4), 1);
  // Beside the shortcut, a large noncentrality the series still sums: its mass sits near t = delta.
  EXPECT_NEAR(noncentral_t_cdf(2000, 1e6, 2000), 0.5, 0.01);
}

TEST(SeedsNeeded, NearZeroSpreadsTerminate) {
  // One group noiseless, the other 1e-6 or 1e-12: two seeds already show a difference of 0.05
  // (the t statistic is ~5e4 at 2 seeds, far past the 12.7 that dof 1 needs).
  EXPECT_EQ(seeds_needed(0.05, 0, 1e-6), 2u);
  EXPECT_EQ(seeds_needed(0.05, 0, 1e-12), 2u);
  EXPECT_EQ(seeds_needed(0.05, 1e-12, 1e-12), 2u);
  EXPECT_EQ(seeds_needed(0.05, 0, 0), 2u);
}

}  // namespace
}  // namespace kiln::stats
