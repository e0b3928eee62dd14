#include "tools/kiln/snapshot_commands.h"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/app/run/from_snapshot.h"
#include "core/app/run/model_export.h"
#include "core/app/run/sampling.h"
#include "core/train/task_suite.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

struct SnapshotArgs {
  SnapshotRequest request;
  EvalOn eval;
  TaskEvalOn tasks;
  SampleOptions sampling;
  std::string export_path;
  std::string max_shard_size;  // as save_pretrained spells it; empty = one file
  bool force = false;          // export into a folder of other files
  bool merge = false;          // an adapter run's weights with the adapter folded in
};

// `kiln eval RUN --task T`: a line per task, then where the time went.
int task_command(const SnapshotArgs& args) {
  const TaskReport r = evaluate_tasks(args.request, args.tasks);
  int64_t tokens = 0, items = 0;
  for (const TaskResult& result : r.results) {
    std::cout << fmt::format("{} {} step {} | {}\n", r.run, r.checkpoint, r.step,
                             task_line(result));
    tokens += result.tokens;
    items += result.items;
  }
  // The time on stderr, as plain eval's: stdout stays the same for the same snapshot.
  args.request.note(fmt::format("scored {} items in {:.2f} s: {:.1f} items/s, {:.0f} tokens/s read",
                                items, r.seconds, items / std::max(r.seconds, 1e-9),
                                tokens / std::max(r.seconds, 1e-9)));
  return kExitOk;
}

// A run's name, or --hf's directory: one of them.
void check_source(const SnapshotArgs& args, const char* command) {
  if (args.request.run.empty() == args.request.hf.empty()) {
    throw UserError(fmt::format(
        "kiln {} takes a run or --hf DIR (a Hugging Face model directory), one of them", command));
  }
}

int eval_command(const SnapshotArgs& args) {
  check_source(args, "eval");
  if (!args.request.hf.empty() && args.tasks.task.empty()) {
    throw UserError("--hf " + args.request.hf +
                    ": kiln eval scores a Hugging Face directory on tasks: add --task FILE");
  }
  if (!args.tasks.task.empty()) return task_command(args);
  const EvalReport r = evaluate_snapshot(args.request, args.eval);
  // The time on stderr, before the result: stdout stays the same for the same snapshot and data.
  args.request.note(fmt::format("evaluated {} tokens in {:.2f} s ({:.0f} tokens/s)", r.tokens,
                                r.seconds, r.tokens / std::max(r.seconds, 1e-9)));
  std::cout << fmt::format(
      "{} {} step {} | {} loss {:.6f} | perplexity {:.4f} | {} batches, "
      "{} tokens{}\n",
      r.run, r.checkpoint, r.step, r.split, r.loss, r.perplexity, r.batches, r.tokens,
      r.counted_tokens > 0 ? fmt::format(" ({} counted by the loss)", r.counted_tokens) : "");
  return kExitOk;
}

int sample_command(const SnapshotArgs& args) {
  check_source(args, "sample");
  std::cout << sample_snapshot(args.request, args.sampling) << std::endl;
  return kExitOk;
}

int export_command(const SnapshotArgs& args) {
  ExportOptions options;
  options.force = args.force;
  options.merge = args.merge;
  if (!args.max_shard_size.empty()) {
    const std::optional<int64_t> size = parse_byte_size(args.max_shard_size);
    if (!size) {
      throw UserError(
          fmt::format("--max-shard-size {} is not a size: write it as "
                      "save_pretrained does, e.g. 2GB, 500MB or 5GiB",
                      args.max_shard_size));
    }
    options.max_shard_bytes = *size;
  }
  const int64_t tensors = export_snapshot(args.request, args.export_path, options);
  std::cout << fmt::format("wrote {} tensors to {}\n", tensors, args.export_path);
  return kExitOk;
}

}  // namespace

