// Line charts as SVG, written by hand: axes with nice tick values, tick labels, axis titles, a
// legend, one polyline per series and a shaded band around those that have one. No plotting
// library; PNG through rsvg-convert.
#pragma once

#include <string>
#include <vector>

#include "core/app/presentation/plot_ticks.h"  // the axes' ticks: linear_ticks, log_ticks, tick_label

namespace kiln {

struct Series {
  std::string name;
  std::vector<double> x, y;  // a non-finite y (or one <= 0 on a log axis) breaks the line
  // A shaded band around the line at the same x (a spread across runs); none when empty. The
  // `= {}` lets `{name, x, y}` leave them out without -Wextra's missing-initializer warning.
  std::vector<double> band_low = {}, band_high = {};
};

struct PlotStyle {
  std::string title, x_label, y_label;
  bool log_y = false;
  int width = 960;
  int height = 540;  // grows when the legend needs more room
};

// A UserError when no series has a point that can be drawn.
std::string render_svg(const std::vector<Series>& series, const PlotStyle& style);

// Whether any value is finite: a series without one has nothing to draw.
bool any_finite(const std::vector<double>& values);

// Each point the mean of the finite values among itself and the window - 1 points before it.
std::vector<double> moving_average(const std::vector<double>& y, int window);

// Text safe inside SVG or HTML markup and attribute values.
std::string escape_xml(const std::string& s);

// `path` ending in .svg gets the SVG; .png a rendering by rsvg-convert (Debian: librsvg2-bin).
void write_plot(const std::string& svg, const std::string& path);

}  // namespace kiln
