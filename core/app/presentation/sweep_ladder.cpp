#include "core/app/presentation/sweep_ladder.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/store/history/selection.h"
#include "core/store/runs/rung_probes.h"
#include "core/util/text.h"

namespace kiln {

std::string ladder_text(const std::vector<LadderRung>& rungs, const LadderShape& shape) {
  size_t width = 0;
  for (const auto& rung : rungs)
    for (const auto& e : rung.entries)
      width = std::max(width, e.name.size());
  std::string out;
  for (size_t j = 0; j < rungs.size(); ++j) {
    const LadderRung& rung = rungs[j];
    const bool last = j + 1 == rungs.size();
    out +=
        fmt::format("rung {} of {}: step {}, {} member(s){}\n", j + 1, rungs.size(), rung.step,
                    rung.entries.size(), last ? "" : fmt::format(", the best {} go on", rung.keep));
    for (const auto& e : rung.entries) {
      const std::string uncooled =
          e.uncooled ? fmt::format(" (cooled; un-cooled {:.4f})", *e.uncooled) : "";
      out += fmt::format("  {:>3}. {:<{}}  {} {}{}  {}\n", e.place, e.name, width, shape.metric,
                         std::isfinite(e.value) ? fmt::format("{:.4f}", e.value) : "-", uncooled,
                         e.state);
    }
  }
  return out;
}

std::string sweep_steps_line(HistoryDb& db, const std::string& sweep) {
  int64_t members = 0, probes = 0;
  for (const RunRecord& run :
       latest_versions(list_runs(db, {"sweep = " + single_quoted(sweep), "id", 0}))) {
    members += run.steps;
    for (const auto& [step, probe] : read_rung_probes(db.connection(), run.id))
      probes += probe.steps;
  }
  return fmt::format("steps trained: {} by the members' runs + {} by cooldown probes = {}\n",
                     members, probes, members + probes);
}

}  // namespace kiln
