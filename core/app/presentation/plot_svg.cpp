#include "core/app/presentation/plot_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/app/presentation/plot_ticks.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/process.h"

namespace kiln {

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

// Tableau 10: distinct in hue and readable on white; past ten, dashes tell series apart.
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr const char* kDashes[] = {"", "7 3", "2 3", "9 3 2 3"};
constexpr size_t kColorCount = std::size(kColors);
constexpr size_t kMarkersUpTo = 25;  // points per series; fewer (evals) get a dot each
constexpr int kLegendRow = 20;

bool drawable(double x, double y, bool log_y) {
  return std::isfinite(x) && std::isfinite(y) && (!log_y || y > 0);
}

struct Extent {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  bool empty() const { return x_lo > x_hi; }
};

Extent extent_of(const std::vector<Series>& series, bool log_y) {
  Extent e;
  for (const auto& s : series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!drawable(s.x[i], s.y[i], log_y)) continue;
      e.x_lo = std::min(e.x_lo, s.x[i]);
      e.x_hi = std::max(e.x_hi, s.x[i]);
      e.y_lo = std::min(e.y_lo, s.y[i]);
      e.y_hi = std::max(e.y_hi, s.y[i]);
    }
    for (size_t i = 0; i < s.band_low.size() && i < s.band_high.size(); ++i) {
      if (!drawable(s.x[i], s.band_low[i], log_y) || !drawable(s.x[i], s.band_high[i], log_y))
        continue;
      e.y_lo = std::min(e.y_lo, s.band_low[i]);
      e.y_hi = std::max(e.y_hi, s.band_high[i]);
    }
  }
  return e;
}

// One axis: the data range it shows (log10 of it for a log axis) and where its ticks go.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks;  // data values
  double fraction(double v) const { return ((log ? std::log10(v) : v) - lo) / (hi - lo); }
};

Axis linear_axis(double lo, double hi) {
  widen(lo, hi);
  Axis axis;
  axis.ticks = linear_ticks(lo, hi, 7);
  axis.lo = axis.ticks.front();
  axis.hi = axis.ticks.back();
  return axis;
}

Axis log_axis(double lo, double hi) {
  Axis axis;
  axis.log = true;
  const double span = std::max(std::log10(hi / lo), 0.1);
  axis.lo = std::log10(lo) - 0.04 * span;
  axis.hi = std::log10(hi) + 0.04 * span;
  axis.ticks = log_ticks(std::pow(10.0, axis.lo), std::pow(10.0, axis.hi));
  return axis;
}

struct Frame {
  double left, top, width, height;
  Axis x, y;
  double px(double v) const { return left + x.fraction(v) * width; }
  double py(double v) const { return top + height - y.fraction(v) * height; }
};

std::string grid_and_ticks(const Frame& f) {
  std::string out;
  for (double t : f.y.ticks) {
    const double y = f.py(t);
    out +=
        fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#e6e6e6"/>)",
                    f.left, y, f.left + f.width, y);
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end">{}</text>)", f.left - 8,
                       y + 4, escape_xml(tick_label(t)));
    out += "\n";
  }
  for (double t : f.x.ticks) {
    const double x = f.px(t);
    out +=
        fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#e6e6e6"/>)",
                    x, f.top, x, f.top + f.height);
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)", x,
                       f.top + f.height + 18, escape_xml(tick_label(t)));
    out += "\n";
  }
  return out;
}

std::string axis_titles(const Frame& f, const PlotStyle& style) {
  std::string out = fmt::format(
      R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="none" stroke="#444"/>)",
      f.left, f.top, f.width, f.height);
  out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)",
                     f.left + f.width / 2, f.top + f.height + 42, escape_xml(style.x_label));
  out += fmt::format(
      R"svg(<text transform="translate(18 {:.1f}) rotate(-90)" text-anchor="middle">{}</text>)svg",
      f.top + f.height / 2, escape_xml(style.y_label));
  out += fmt::format(R"(<text x="{:.1f}" y="24" font-size="15" font-weight="bold">{}</text>)",
                     f.left, escape_xml(style.title));
  return out + "\n";
}

