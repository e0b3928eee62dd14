#include "core/app/presentation/report.h"

#include <algorithm>
#include <ctime>
#include <map>

#include <fmt/format.h>

#include "core/app/presentation/plot_svg.h"
#include "core/app/presentation/run_tables.h"
#include "core/app/presentation/seed_curves.h"
#include "core/util/error.h"

namespace kiln {

namespace {

const std::map<std::string, std::string>& metric_labels() {
  static const std::map<std::string, std::string> labels = {
      {"loss", "training loss (nats)"},
      {"val_loss", "validation loss (nats)"},
      {"lr", "learning rate"},
      {"grad_norm", "gradient norm (before clipping)"},
      {"tokens_per_sec", "tokens/s"}};
  return labels;
}

const std::map<std::string, std::string>& x_labels() {
  static const std::map<std::string, std::string> labels = {
      {"step", "optimizer step"}, {"tokens", "tokens seen"}, {"time", "training time (s)"}};
  return labels;
}

// A line per run; a run without data stays in the legend, marked, rather than silently missing.
std::vector<Series> run_series(HistoryDb& db, const std::vector<RunRecord>& runs,
                               const CurveRequest& request) {
  std::vector<Series> series;
  for (const auto& run : runs) {
    Curve curve = load_curve(db, run, request.metric, request.x);
    series.push_back({any_finite(curve.y) ? run.name : run.name + " (no data)", std::move(curve.x),
                      moving_average(curve.y, request.smooth)});
  }
  return series;
}

std::string html_table(const Table& table) {
  auto row = [&](const std::vector<std::string>& cells, const char* tag) {
    std::string out = "<tr>";
    for (size_t i = 0; i < cells.size(); ++i) {
      out += fmt::format("<{0}{1}>{2}</{0}>", tag, table.numeric[i] ? " class=\"n\"" : "",
                         escape_xml(cells[i]));
    }
    return out + "</tr>\n";
  };
  std::string out = "<table>\n" + row(table.header, "th");
  for (const auto& cells : table.rows)
    out += row(cells, "td");
  return out + "</table>\n";
}

std::string figure(HistoryDb& db, const std::vector<RunRecord>& runs, const std::string& metric) {
  try {
    return plot_runs(db, runs, CurveRequest{metric, "step", 1, false});
  } catch (const UserError&) {
    // A section without data says so instead of failing the whole report.
    return fmt::format("<p>No run has a {} value.</p>\n", escape_xml(metric_labels().at(metric)));
  }
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

constexpr const char* kStyle = R"(
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; color: #222; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.2em; margin-top: 2em; }
.meta { color: #666; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #ddd; text-align: left; white-space: nowrap; }
th { background: #f4f4f4; }
.n { text-align: right; font-variant-numeric: tabular-nums; }
svg { max-width: 100%; height: auto; display: block; }
)";

}  // namespace

std::string plot_runs(HistoryDb& db, const std::vector<RunRecord>& runs,
                      const CurveRequest& request) {
  if (request.smooth < 1) {
    throw UserError(
        fmt::format("--smooth {}: the window must be 1 or more points", request.smooth));
  }
  const std::vector<Series> series =
      request.group_by.empty() ? run_series(db, runs, request) : group_series(db, runs, request);
  if (std::none_of(series.begin(), series.end(), [](const Series& s) { return any_finite(s.y); })) {
    throw UserError(fmt::format("no run given has a {} value to plot{}", request.metric,
                                request.metric == "val_loss"
                                    ? ": validation needs [eval] every > 0 and a data.val split"
                                    : ""));
  }
  PlotStyle style;
  style.x_label = x_labels().at(request.x);
  const auto label = metric_labels().find(request.metric);  // else a task's TASK.METRIC
  style.y_label = label == metric_labels().end() ? request.metric : label->second;
  style.title = style.y_label + " by " + style.x_label;
  if (request.smooth > 1) style.title += fmt::format(", mean of {} points", request.smooth);
  if (!request.group_by.empty()) style.title += group_caption(request);
  style.log_y = request.log_y;
  return render_svg(series, style);
}

std::string render_report(HistoryDb& db, const std::vector<RunRecord>& runs,
                          const std::string& title) {
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>Kiln report: {0}</title>\n<style>{1}</style>\n</head>\n<body>\n"
      "<h1>Kiln report: {0}</h1>\n<p class=\"meta\">{2} run(s) from {3}, {4}.</p>\n",
      escape_xml(title), kStyle, runs.size(), escape_xml(db.path()), utc_now());
  out += "<h2>Runs</h2>\n" + html_table(run_list_table(runs));
  const Table config = differing_config_table(runs);
  out += "<h2>Config keys that differ</h2>\n" +
         (config.rows.empty() ? "<p>None besides run.name.</p>\n" : html_table(config));
  out += "<h2>Training loss</h2>\n" + figure(db, runs, "loss");
  out += "<h2>Validation loss</h2>\n" + figure(db, runs, "val_loss");
  return out + "</body>\n</html>\n";
}

}  // namespace kiln
