#include "core/app/run/from_snapshot.h"

#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <torch/utils.h>
#include <nlohmann/json.hpp>

#include "core/api/tokenizer.h"
#include "core/app/run/command_inputs.h"
#include "core/app/run/hf_checkpoint.h"
#include "core/app/run/opened_snapshot.h"
#include "core/layers/kv_cache.h"
#include "core/store/runs/inputs.h"
#include "core/store/runs/lookup.h"
#include "core/store/runs/writer.h"
#include "core/train/assemble.h"
#include "core/train/task_suite.h"
#include "core/train/trainer.h"
#include "core/util/allocation_meter.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/npy.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// `kiln eval --logits FILE`: the logits of the data's first micro-batch, in fp32, as .npy.
void write_first_logits(OpenedSnapshot& opened, DataSource& data, const std::string& path) {
  data.reset();
  const Batch batch = data.next();
  torch::NoGradGuard no_grad;
  Model& model = *opened.run.model;
  const torch::Tensor logits = model.forward(batch.inputs.to(opened.run.device))
                                   .narrow(-1, 0, model.vocab_size())
                                   .to(torch::kFloat)
                                   .cpu()
                                   .contiguous();
  write_file_atomic(path, npy_float32(logits.sizes().vec(), logits.data_ptr<float>()));
}

}  // namespace

EvalReport evaluate_snapshot(const SnapshotRequest& request, const EvalOn& on) {
  const std::string& split = on.split;
  if (split != "train" && split != "val" && split != "test") {
    throw UserError(fmt::format("--split {} is not a split: use val, test or train", split));
  }
  const std::string files = absolute_path(on.data);
  if (!files.empty() && glob_files(files).empty()) {
    throw UserError(
        fmt::format("--data {} matches no file: give a path or glob of files in the "
                    "run's data format (token shards from `kiln prepare`)",
                    on.data));
  }
  require_store_file(request.db);
  RunStore store(request.db);  // eval records a row: a store it cannot write is refused first
  OpenedSnapshot opened = open_snapshot(request, store.connection(), RunColumns{}, Assembly::kLoad);
  auto data = open_split(opened.run, split, files);
  if (!data) {
    throw UserError(
        fmt::format("run '{}' has no {} split: set data.{} in its experiment, or "
                    "evaluate on files with --data",
                    opened.info.name, split, split));
  }
  std::vector<CommandInput> reads = recorded_inputs(opened.inputs);
  for (const std::string& file : glob_files(files))
    reads.push_back({file, "a file of --data"});
  prepare_output_file(on.logits, request.db, "--logits", reads);
  // The split's files as the run's record has them, or a warning: the loss is then on others.
  if (files.empty()) {
    for (const auto& line : changed_inputs(opened.inputs, inputs_of(opened.run.config)))
      request.note("warning: the files differ from the run's record of them: " + line);
  }
  announce(request, opened);
  const int64_t count = on.batches > 0 ? on.batches : data->batches_per_pass();
  Trainer trainer(opened.run);
  EvalReport report;
  report.run = opened.info.name;
  report.checkpoint = opened.snapshot.label;
  report.split = files.empty() ? split : files;
  report.step = opened.state.step;
  report.batches = count;
  report.tokens = count * opened.run.train.micro_batch * opened.run.train.seq_len;
  const auto start = std::chrono::steady_clock::now();
  const EvalResult result = trainer.evaluate(*data, count);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.loss = result.loss;
  if (data->masks_loss()) report.counted_tokens = result.tokens;
  report.perplexity = std::exp(report.loss);
  std::optional<int64_t> counted;
  if (report.counted_tokens > 0) counted = report.counted_tokens;
  store.add_eval(opened.info.id,
                 EvalRow{report.step, report.split, report.loss, report.checkpoint, counted});
  store.flush();
  if (!on.logits.empty()) write_first_logits(opened, *data, on.logits);
  return report;
}

namespace {

// --task's tasks: the files it names, or the run's eval.tasks task of that name.
std::vector<Task> tasks_named(const std::string& given, const AssembledRun& run,
                              const std::string& run_name) {
  if (!glob_files(absolute_path(given)).empty()) return load_tasks(absolute_path(given), "--task");
  std::vector<std::string> names;
  for (Task& task : load_tasks(run.eval.tasks, "the run's eval.tasks")) {
    if (task.spec.name == given) return {std::move(task)};
    names.push_back(task.spec.name);
  }
  throw UserError(fmt::format(
      "--task {} is neither a task file nor a task of run '{}' ({}): give the path of a task "
      "file (TOML, as experiments/tasks/*.toml)",
      given, run_name,
      names.empty() ? "it has no eval.tasks" : "its tasks are " + join(names, ", ")));
}

}  // namespace

std::string details_lines(const std::vector<TaskResult>& results) {
  std::string out;
  for (const TaskResult& result : results) {
    for (const TaskDetail& d : result.details) {
      nlohmann::ordered_json line = {
          {"task", result.task}, {"item", d.item}, {"context", d.context}};
      if (!d.continuations.empty()) {
        line["continuations"] = d.continuations;
        line["loglik"] = d.loglik;
      } else {
        line["generated"] = d.generated;
        line["text"] = d.text;
      }
      line["score"] = d.score;
      out += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
  }
  return out;
}

TaskReport evaluate_tasks(const SnapshotRequest& request, const TaskEvalOn& on) {
  if (on.batch < 0) throw UserError("--batch must be at least 1 (0 = the run's eval.task_batch)");
  if (!request.hf.empty()) return evaluate_hf_tasks(request, on);
  require_store_file(request.db);
  RunStore store(request.db);  // it records rows: a store it cannot write is refused first
  OpenedSnapshot opened = open_snapshot(request, store.connection(), RunColumns{}, Assembly::kLoad);
  std::vector<Task> tasks = tasks_named(on.task, opened.run, opened.info.name);
  std::vector<CommandInput> reads = task_inputs(tasks), recorded = recorded_inputs(opened.inputs);
  reads.insert(reads.end(), recorded.begin(), recorded.end());
  prepare_output_file(on.details, request.db, "--details", reads);
  const TaskSuite suite(std::move(tasks), load_tokenizer(opened.run.train_data->tokenizer_dir()),
                        opened.run.model->context_length(), opened.run.model->vocab_size());
  announce(request, opened);
  const auto start = std::chrono::steady_clock::now();
  const TaskScoring scoring{on.batch > 0 ? on.batch : opened.run.eval.task_batch};
  TaskReport report{opened.info.name, opened.snapshot.label, opened.state.step,
                    suite.score(opened.run, scoring), 0};
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const TaskResult& result : report.results)
    store.add_task_scores(opened.info.id, task_score_rows(result, report.step, report.checkpoint));
  if (!on.details.empty()) write_file_atomic(on.details, details_lines(report.results));
  return report;
}

}  // namespace kiln
