#include "core/app/run/from_snapshot.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <torch/utils.h>
#include <nlohmann/json.hpp>

#include "core/api/adapter.h"
#include "core/api/tokenizer.h"
#include "core/app/run/command_inputs.h"
#include "core/app/run/hf_checkpoint.h"
#include "core/app/run/opened_snapshot.h"
#include "core/checkpoint/hf_directory.h"
#include "core/checkpoint/weights_io.h"
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

// What an export writes of the tokenizer the run's data was prepared with (core/checkpoint/
// hf_directory.h). Export reads no data otherwise: when the data (and so the tokenizer) cannot be
// found, a note says what is left out.
TokenizerFiles data_tokenizer_files(const OpenedSnapshot& opened, const SnapshotRequest& request) {
  try {
    const auto data = open_split(opened.run, "train");
    return tokenizer_files_of(*load_tokenizer(data->tokenizer_dir()));
  } catch (const UserError& e) {
    request.note(fmt::format(
        "warning: the export gets no tokenizer.json, and config.json no bos/eos/pad ids: the "
        "tokenizer of the run's data cannot be read ({})",
        e.what()));
    return {};
  }
}

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

bool exports_directory(const std::string& out_path) {
  const std::string suffix = ".safetensors";
  return out_path.size() < suffix.size() ||
         out_path.compare(out_path.size() - suffix.size(), suffix.size(), suffix) != 0;
}

namespace {

// An export into a folder that already holds files may replace a user's own config.json: only a
// previous Kiln export, or --force, lets it.
void check_export_folder(const std::string& dir, bool force) {
  std::error_code ec;
  if (force || !std::filesystem::is_directory(dir, ec) || holds_kiln_export(dir)) return;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    names.push_back(entry.path().filename().string());
  if (names.empty()) return;
  std::sort(names.begin(), names.end());
  if (names.size() > 4) names.resize(4), names.back() = "...";
  throw UserError(fmt::format(
      "-o {}: the folder holds files that are not a Kiln export ({}): an export would replace "
      "its model files; give a new or empty folder, or --force to replace config.json and the "
      "weights and keep the rest",
      dir, join(names, ", ")));
}

// PEFT's adapter folder, naming the base as model.init_from gave it (the weights the adapter was
// trained on), or, for a base Kiln trained from scratch, by the run and its config hash.
int64_t export_adapter(const SnapshotRequest& request, OpenedSnapshot& opened,
                       const std::string& out_path,
                       const std::map<std::string, std::string>& metadata) {
  if (!exports_directory(out_path)) {
    throw UserError(fmt::format(
        "-o {}: an adapter run exports PEFT's adapter folder (adapter_config.json, "
        "adapter_model.safetensors): give a directory, or --merge for the model's full weights "
        "with the adapter folded in",
        out_path));
  }
  const Model& model = *opened.run.model;
  // As the experiment wrote it (a Hub id or a path relative to where the run started): what the
  // user will load the base by, not this machine's absolute path.
  const std::string init_from = opened.run.config.params("model").text("init_from");
  const std::string base =
      init_from.empty() ? fmt::format("kiln:{}@{}", opened.info.name, opened.info.config_hash)
                        : init_from;
  const auto weights = opened.run.adapter->peft_weights(model);
  const std::string config = opened.run.adapter->peft_config(model, base);
  replace_folder(
      out_path, [](const std::string& name) { return !is_model_directory_file(name); },
      [&](const std::string& staging) {
        write_peft_directory(staging, weights, config, metadata);
      });
  announce(request, opened);
  return static_cast<int64_t>(weights.size());
}

}  // namespace

int64_t export_snapshot(const SnapshotRequest& request, const std::string& out_path,
                        const ExportOptions& options) {
  const int64_t max_shard_bytes = options.max_shard_bytes;
  if (max_shard_bytes > 0 && !exports_directory(out_path)) {
    throw UserError(
        fmt::format("--max-shard-size shards a model directory, and -o {} names one "
                    ".safetensors file: give a directory",
                    out_path));
  }
  const OutputKind kind = exports_directory(out_path) ? OutputKind::kFolder : OutputKind::kFile;
  // The store is known before the snapshot is opened: refused first, in the store's own words.
  check_output_path(out_path, request.db, "-o", kind);
  std::error_code ec;
  if (exports_directory(out_path) && std::filesystem::exists(out_path, ec) &&
      !std::filesystem::is_directory(out_path, ec)) {
    throw UserError(
        fmt::format("-o {}: that is a file, and a path not ending in .safetensors "
                    "names a model directory: give a directory or a .safetensors path",
                    out_path));
  }
  OpenedSnapshot opened = open_snapshot_read_only(request, Assembly::kWeights);
  check_output_path(out_path, request.db, "-o", kind, recorded_inputs(opened.inputs));
  if (exports_directory(out_path)) check_export_folder(out_path, options.force);
  Adapter& adapter = *opened.run.adapter;
  if (options.merge && !adapter.adapts()) {
    throw UserError(
        fmt::format("--merge folds an adapter into the model's weights, and run '{}' trained none "
                    "(adapter.type = \"{}\"): leave --merge out",
                    opened.info.name, opened.run.config.type("adapter")));
  }
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {kExportRunKey, opened.info.name},
      {"kiln_snapshot", opened.snapshot.label},
      {"kiln_config_hash", opened.info.config_hash}};
  if (adapter.adapts() && !options.merge) {
    return export_adapter(request, opened, out_path, metadata);
  }
  if (options.merge) adapter.merge(*opened.run.model);
  const std::string config = opened.run.model->interchange_config();
  if (exports_directory(out_path) && config.empty()) {
    throw UserError(
        fmt::format("-o {}: model '{}' has no Hugging Face config to write a model "
                    "directory with: give a path ending in .safetensors",
                    out_path, opened.run.config.type("model")));
  }
  const TokenizerFiles tokenizer =
      exports_directory(out_path) ? data_tokenizer_files(opened, request) : TokenizerFiles{};
  auto weights = opened.run.model->export_weights();
  if (exports_directory(out_path)) {
    replace_folder(
        out_path, [](const std::string& name) { return !is_model_directory_file(name); },
        [&](const std::string& staging) {
          write_hf_directory(staging, weights, config, tokenizer, metadata, max_shard_bytes);
        });
  } else {
    write_weights(out_path, weights, metadata);
  }
  announce(request, opened);
  return static_cast<int64_t>(weights.size());
}

}  // namespace kiln
