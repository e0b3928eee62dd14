// An evaluation task's file (`kiln eval --task`, eval.tasks): a TOML file that names the task,
// its kind and options, and the JSON Lines file of its items (core/data/task_file.h reads those),
// read with each key checked and each error at the key's line and column. No LibTorch here.
//
// A task file (paths in it are relative to the task file's folder; the keys and their defaults
// are lm-evaluation-harness's, docs/tasks.md cites the harness's lines):
//   name = "kjv_cloze"          # letters, digits and _, unique among a run's tasks
//   kind = "choice"             # "choice": multiple choice; "generate": exact-match generation
//   items = "kjv_cloze.jsonl"   # choice: {"context": "...", "choices": ["...", ...], "label": k}
//                               # generate: {"prompt": "...", "answer": "..."}
//   target_delimiter = " "      # between a context and its choice or answer
//   fewshot_delimiter = "\n\n"  # after each example
//   fewshot_file = ""           # a pool of items of the same shape; "" = the task's own items
//   num_fewshot = 0             # examples put before each item
//   fewshot_sampler = "random"  # random: drawn by `seed`; first_n: the pool's first ones
//   seed = 0
//   limit = 0                   # the first N items; 0 = all
//   template = "none"           # none: the text as it is; plain or chatml: data.template's turns
//   until = []                  # generate: stop strings; [] = [fewshot_delimiter]
//   max_gen_toks = 256          # generate: the most tokens generated
//   temperature = 0.0           # generate: 0 = greedy; else sampled with `seed`
//   filter = "none"             # generate: remove_whitespace strips the output's whitespace
//   ignore_case = false         # generate: exact match after lower-casing both
//   ignore_punctuation = false  # generate: ... after dropping ASCII punctuation from both
//   regexes_to_ignore = []      # generate: ... after deleting each pattern's matches from both
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

enum class TaskKind { kChoice, kGenerate };

enum class FewshotSampler { kRandom, kFirstN };

struct TaskSpec {
  std::string file;  // the task file, absolute
  std::string name;
  TaskKind kind = TaskKind::kChoice;
  std::string items, fewshot_file;  // absolute paths
  int64_t num_fewshot = 0, seed = 0, limit = 0;
  FewshotSampler fewshot_sampler = FewshotSampler::kRandom;
  std::string target_delimiter = " ";
  std::string fewshot_delimiter = "\n\n";
  std::string chat_template = "none";
  std::vector<std::string> until;  // as given; TaskRequest::until has the default filled in
  int64_t max_gen_toks = 256;
  double temperature = 0;
  bool remove_whitespace = false;  // filter = "remove_whitespace"
  bool ignore_case = false, ignore_punctuation = false;
  std::vector<std::string> regexes_to_ignore;
};

// The task file at `path`: a UserError "FILE:LINE:COL: what: how to fix" for a bad key or value.
TaskSpec read_task_spec(const std::string& path);

}  // namespace kiln
