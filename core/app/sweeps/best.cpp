#include "core/app/sweeps/best.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/config/canonical.h"
#include "core/store/history/queries.h"
#include "core/store/history/rung_ladder.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// The config without the keys of [run] that name a run: run.name and run.sweep.
std::string without_run_name(const std::string& config) {
  std::string out, section;
  for (const std::string& line : split(config, '\n')) {
    if (!line.empty() && line[0] == '[') section = line;
    const bool naming = line.rfind("name = ", 0) == 0 || line.rfind("sweep = ", 0) == 0;
    if (section == "[run]" && naming) continue;
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string best_member_toml(HistoryDb& db, const std::string& sweep, const std::string& by,
                             const std::vector<std::string>& declared_task_metrics) {
  const std::string of_sweep = "sweep = " + single_quoted(sweep);
  // The key alone first: an error about it names --by, not the filter built from it below.
  const std::vector<RunRecord> members =
      latest_versions(list_runs(db, {of_sweep, by, 0, declared_task_metrics, "--by"}));
  if (members.empty()) {
    throw UserError(
        fmt::format("no sweep '{}' in '{}': `kiln runs list --db {}` lists runs and "
                    "their sweeps",
                    sweep, db.path(), db.path()));
  }
  const std::string key = by.empty() || by[0] != '-' ? by : by.substr(1);
  // Only completed members with a value of the key: NULL compares false, every number passes.
  std::vector<RunRecord> ranked =
      list_runs(db, {of_sweep + " and status = completed and " + key + " >= -1e308", by, 0,
                     declared_task_metrics, "--by"});
  std::erase_if(ranked, [&](const RunRecord& run) {
    return std::none_of(members.begin(), members.end(),
                        [&](const RunRecord& member) { return member.id == run.id; });
  });
  if (ranked.empty()) {
    throw UserError(fmt::format(
        "sweep '{}' has no completed member with a value of {} ({} member{}): pick another "
        "--by key, or finish the members (`kiln sweep` resumes them)",
        sweep, key, members.size(), members.size() == 1 ? "" : "s"));
  }
  const RunRecord& best = ranked.front();
  return fmt::format(
      "# The best member of sweep '{}' by {} ({} of its {} members completed with a value):\n"
      "#   {} (id {}, config hash {})\n"
      "# Its resolved config without run.name and run.sweep: `extends` it, or `kiln run` it.\n{}",
      sweep, by, ranked.size(), members.size(), best.name, best.id, best.config_hash,
      without_run_name(best.config));
}

}  // namespace kiln
