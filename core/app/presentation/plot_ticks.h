// Where the ticks of a plot's axes go and how each tick is labelled: plain arithmetic on the
// axis's range, with no SVG in it. Kept apart from core/app/presentation/plot_svg.cpp, which draws
// the chart around these ticks, so that each file stays one sitting's read.
#pragma once

#include <string>
#include <vector>

namespace kiln {

// A single value still needs an axis with some width around it: when hi <= lo, both move apart
// (by 10% of lo, or by 1 around 0).
void widen(double& lo, double& hi);

// 1, 2 or 5 times a power of ten, about `target` of them, covering [lo, hi] from the tick at or
// below lo to the one at or above hi.
std::vector<double> linear_ticks(double lo, double hi, int target);
// Powers of ten within [lo, hi] across three decades or more; 1-2-5 multiples across one or two;
// every 1..9 multiple, or linear ticks, within a narrower range.
std::vector<double> log_ticks(double lo, double hi);
// "0.5", "12k", "1.5M", "3e-4": short and exact enough to tell neighbouring ticks apart.
std::string tick_label(double value);

}  // namespace kiln