std::string stroke_style(size_t index) {
  const char* dash = kDashes[(index / kColorCount) % std::size(kDashes)];
  return fmt::format(R"(stroke="{}" stroke-width="1.8"{})", kColors[index % kColorCount],
                     *dash ? fmt::format(R"( stroke-dasharray="{}")", dash) : "");
}

// Polylines broken wherever a point cannot be drawn, and a dot per point for short series.
std::string series_path(const Series& s, size_t index, const Frame& f) {
  std::string out, points;
  size_t count = 0;
  auto flush = [&]() {
    if (!points.empty()) {
      out += fmt::format(R"(<polyline fill="none" {} points="{}"/>)", stroke_style(index), points);
      out += "\n";
    }
    points.clear();
  };
  std::string dots;
  for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
    if (!drawable(s.x[i], s.y[i], f.y.log)) {
      flush();
      continue;
    }
    ++count;
    const double x = f.px(s.x[i]), y = f.py(s.y[i]);
    points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", x, y);
    dots += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="2.6" fill="{}"/>)", x, y,
                        kColors[index % kColorCount]);
  }
  flush();
  return count <= kMarkersUpTo ? out + dots + "\n" : out;
}

// One path per banded series: a closed outline (along the top, back along the bottom) for each
// stretch of points whose band can be drawn, so that a gap in the band stays a gap.
std::string band_path(const Series& s, size_t index, const Frame& f) {
  std::string outlines;
  std::vector<std::string> top, bottom;
  auto close = [&]() {
    if (!top.empty())
      outlines += fmt::format("M{} L{} Z", fmt::join(top, " "),
                              fmt::join(bottom.rbegin(), bottom.rend(), " "));
    top.clear();
    bottom.clear();
  };
  for (size_t i = 0; i < s.band_low.size() && i < s.band_high.size() && i < s.x.size(); ++i) {
    if (!drawable(s.x[i], s.band_low[i], f.y.log) || !drawable(s.x[i], s.band_high[i], f.y.log)) {
      close();
      continue;
    }
    top.push_back(fmt::format("{:.1f},{:.1f}", f.px(s.x[i]), f.py(s.band_high[i])));
    bottom.push_back(fmt::format("{:.1f},{:.1f}", f.px(s.x[i]), f.py(s.band_low[i])));
  }
  close();
  if (outlines.empty()) return "";
  return fmt::format(R"(<path class="band" fill="{}" fill-opacity="0.2" stroke="none" d="{}"/>)",
                     kColors[index % kColorCount], outlines) +
         "\n";
}

constexpr size_t kLegendChars = 40;

// Long names are cut (at a UTF-8 character boundary) so the legend stays inside the picture.
std::string legend_name(const std::string& name) {
  if (name.size() <= kLegendChars) return name;
  size_t cut = kLegendChars - 1;
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80)
    --cut;
  return name.substr(0, cut) + "…";
}

size_t longest_name(const std::vector<Series>& series) {
  size_t n = 0;
  for (const auto& s : series)
    n = std::max(n, std::min(s.name.size(), kLegendChars));
  return n;
}

std::string legend(const std::vector<Series>& series, double x, double top) {
  std::string out;
  for (size_t i = 0; i < series.size(); ++i) {
    const double y = top + 10 + kLegendRow * static_cast<double>(i);
    out += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" {}/>)", x, y,
                       x + 24, y, stroke_style(i));
    out += fmt::format(R"(<text x="{:.1f}" y="{:.1f}">{}</text>)", x + 30, y + 4,
                       escape_xml(legend_name(series[i].name)));
    out += "\n";
  }
  return out;
}

}  // namespace

bool any_finite(const std::vector<double>& values) {
  return std::any_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
}

