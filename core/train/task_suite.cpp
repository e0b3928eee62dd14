#include "core/train/task_suite.h"

#include <map>

#include <fmt/format.h>

#include "core/api/tokenizer.h"
#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {

std::vector<Task> load_tasks(const std::string& pattern, const std::string& option) {
  if (pattern.empty()) return {};
  const std::vector<std::string> files = glob_files(pattern);
  if (files.empty()) {
    throw UserError(
        fmt::format("{} = '{}' matches no task file: give the path or glob of task "
                    "files (TOML, as experiments/tasks/*.toml)",
                    option, pattern));
  }
  std::vector<Task> tasks;
  std::map<std::string, std::string> file_of;  // name -> the task file that gave it
  for (const std::string& file : files) {
    const TaskSpec spec = read_task_spec(file);
    const auto [given, fresh] = file_of.emplace(spec.name, spec.file);
    if (!fresh) {
      throw UserError(fmt::format(
          "{}: task name '{}' is given twice, here and in {}: give one of them another name",
          spec.file, spec.name, given->second));
    }
    tasks.push_back(load_task(spec));
  }
  return tasks;
}

TaskSuite::TaskSuite(std::vector<Task> tasks, std::shared_ptr<Tokenizer> tokenizer,
                     int64_t context_length, int64_t vocab_size)
    : tokenizer_(std::move(tokenizer)) {
  for (Task& task : tasks)
    tasks_.push_back(prepare_task(std::move(task), *tokenizer_, context_length, vocab_size));
}

std::vector<TaskResult> TaskSuite::score(AssembledRun& run, const TaskScoring& scoring) const {
  std::vector<TaskResult> results;
  for (const PreparedTask& task : tasks_)
    results.push_back(score_task(run, *tokenizer_, task, scoring));
  return results;
}

std::vector<TaskScoreRow> task_score_rows(const TaskResult& result, int64_t step,
                                          const std::string& checkpoint) {
  std::vector<TaskScoreRow> rows;
  for (const TaskMetric& m : result.metrics) {
    rows.push_back({step, result.task, m.name, checkpoint, m.value, m.stderr_, result.items,
                    result.truncated});
  }
  return rows;
}

std::string task_line(const TaskResult& result) {
  std::string scores;
  for (const TaskMetric& m : result.metrics)
    scores +=
        fmt::format("{}{} {:.4f} ± {:.4f}", scores.empty() ? "" : ", ", m.name, m.value, m.stderr_);
  return fmt::format(
      "task {}: {} ({} items{})", result.task, scores, result.items,
      result.truncated ? fmt::format(", {} cut to fit the context", result.truncated) : "");
}

}  // namespace kiln
