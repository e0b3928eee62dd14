// Where the ticks of a plot's axes go and how each is labelled
// (core/app/presentation/plot_ticks.h).
#include "core/app/presentation/plot_ticks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

namespace kiln {

// A single value still needs an axis with some width around it.
void widen(double& lo, double& hi) {
  if (hi > lo) return;
  const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
  lo -= pad;
  hi += pad;
}

std::vector<double> linear_ticks(double lo, double hi, int target) {
  widen(lo, hi);
  const double raw = (hi - lo) / std::max(1, target - 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / magnitude;
  const double step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * magnitude;
  std::vector<double> ticks;
  // Integer multiples of the step, so that 0.1 * 3 prints as 0.3, not 0.30000000000000004.
  for (auto i = static_cast<int64_t>(std::floor(lo / step + 1e-9));
       i <= static_cast<int64_t>(std::ceil(hi / step - 1e-9)); ++i) {
    ticks.push_back(static_cast<double>(i) * step);
  }
  return ticks;
}

namespace {

// m x 10^k for each mantissa m and every decade k that puts the value inside [lo, hi].
std::vector<double> decade_multiples(double lo, double hi, const std::vector<int>& mantissas) {
  std::vector<double> ticks;
  for (int k = static_cast<int>(std::floor(std::log10(lo)));
       k <= static_cast<int>(std::floor(std::log10(hi))); ++k) {
    for (int m : mantissas) {
      const double v = m * std::pow(10.0, k);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push_back(v);
    }
  }
  return ticks;
}

}  // namespace

std::vector<double> log_ticks(double lo, double hi) {
  const int first = static_cast<int>(std::ceil(std::log10(lo) - 1e-9));
  const int last = static_cast<int>(std::floor(std::log10(hi) + 1e-9));
  if (last - first >= 2) {
    std::vector<double> ticks;
    const int stride = std::max(1, (last - first + 8) / 8);  // at most about 8 decades labelled
    for (int k = first; k <= last; k += stride)
      ticks.push_back(std::pow(10.0, k));
    return ticks;
  }
  // One or two decades: 1-2-5 in each; within one decade, every multiple.
  std::vector<double> ticks = decade_multiples(lo, hi, {1, 2, 5});
  if (ticks.size() >= 3) return ticks;
  ticks = decade_multiples(lo, hi, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  if (ticks.size() >= 3) return ticks;
  // Less than a factor of ~2 between the ends: plain linear ticks read best.
  ticks.clear();
  for (double t : linear_ticks(lo, hi, 5)) {
    if (t >= lo && t <= hi) ticks.push_back(t);
  }
  return ticks;
}

std::string tick_label(double value) {
  if (value == 0) return "0";
  const double a = std::abs(value);
  static const std::pair<double, const char*> kScales[] = {
      {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  for (const auto& [scale, suffix] : kScales) {
    if (a >= scale) return fmt::format("{:g}{}", value / scale, suffix);
  }
  std::string s = fmt::format("{:g}", value);
  // printf writes 5e-05; 5e-5 is shorter and reads the same.
  if (auto e = s.find("e-0"); e != std::string::npos) s.erase(e + 2, 1);
  return s;
}

}  // namespace kiln
