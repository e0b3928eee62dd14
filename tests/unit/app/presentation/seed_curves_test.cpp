// `kiln runs plot --group-by`: each group's mean curve and its band, checked against values worked
// out by hand here, and the SVG: one band per group of two runs or more.
#include "core/app/presentation/seed_curves.h"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/util/error.h"
#include "fake_runs.h"

namespace kiln {
namespace {

// The 97.5% quantiles of Student's t, in closed form: with 1 degree of freedom t is Cauchy,
// F(t) = 1/2 + atan(t)/pi, so t = tan(0.475 pi) = 12.7062...; with 2, F(t) = 1/2 +
// t / (2 sqrt(2 + t^2)), so t / sqrt(2 + t^2) = 0.95 and t = sqrt(2 * 0.95^2 / (1 - 0.95^2))
// = 4.3027... (the t table's 12.706 and 4.303).
const double kT1 = std::tan(0.475 * M_PI);
const double kT2 = std::sqrt(2 * 0.95 * 0.95 / (1 - 0.95 * 0.95));
constexpr double kTolerance = 1e-9;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

TEST(GroupCurves, MeanAndBandAtEveryXAllRunsLogged) {
  // b is the shortest run and has no value at x = 3; c alone logs x = 5.
  const Curve a{{1, 2, 3, 4}, {1, 4, 10, 7}};
  const Curve b{{1, 2, 3}, {2, 6, NAN}};
  const Curve c{{1, 2, 3, 4, 5}, {3, 8, 11, 9, 9}};
  const GroupCurve ci = combine_curves({a, b, c}, Band::kConfidence);
  // x = 4 and 5 are left out (b did not log them): the curve stops with the shortest run.
  ASSERT_EQ(ci.x, std::vector<double>({1, 2, 3}));
  // x = 1: values 1, 2, 3; mean 2, sample sd sqrt(((1-2)^2 + 0 + (3-2)^2) / 2) = 1,
  // half width t(0.975, 2 df) * sd / sqrt(3).
  EXPECT_NEAR(ci.mean[0], 2.0, kTolerance);
  EXPECT_NEAR(ci.low[0], 2.0 - kT2 * 1 / std::sqrt(3.0), kTolerance);
  EXPECT_NEAR(ci.high[0], 2.0 + kT2 * 1 / std::sqrt(3.0), kTolerance);
  EXPECT_NEAR(ci.high[0], 4.484137711843753, 1e-6);  // the t table's 4.303 / sqrt(3) + 2
  // x = 2: values 4, 6, 8; mean 6, sd sqrt((4 + 0 + 4) / 2) = 2.
  EXPECT_NEAR(ci.mean[1], 6.0, kTolerance);
  EXPECT_NEAR(ci.low[1], 6.0 - kT2 * 2 / std::sqrt(3.0), kTolerance);
  EXPECT_NEAR(ci.high[1], 6.0 + kT2 * 2 / std::sqrt(3.0), kTolerance);
  // x = 3: b has no finite value, so no mean and no band: a gap in the line.
  EXPECT_TRUE(std::isnan(ci.mean[2]));
  EXPECT_TRUE(std::isnan(ci.low[2]) && std::isnan(ci.high[2]));

  const GroupCurve range = combine_curves({a, b, c}, Band::kMinMax);
  EXPECT_EQ(range.mean[1], 6.0);
  EXPECT_EQ(range.low[0], 1.0);
  EXPECT_EQ(range.high[0], 3.0);
  EXPECT_EQ(range.low[1], 4.0);
  EXPECT_EQ(range.high[1], 8.0);

  // Two runs: values 1 and 3 at x = 1; mean 2, sd sqrt((1 + 1) / 1) = sqrt(2), half width
  // t(0.975, 1 df) * sqrt(2) / sqrt(2) = 12.7062...
  const GroupCurve two = combine_curves({Curve{{1}, {1}}, Curve{{1}, {3}}}, Band::kConfidence);
  EXPECT_NEAR(two.low[0], 2.0 - kT1, kTolerance);
  EXPECT_NEAR(two.high[0], 2.0 + kT1, kTolerance);
  EXPECT_NEAR(two.high[0], 14.706204736174698, 1e-6);

  // One run: its own curve and no band.
  const GroupCurve one = combine_curves({a}, Band::kConfidence);
  EXPECT_EQ(one.mean, a.y);
  EXPECT_TRUE(std::isnan(one.low[0]) && std::isnan(one.high[0]));
}

TEST(GroupCurves, BandIsOnePathWithAGapWhereItCannotBeDrawn) {
  Series s{"3 runs: group", {1, 2, 3, 4}, {2, 2, 2, 2}};
  s.band_low = {1, NAN, 1, 0.5};
  s.band_high = {3, 3, 3, 3};
  const std::string svg = render_svg({s, Series{"1 run: alone", {1, 4}, {2.5, 2.5}}}, {});
  ASSERT_EQ(count(svg, "<path class=\"band\""), 1u);
  const std::string path = svg.substr(svg.find("<path class=\"band\""));
  EXPECT_EQ(count(path.substr(0, path.find("/>")), "M"), 2u);  // x = 1, then x = 3 and 4
  // The y axis reaches the band's bottom, 0.5, not only the lines' lowest value, 2.
  EXPECT_NE(svg.find(">0.5</text>"), std::string::npos);
}

class GroupPlot : public testing::FakeRuns {
 protected:
  void SetUp() override {
    FakeRuns::SetUp();
    // Two seeds of one more config: the group lr5 whose band is not zero wide.
    add({"lr5-a", 5e-3, 2, "cccc", {3.0, 2.0}, {}});
    add({"lr5-b", 5e-3, 2, "cccc", {5.0, 4.0}, {}});
  }
};

TEST_F(GroupPlot, OneMeanCurvePerGroupAndOneBandPerGroupOfSeveralRuns) {
  HistoryDb db(db_path());
  const auto runs = match_runs(db, {"lr*"});
  CurveRequest request;
  request.group_by = {"optimizer.lr"};
  const std::vector<Series> series = group_series(db, runs, request);
  ASSERT_EQ(series.size(), 3u);  // lr 1e-3 (lr1), 3e-3 (four runs), 5e-3 (two)
  EXPECT_EQ(series[0].name.rfind("1 run: ", 0), 0u) << series[0].name;
  EXPECT_TRUE(series[0].band_low.empty());
  // lr3-short stopped after step 3, so the group of four stops there too. Step 3's mean:
  // (2.1 + 2.1 + 2.1 + (2.1 one ulp up)) / 4.
  EXPECT_EQ(series[1].name.rfind("4 runs: ", 0), 0u) << series[1].name;
  EXPECT_EQ(series[1].x, std::vector<double>({1, 2, 3}));
  EXPECT_NEAR(series[1].y[2], 2.1, 1e-15);
  EXPECT_EQ(series[1].band_low[0], 4.0);  // four equal values: sd 0, a band of no width
  EXPECT_EQ(series[1].band_high[0], 4.0);
  // lr5: steps 1 and 2 have values 3, 5 and 2, 4: means 4 and 3, sd sqrt(2), half width
  // t(0.975, 1 df).
  EXPECT_EQ(series[2].name.rfind("2 runs: ", 0), 0u) << series[2].name;
  EXPECT_NEAR(series[2].y[0], 4.0, kTolerance);
  EXPECT_NEAR(series[2].band_low[1], 3.0 - kT1, kTolerance);
  EXPECT_NEAR(series[2].band_high[1], 3.0 + kT1, kTolerance);

  request.group_by = {"auto"};
  request.band = "minmax";
  request.smooth = 2;  // each run smoothed before the mean: lr5-a 3, 2.5 and lr5-b 5, 4.5
  const std::vector<Series> smoothed = group_series(db, runs, request);
  ASSERT_EQ(smoothed.size(), 3u);
  EXPECT_EQ(smoothed[2].y, std::vector<double>({4.0, 3.5}));
  EXPECT_EQ(smoothed[2].band_low, std::vector<double>({3.0, 2.5}));
  EXPECT_EQ(smoothed[2].band_high, std::vector<double>({5.0, 4.5}));

  const std::string svg = plot_runs(db, runs, request);
  EXPECT_EQ(count(svg, "<path class=\"band\""), 2u);  // the groups of four and of two runs
  EXPECT_NE(svg.find("mean of each group, min to max"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 3u);

  request.x = "time";
  EXPECT_NE(testing::user_error_of([&] {
              plot_runs(db, runs, request);
            }).find("--x time with --group-by"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
