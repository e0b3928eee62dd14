#include "core/app/presentation/sweep_summary.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/app/presentation/run_tables.h"
#include "core/app/presentation/seed_groups.h"
#include "core/app/presentation/sweep_ladder.h"
#include "core/store/db/location.h"
#include "core/store/history/queries.h"
#include "core/util/error.h"
#include "core/util/table.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// The members side by side: what varies, then how each did, best first by `sort`.
std::string sweep_summary(const std::vector<RunRecord>& runs, const std::string& sort) {
  if (runs.empty()) return "no member of the sweep is in the run store";
  Table table;
  const auto varied = differing_config(runs);
  for (const auto& [key, _] : varied) {
    table.header.push_back(key);
    table.numeric.push_back(true);
  }
  for (const char* column : {"final_loss", "best_val", "tok/s", "steps", "status"}) {
    table.header.push_back(column);
    table.numeric.push_back(std::string(column) != "status");
  }
  auto number = [](const std::optional<double>& v, const char* spec) {
    return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::string> row;
    for (const auto& [_, values] : varied)
      row.push_back(values[i].empty() ? "-" : values[i]);
    const RunRecord& r = runs[i];
    row.push_back(number(r.final_loss, "{:.4f}"));
    row.push_back(number(r.best_val, "{:.4f}"));
    row.push_back(number(r.tokens_per_sec, "{:.0f}"));
    row.push_back(fmt::format("{}/{}", r.steps, r.planned_steps));
    row.push_back(r.status);
    table.rows.push_back(std::move(row));
  }
  return fmt::format("sorted by {}\n{}", sort, render_text_table(table));
}

// With seeds (some config ran more than once), each config's completed runs as one sample: mean,
// interval and tests against the config that started first.
void print_seed_groups(HistoryDb& history, std::vector<RunRecord> records,
                       const std::function<void(const std::string&)>& print) {
  records.erase(std::remove_if(records.begin(), records.end(),
                               [](const RunRecord& r) { return r.status != "completed"; }),
                records.end());
  std::sort(records.begin(), records.end(),
            [](const RunRecord& a, const RunRecord& b) { return a.id < b.id; });
  const std::vector<RunGroup> groups = group_runs(records, {"auto"});
  if (!has_seeds(groups)) return;
  print("seeds grouped by config (completed members)");
  print(grouped_report(history, groups, {}));
}

// The ladder rung by rung, then the steps its search trained.
std::string ladder_and_cost(HistoryDb& db, const std::string& sweep, const LadderShape& shape,
                            bool ended) {
  return ladder_text(read_sweep_ladder(db, sweep, shape, ended), shape) +
         sweep_steps_line(db, sweep);
}

}  // namespace

std::string members_status(const std::string& db, const std::string& name) {
  if (!store_may_exist(db)) {
    fail_no_store(db, "pass the --db the sweep ran with");
  }
  HistoryDb history(db);
  const std::vector<RunRecord> runs =
      latest_versions(list_runs(history, ListQuery{"sweep = " + single_quoted(name), "id", 0}));
  if (runs.empty()) {
    throw UserError(
        fmt::format("no sweep '{}' in '{}': `kiln runs list --db {}` lists runs and their sweeps",
                    name, db, db));
  }
  std::map<std::string, int> counts;
  for (const RunRecord& run : runs)
    ++counts[run.status];
  std::vector<std::string> summary;
  for (const auto& [status, count] : counts)
    summary.push_back(fmt::format("{} {}", count, status));
  return fmt::format("sweep '{}': {} members, {}\n{}", name, runs.size(), join(summary, ", "),
                     sweep_summary(runs, "id"));
}

void print_sweep_report(const SweepReport& report,
                        const std::function<void(const std::string&)>& print) {
  HistoryDb history(report.db);
  if (report.ladder) {
    print("");
    print(ladder_and_cost(history, report.sweep, *report.ladder, report.ended));
  }
  std::vector<RunRecord> records;
  for (auto& r : list_runs(history, ListQuery{"", report.sort, 0, report.declared_task_metrics})) {
    if (r.sweep == report.sweep) records.push_back(std::move(r));
  }
  print("");
  print(sweep_summary(records, report.sort));
  print_seed_groups(history, records, print);
}

std::string search_status(const std::string& db, const std::string& sweep, const LadderShape& shape,
                          const std::vector<SweepDecision>& running) {
  HistoryDb history(db);
  std::string out = ladder_and_cost(history, sweep, shape, /*ended=*/false);
  for (const SweepDecision& claim : running) {
    out += fmt::format("running {} to {} on worker {}\n", claim.member,
                       claim.until > 0 ? fmt::format("step {}", claim.until) : "its end",
                       claim.reason);
  }
  return out;
}

}  // namespace kiln
