#include "core/app/run/hf_checkpoint.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#define XXH_INLINE_ALL
#include <fmt/format.h>
#include <torch/torch.h>
#include <xxhash.h>
#include <nlohmann/json.hpp>

#include "core/api/hf_config.h"
#include "core/api/tokenizer.h"
#include "core/app/run/command_inputs.h"
#include "core/app/run/opened_snapshot.h"
#include "core/checkpoint/hf_directory.h"
#include "core/config/config.h"
#include "core/store/runs/lookup.h"
#include "core/store/runs/writer.h"
#include "core/train/task_suite.h"
#include "core/util/error.h"
#include "core/util/file_fingerprint.h"
#include "core/util/fs.h"
#include "core/util/process.h"
#include "core/util/text.h"

namespace kiln {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json read_json(const std::string& path, const std::string& dir) {
  std::ifstream in(path);
  if (!in) {
    throw UserError(
        fmt::format("{}: no {}: give a Hugging Face model directory (config.json, "
                    "tokenizer.json and safetensors weights)",
                    dir, fs::path(path).filename().string()));
  }
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw UserError(json_error_text(path, e.what()) + ": not valid JSON: fix or replace the file");
  }
}

// XXH3 over each file's own checksum, in name order.
std::string fingerprint_of(const std::string& dir) {
  std::string checksums;
  for (const char* pattern : {"/config.json", "/tokenizer.json", "/*.safetensors"}) {
    for (const FileFingerprint& f : fingerprint_files(dir + pattern))
      checksums += fs::path(f.path).filename().string() + " " + f.checksum + "\n";
  }
  return fmt::format("hf:{:016x}", XXH3_64bits(checksums.data(), checksums.size()));
}

}  // namespace

HfCheckpoint open_hf_checkpoint(const std::string& given, int64_t threads) {
  HfCheckpoint out;
  // "model/" and "." name their folder: the run is named after it.
  fs::path dir = fs::path(absolute_path(given)).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  out.dir = dir.string();
  if (!fs::is_directory(out.dir)) {
    throw UserError(
        fmt::format("--hf {}: not a directory: give a Hugging Face model directory", given));
  }
  const json config = read_json(out.dir + "/config.json", given);
  const std::string section =
      read_hf_config(config, (fs::path(given) / "config.json").string()).model_section;
  if (!fs::exists(out.dir + "/model.safetensors") &&
      !fs::exists(out.dir + "/model.safetensors.index.json")) {
    throw UserError(fmt::format(
        "{}: no weights (model.safetensors, or model.safetensors.index.json and its shards): "
        "save the model with save_pretrained(..., safe_serialization=True)",
        given));
  }
  if (!fs::exists(out.dir + "/tokenizer.json")) {
    throw UserError(fmt::format(
        "{}: no tokenizer.json: save the tokenizer beside the model (tokenizer.save_pretrained)",
        given));
  }
  out.tokenizer = TokenizerRegistry::create("hf", json{{"file", out.dir + "/tokenizer.json"}});
  out.name = "hf-" + fs::path(out.dir).filename().string();
  out.fingerprint = fingerprint_of(out.dir);
  // In float32, as the harness scores a float32 checkpoint: no precision chosen by measurement.
  // Nothing trains: train.seq_len only has to fit the model's context.
  const ResolvedConfig resolved = load_config_text(
      "[model]\n" + section + "\n[precision]\ntype = \"fp32\"\n\n[train]\nseq_len = 1\n",
      out.dir + "/config.json", threads_override(threads));
  out.run = assemble(resolved, Assembly::kWeights);
  torch::NoGradGuard no_grad;
  out.run.model->import_weights(read_model_weights(out.dir, out.run.model->interchange_config()));
  out.run.model->eval();
  return out;
}

TaskReport evaluate_hf_tasks(const SnapshotRequest& request, const TaskEvalOn& on) {
  std::vector<Task> tasks = load_tasks(absolute_path(on.task), "--task");
  std::vector<CommandInput> reads = task_inputs(tasks);
  reads.push_back({request.hf, "the --hf model folder"});
  prepare_output_file(on.details, request.db, "--details", reads);
  HfCheckpoint checkpoint = open_hf_checkpoint(request.hf, request.threads);
  const TaskSuite suite(std::move(tasks), checkpoint.tokenizer,
                        checkpoint.run.model->context_length(), checkpoint.run.model->vocab_size());
  RunStore store(request.db);
  int64_t id = 0;
  if (const auto known = lookup_run(store.connection(), checkpoint.name, RunColumns{})) {
    if (known->experiment != checkpoint.dir) {
      throw UserError(fmt::format(
          "--hf {}: the run store's run '{}' holds the scores of {}, another directory: rename "
          "this folder, or use another --db",
          request.hf, checkpoint.name, known->experiment));
    }
    id = known->id;
  } else {
    // Its config holds the sections read from the directory, the model and the float32 it runs
    // in, and no learning rate, schedule or step count it never had: `kiln runs compare` shows
    // '-' for those beside a trained run's.
    ResolvedConfig read = checkpoint.run.config;
    std::erase_if(read.sections,
                  [](const Section& s) { return s.name != "model" && s.name != "precision"; });
    id = store.create_run(NewRun{checkpoint.name, checkpoint.dir, read.to_toml(),
                                 checkpoint.run.config.hash(), 0, 1, 0, "", host_name(), "", "",
                                 ""});
    store.finish_run(id, "completed");
  }
  if (request.note) {
    request.note(fmt::format("{}: {} ({}), run '{}', {} CPU threads", request.hf,
                             checkpoint.fingerprint, checkpoint.run.config.type("model"),
                             checkpoint.name, at::get_num_threads()));
  }
  const auto start = std::chrono::steady_clock::now();
  const TaskScoring scoring{on.batch > 0 ? on.batch : checkpoint.run.eval.task_batch};
  TaskReport report{checkpoint.name, checkpoint.fingerprint, 0,
                    suite.score(checkpoint.run, scoring), 0};
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const TaskResult& result : report.results)
    store.add_task_scores(id, task_score_rows(result, 0, checkpoint.fingerprint));
  if (!on.details.empty()) write_file_atomic(on.details, details_lines(report.results));
  return report;
}

}  // namespace kiln
