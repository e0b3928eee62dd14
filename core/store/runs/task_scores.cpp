#include "core/store/runs/task_scores.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/store/runs/lookup.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// A store read without upgrading it may predate the column: its scores are all version 1's.
std::string rules_column(Connection& db) {
  return has_column(db, "task_scores", "rules") ? "rules" : "1";
}

}  // namespace

void write_task_scores(Connection& db, int64_t run_id, const std::vector<TaskScoreRow>& rows) {
  Statement insert(db, R"sql(
      INSERT OR REPLACE INTO task_scores (run_id, step, task, metric, checkpoint, value, stderr,
                                          items, truncated, rules)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?))sql");
  for (const TaskScoreRow& row : rows) {
    insert.bind(1, run_id).bind(2, row.step).bind(3, row.task).bind(4, row.metric);
    insert.bind(5, row.checkpoint).bind(6, row.value).bind(7, row.stderr_);
    insert.bind(8, row.items).bind(9, row.truncated).bind(10, row.rules);
    insert.step();
    insert.reset();
  }
}

std::vector<TaskScoreRow> read_task_scores(Connection& db, int64_t run_id) {
  std::vector<TaskScoreRow> rows;
  if (!has_table(db, "task_scores")) return rows;
  Statement q(db,
              "SELECT step, task, metric, checkpoint, value, coalesce(stderr, 0), items, "
              "truncated, " +
                  rules_column(db) +
                  " FROM task_scores WHERE run_id = ? "
                  "ORDER BY step, task, metric, checkpoint",
              {run_id});
  while (q.step()) {
    rows.push_back({q.integer(0), q.text(1), q.text(2), q.text(3), q.real(4), q.real(5),
                    q.integer(6), q.integer(7), q.integer(8)});
  }
  return rows;
}

std::vector<std::string> task_metric_names(Connection& db) {
  std::vector<std::string> names;
  if (!has_table(db, "task_scores")) return names;
  Statement q(db, "SELECT DISTINCT task, metric FROM task_scores ORDER BY task, metric");
  while (q.step())
    names.push_back(q.text(0) + "." + q.text(1));
  return names;
}

bool split_task_metric(const std::string& name, std::string& task, std::string& metric) {
  const size_t dot = name.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == name.size() ||
      name.find('.', dot + 1) != std::string::npos) {
    return false;
  }
  task = name.substr(0, dot);
  metric = name.substr(dot + 1);
  return true;
}

std::string older_rules_note(Connection& db, const std::vector<int64_t>& run_ids,
                             const std::string& task) {
  if (run_ids.empty() || !has_table(db, "task_scores")) return "";
  const std::string rules = rules_column(db) == "rules" ? "t.rules" : "1";
  std::vector<std::string> older, tasks;
  for (int64_t id : run_ids) {
    Statement q(db,
                "SELECT DISTINCT r.name, t.task FROM task_scores t JOIN runs r ON r.id = t.run_id "
                "WHERE t.run_id = ? AND " +
                    rules + " < ? AND (? = '' OR t.task = ?) ORDER BY t.task",
                {id, kTaskScoringRules, task, task});
    while (q.step()) {
      if (std::find(older.begin(), older.end(), q.text(0)) == older.end())
        older.push_back(q.text(0));
      if (std::find(tasks.begin(), tasks.end(), q.text(1)) == tasks.end())
        tasks.push_back(q.text(1));
    }
  }
  if (older.empty()) return "";
  return fmt::format(
      "note: the {} scores of {} were computed by Kiln's scoring rules before version {} "
      "(lm-evaluation-harness's acc_norm and whitespace), and differ from those computed since: "
      "score the run again with `kiln eval RUN --task FILE` before comparing them",
      join(tasks, ", "), join(older, ", "), kTaskScoringRules);
}

}  // namespace kiln
