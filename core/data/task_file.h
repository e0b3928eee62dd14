// Evaluation tasks (`kiln eval --task`, eval.tasks): a task file in TOML names the task, its kind
// and options, and a JSON Lines file of items; this reads and checks both and lays each item out
// as the text the model is asked, with its few-shot examples (the task file itself is read in
// task_spec.cpp). No LibTorch here (scoring is core/train/task_scoring.h).
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
//
// Choices and answers are written without the delimiter (" God." is "God."): the continuation
// scored is target_delimiter + choice. The text asked: each example's context, target_delimiter,
// its answer (a choice item's correct choice) and fewshot_delimiter, then the item's context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

enum class TaskKind { kChoice, kGenerate };

struct TaskItem {
  int64_t line = 0;     // in its JSONL file
  std::string context;  // "context" or "prompt"
  std::vector<std::string> choices;
  int64_t label = 0;
  std::string answer;
};

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

// One request of a task: the text asked, and per choice the continuation scored (choice tasks:
// target_delimiter + the choice) or the answer and stop strings (generate tasks).
struct TaskRequest {
  int64_t item = 0;  // index among the task's items
  int64_t line = 0;  // the item's line in its JSONL file
  std::string context;
  std::vector<std::string> choices;        // as written, for acc_norm's and acc_bytes' lengths
  std::vector<std::string> continuations;  // target_delimiter + choice
  int64_t label = 0;
  std::string answer;
  std::vector<std::string> until;
};

struct Task {
  TaskSpec spec;
  std::vector<TaskRequest> requests;  // one per item, up to spec.limit
};

// The task's items read and checked (a UserError "FILE:LINE: what" for a record that is not one,
// a label out of range, empty choices, a choice or answer that starts with whitespace after a
// target_delimiter that ends with it, a few-shot count the pool cannot give) and laid out.
Task load_task(const TaskSpec& spec);

// Whether the generated text (already cut at the stop strings) is the answer, by the harness's
// exact_match: the filter on the output, then regexes_to_ignore, ignore_case and
// ignore_punctuation on both.
bool exact_match(const TaskSpec& spec, const std::string& generated, const std::string& answer);

// The generated text cut at the first of `stop` it contains.
std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stop);

}  // namespace kiln