ChosenCommand add_snapshot_commands(CLI::App& app) {
  auto args = std::make_shared<SnapshotArgs>();
  args->request.note = [](const std::string& line) { std::cerr << "kiln: " << line << "\n"; };
  auto add_snapshot_options = [&](CLI::App* sub) {
    CLI::Option* run = sub->add_option("run", args->request.run, "run name or id");
    CLI::Option* checkpoint =
        sub->add_option("--checkpoint", args->request.checkpoint, "latest, best or a step number")
            ->capture_default_str();
    sub->add_option("--db", args->request.db, "run store")->capture_default_str();
    return std::make_pair(run, checkpoint);
  };
  CLI::App* eval = app.add_subcommand(
      "eval", "a snapshot's loss on a data split, or its scores on evaluation tasks");
  // A Hugging Face directory instead of a run (no snapshot to choose).
  auto add_hf_option = [&](CLI::App* sub, CLI::Option* checkpoint) {
    sub->add_option("--hf", args->request.hf,
                    "instead of a run: a Hugging Face model directory (config.json, safetensors "
                    "weights, tokenizer.json) Kiln did not train")
        ->excludes(checkpoint);
  };
  add_hf_option(eval, add_snapshot_options(eval).second);
  CLI::Option* split =
      eval->add_option("--split", args->eval.split, "val, test or train")->capture_default_str();
  CLI::Option* data =
      eval->add_option(
              "--data", args->eval.data,
              "evaluate on these files instead of a split: a path or glob in the run's data "
              "format (token shards from `kiln prepare`)")
          ->excludes(split);
  CLI::Option* logits =
      eval->add_option("--logits", args->eval.logits,
                       "also write the first micro-batch's logits, float32 [micro_batch, seq_len, "
                       "vocab], to this NumPy .npy file");
  CLI::Option* steps = eval->add_option("--steps", args->eval.batches,
                                        "micro-batches to evaluate; 0 = the whole split")
                           ->capture_default_str();
  CLI::Option* task =
      eval->add_option("--task", args->tasks.task,
                       "score evaluation tasks instead of the loss: a task file (TOML, as "
                       "experiments/tasks/*.toml), a glob of them, or a task of the run's "
                       "eval.tasks by name")
          ->excludes(split)
          ->excludes(steps)
          ->excludes(data)
          ->excludes(logits);
  eval->add_option("--details", args->tasks.details,
                   "with --task: write each request's token ids, log-likelihoods or generation "
                   "to this JSON Lines file")
      ->needs(task);
  eval->add_option("--batch", args->tasks.batch,
                   "with --task: requests per forward pass; 0 = the run's eval.task_batch")
      ->needs(task);
  eval->add_option("--threads", args->request.threads,
                   "CPU threads, as run.threads; 0 = the run's run.threads (--hf: run.threads's "
                   "default, OMP_NUM_THREADS if set, else the CPUs this process may use)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();

  CLI::App* sample = app.add_subcommand("sample", "generate text from a snapshot");
  add_hf_option(sample, add_snapshot_options(sample).second);
  SampleOptions& sampling = args->sampling;
  sample->add_option("--prompt", sampling.prompt, "text to continue")->capture_default_str();
  sample->add_option("--tokens", sampling.tokens, "tokens to generate")->capture_default_str();
  sample->add_option("--temperature", sampling.temperature, "0 = greedy")->capture_default_str();
  sample->add_option("--top-k", sampling.top_k, "sample among the k likeliest; 0 = all")
      ->capture_default_str();
  sample->add_option("--seed", sampling.seed, "sampling seed")->capture_default_str();

  CLI::App* exporter = app.add_subcommand(
      "export",
      "write a snapshot's weights as a Hugging Face model directory or safetensors file (an "
      "adapter run's as a PEFT adapter folder)");
  add_snapshot_options(exporter).first->required();
  exporter
      ->add_option("-o,--output", args->export_path,
                   "a directory (model.safetensors + config.json, as Hugging Face's "
                   "save_pretrained) or a file ending in .safetensors")
      ->required();
  exporter->add_option("--max-shard-size", args->max_shard_size,
                       "a directory's weights in files of at most SIZE (2GB, 500MB, 5GiB, as "
                       "save_pretrained spells it) with model.safetensors.index.json; default: "
                       "one file");
  exporter->add_flag("--force", args->force,
                     "export into a folder that holds other files: replace its config.json and "
                     "weights, keep the rest");
  exporter->add_flag("--merge", args->merge,
                     "an adapter run (adapter.type = \"lora\"): the model's full weights with the "
                     "adapter folded in, in place of PEFT's adapter folder");

  return [eval, sample, exporter, args]() -> std::optional<int> {
    if (*eval) return eval_command(*args);
    if (*sample) return sample_command(*args);
    if (*exporter) return export_command(*args);
    return std::nullopt;
  };
}

}  // namespace kiln
