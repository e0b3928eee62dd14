// Task scores in the run store (table task_scores, migration 11): per run, step, task and metric
// the score, its standard error, how many items it is over and how many were cut to fit the
// model's context (core/train/task_scoring.h). Evaluations during training have checkpoint "",
// `kiln eval --task` rows name the snapshot. --where, --sort, `runs compare --metric`,
// `runs plot`, the dashboard and TensorBoard read a score as the metric TASK.METRIC.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/store/db/connection.h"

namespace kiln {

// The version of the rules a score was computed by (column `rules`, migration 16): 1, Kiln's
// first rules (acc_norm per byte of the choice with its leading space, only trailing spaces of
// the context moved); 2, lm-evaluation-harness's (docs/tasks.md). Scores of two versions are not
// comparable: `runs compare` and `runs show` say so.
constexpr int64_t kTaskScoringRules = 2;

struct TaskScoreRow {
  int64_t step = 0;
  std::string task, metric;  // "kjv_cloze", "acc_norm"
  std::string checkpoint;    // the snapshot `kiln eval` loaded; "" during training
  double value = 0;
  double stderr_ = 0;
  int64_t items = 0;
  int64_t truncated = 0;
  int64_t rules = kTaskScoringRules;
};

// Inside the caller's transaction; a row with the same key replaces the old one.
void write_task_scores(Connection& db, int64_t run_id, const std::vector<TaskScoreRow>& rows);
// In order of step, task, metric and checkpoint; none on a store older than migration 11.
std::vector<TaskScoreRow> read_task_scores(Connection& db, int64_t run_id);
// "TASK.METRIC" of every score any run of the store has.
std::vector<std::string> task_metric_names(Connection& db);
// "kjv_cloze.acc_norm" -> {"kjv_cloze", "acc_norm"}; nothing for a name without one '.'.
bool split_task_metric(const std::string& name, std::string& task, std::string& metric);
// A line saying which of `run_ids`' scores of `task` (all tasks: "") were computed by older
// rules than kTaskScoringRules, with how to rescore them; "" when none were.
std::string older_rules_note(Connection& db, const std::vector<int64_t>& run_ids,
                             const std::string& task);

}  // namespace kiln
