// Which runs a command of the read side means: `kiln runs list`'s --where, --sort and --limit,
// and the names, ids, sweeps and globs `kiln runs show`, `compare` and `rm` are given. Separate
// from core/store/history/queries.h (which includes this file) because selecting runs is the one
// part of the read side that parses the user's --where and --sort (core/store/where/expr.h) and
// checks the config keys they name; the rest reads one run's rows. No LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/store/history/reader.h"
#include "core/store/runs/lookup.h"
#include "core/store/where/expr.h"

namespace kiln {

struct ListQuery {
  std::string where;        // core/store/where/expr.h; empty = every run
  std::string sort = "id";  // a key; '-' prefix = descending
  int64_t limit = 0;        // 0 = no limit
  // TASK.METRIC names to accept before the store holds any score of them: a sweep's metric,
  // which its base experiment's eval.tasks declares (else a fresh store refuses the sort).
  std::vector<std::string> declared_task_metrics = {};
  std::string sort_option = "--sort";  // how errors name `sort`
};

std::vector<RunRecord> list_runs(HistoryDb& db, const ListQuery& query);
// By name, or by id when no run has that name; the one "no run" UserError when neither exists.
RunRecord find_run_record(HistoryDb& db, const std::string& name_or_id);
// Each argument is a run name or id, a sweep, or a glob on names; in argument order, each run
// once; a UserError for an argument that matches nothing.
std::vector<RunRecord> match_runs(HistoryDb& db, const std::vector<std::string>& patterns);

// A metric at a point of a run, `METRIC@step=N` or `METRIC@tokens=T`, named and read as --where
// names and reads it (core/store/where/expr.h): `kiln runs compare --metric` takes its points so.
struct MetricPoint {
  std::string text;  // as given
  WhereKey key;      // a point
  // val_loss, test_loss, a task's score or a cooldown probe: taken at some steps only
  bool evaluation = false;
};
// A UserError naming `option` ("--metric") for text that is not such a point.
MetricPoint parse_metric_point(HistoryDb& db, const std::string& text, const std::string& option);

// The point's value in the run; none where the run lacks it.
struct PointReading {
  std::optional<double> value;
  double reached = 0;  // the run's last step (or most tokens seen) on the point's axis; 0: none
  std::vector<int64_t> steps;  // of the run's rows of the metric, when it has no value
};
PointReading read_metric_point(HistoryDb& db, int64_t run_id, const MetricPoint& point);

}  // namespace kiln
