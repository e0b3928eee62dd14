#include "core/store/history/rung_ladder.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <utility>

#include <fmt/format.h>

#include "core/store/history/queries.h"
#include "core/store/history/reader.h"
#include "core/store/history/selection.h"
#include "core/store/runs/rung_probes.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// A value's rank at a rung: lower is better, a value that is not finite the worst.
double score(double value, bool maximize) {
  if (!std::isfinite(value)) return INFINITY;
  return maximize ? -value : value;
}

// Where a run with these rung values stands at rung `j` (of `rungs`), its run's status and steps
// as the store says.
std::string state_at(const std::vector<double>& values, size_t j, const RunRecord& run,
                     const LadderShape& shape, bool ended) {
  if (j + 1 == shape.rungs.size()) return run.status;
  if (values.size() > j + 1) return "promoted";
  const bool at_rung = run.steps == shape.rungs[j];
  if (run.status == "running" || (run.status == "interrupted" && !at_rung)) {
    return "promoted (on its way)";
  }
  if (run.status == "failed") return "failed";
  return ended ? "stopped" : "paused";
}

// NAME:vK -> {NAME, K}; a name without a version is version 1.
std::pair<std::string, int64_t> name_and_version(const std::string& name) {
  static const std::regex versioned("(.*):v([0-9]{1,9})");
  std::smatch m;
  if (std::regex_match(name, m, versioned)) return {m[1].str(), std::stoll(m[2].str())};
  return {name, 1};
}

}  // namespace

std::vector<RunRecord> latest_versions(std::vector<RunRecord> runs) {
  std::map<std::string, int64_t> latest;
  for (const RunRecord& run : runs) {
    const auto [name, version] = name_and_version(run.name);
    latest[name] = std::max(latest[name], version);
  }
  runs.erase(std::remove_if(runs.begin(), runs.end(),
                            [&](const RunRecord& run) {
                              const auto [name, version] = name_and_version(run.name);
                              return version < latest[name];
                            }),
             runs.end());
  return runs;
}

std::vector<double> rung_values(HistoryDb& db, const RunRecord& run, const LadderShape& shape,
                                std::vector<double>* uncooled) {
  const Curve curve = load_curve(db, run, shape.metric, "step");
  const std::map<int64_t, RungProbe> probes = read_rung_probes(db.connection(), run.id);
  std::vector<double> values;
  for (size_t j = 0; j < shape.rungs.size() && shape.rungs[j] <= run.steps; ++j) {
    const auto at = std::find(curve.x.begin(), curve.x.end(), static_cast<double>(shape.rungs[j]));
    if (at == curve.x.end()) break;
    const double own = curve.y[static_cast<size_t>(at - curve.x.begin())];
    const auto probe = probes.find(shape.rungs[j]);
    const bool cooled = probe != probes.end() && j + 1 < shape.rungs.size();
    // A probe stopped before it scored leaves the rung owed, not scored un-cooled among cooled.
    if (shape.cooled && !cooled && j + 1 < shape.rungs.size()) break;
    values.push_back(cooled ? probe->second.val_loss : own);
    if (uncooled) uncooled->push_back(own);
  }
  return values;
}

std::vector<LadderRung> read_sweep_ladder(HistoryDb& db, const std::string& sweep,
                                          const LadderShape& shape, bool ended) {
  const std::vector<RunRecord> runs =
      latest_versions(list_runs(db, {"sweep = " + single_quoted(sweep), "id", 0}));
  std::vector<std::vector<double>> values, own;
  for (const auto& run : runs) {
    own.emplace_back();
    values.push_back(rung_values(db, run, shape, &own.back()));
  }
  std::vector<LadderRung> rungs;
  for (size_t j = 0; j < shape.rungs.size(); ++j) {
    LadderRung rung{shape.rungs[j], 0, {}};
    std::vector<size_t> at;
    for (size_t i = 0; i < runs.size(); ++i)
      if (values[i].size() > j) at.push_back(i);
    std::stable_sort(at.begin(), at.end(), [&](size_t a, size_t b) {
      return score(values[a][j], shape.maximize) < score(values[b][j], shape.maximize);
    });
    for (size_t k = 0; k < at.size(); ++k) {
      const RunRecord& run = runs[at[k]];
      const double score = values[at[k]][j], trajectory = own[at[k]][j];
      const bool cooled = score != trajectory && !(std::isnan(score) && std::isnan(trajectory));
      rung.entries.push_back({run.id, run.name, score,
                              cooled ? std::optional<double>(trajectory) : std::nullopt, k + 1,
                              state_at(values[at[k]], j, run, shape, ended)});
    }
    const bool last = j + 1 == shape.rungs.size();
    rung.keep = last ? 0 : at.size() / static_cast<size_t>(shape.reduction_factor);
    rungs.push_back(std::move(rung));
  }
  return rungs;
}

std::string last_rung_sort_key(const LadderShape& shape) {
  return fmt::format("{}{}@step={}", shape.maximize ? "-" : "", shape.metric, shape.rungs.back());
}

}  // namespace kiln