std::vector<double> moving_average(const std::vector<double>& y, int window) {
  std::vector<double> out(y.size(), NAN);
  for (size_t i = 0; i < y.size(); ++i) {
    double sum = 0;
    int n = 0;
    const size_t width = static_cast<size_t>(std::max(window, 1));
    for (size_t j = i + 1 >= width ? i + 1 - width : 0; j <= i; ++j) {
      if (std::isfinite(y[j])) {
        sum += y[j];
        ++n;
      }
    }
    if (n > 0) out[i] = sum / n;
  }
  return out;
}

std::string render_svg(const std::vector<Series>& series, const PlotStyle& style) {
  const Extent e = extent_of(series, style.log_y);
  if (e.empty()) {
    throw UserError(style.log_y ? "nothing to plot: no run has a value above 0 for a log axis"
                                : "nothing to plot: no run has a value");
  }
  const double legend_width = std::min<double>(320, 44 + 7.2 * longest_name(series));
  const int height = std::max<int>(style.height, 96 + kLegendRow * static_cast<int>(series.size()));
  Frame f{76, 40, style.width - 76 - legend_width - 24, height - 40.0 - 60, {}, {}};
  f.x = linear_axis(e.x_lo, e.x_hi);
  f.y = style.log_y ? log_axis(e.y_lo, e.y_hi) : linear_axis(e.y_lo, e.y_hi);

  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" )"
      R"(font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12" fill="#222">)"
      "\n"
      R"(<rect width="{0}" height="{1}" fill="white"/>)"
      "\n",
      style.width, height);
  // Ids are global in an HTML page holding several plots: each plot's clip gets its own. The
  // clip reaches a few pixels past the frame so that dots and lines on its edge show whole.
  const std::string clip = fmt::format("clip-{:x}", std::hash<std::string>{}(style.title));
  out += fmt::format(
      R"(<clipPath id="{}"><rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}"/>)"
      "</clipPath>\n",
      clip, f.left - 4, f.top - 4, f.width + 8, f.height + 8);
  out += grid_and_ticks(f) + axis_titles(f, style) +
         fmt::format(R"svg(<g clip-path="url(#{})">)svg", clip) + "\n";
  for (size_t i = 0; i < series.size(); ++i)
    out += band_path(series[i], i, f);  // under every line, so that no band hides one
  for (size_t i = 0; i < series.size(); ++i)
    out += series_path(series[i], i, f);
  out += "</g>\n" + legend(series, f.left + f.width + 20, f.top);
  return out + "</svg>\n";
}

void write_plot(const std::string& svg, const std::string& path) {
  auto ends_with = [&](const std::string& suffix) {
    return path.size() >= suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".svg")) return write_file_atomic(path, svg);
  if (!ends_with(".png")) {
    throw UserError(
        fmt::format("-o {}: a plot is written as .svg or .png: end the name in one", path));
  }
  // rsvg-convert renders in a scratch folder; the PNG reaches `path` as every output does, by
  // an atomic write, so that a failed or killed rendering leaves no half-written file there.
  ScratchDir scratch;
  const std::string svg_file = scratch / "plot.svg", png_file = scratch / "plot.png";
  write_file_atomic(svg_file, svg);
  ProcessOptions convert;
  convert.program = "rsvg-convert";
  convert.argv = {"rsvg-convert", "--format", "png",    "--background-color",
                  "white",        "--output", png_file, svg_file};
  ExitStatus status;
  try {
    status = Process::start(convert).wait();
  } catch (const ProcessStartError& e) {
    throw UserError(fmt::format(
        "cannot write '{}': a .png needs rsvg-convert ({}): install it with `apt-get install "
        "librsvg2-bin`, or write an .svg",
        path, std::strerror(e.error())));
  }
  std::ifstream png(png_file, std::ios::binary);
  if (!status.success() || !png) {
    throw UserError(fmt::format("rsvg-convert failed to render '{}': write an .svg instead", path));
  }
  write_file_atomic(path, std::string(std::istreambuf_iterator<char>(png), {}));
}

}  // namespace kiln
