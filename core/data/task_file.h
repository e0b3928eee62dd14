// Evaluation tasks (`kiln eval --task`, eval.tasks): a task file in TOML names the task, its kind
// and options, and a JSON Lines file of items; this reads and checks both and lays each item out
// as the text the model is asked, with its few-shot examples (the task file itself is read in
// task_spec.cpp). No LibTorch here (scoring is core/train/task_scoring.h).
//
// A task file (paths in it are relative to the task file's folder):
//   name = "kjv_cloze"          # letters, digits and _, unique among a run's tasks
//   kind = "choice"             # "choice": multiple choice; "generate": exact-match generation
//   items = "kjv_cloze.jsonl"   # choice: {"context": "...", "choices": ["...", ...], "label": k}
//                               # generate: {"prompt": "...", "answer": "...", "stop": ["\n"]}
//   few_shot = ""               # a pool of items of the same shape; "" = the other items
//   num_fewshot = 0             # examples put before each item, drawn from the pool by `seed`
//   seed = 0
//   delimiter = "\n\n"          # between the examples and the item
//   limit = 0                   # the first N items; 0 = all
//   template = "none"           # none: the text as it is; plain or chatml: data.template's turns
//   stop = ["\n"]               # generate: stop strings for items without their own
//   max_tokens = 32             # generate: the most tokens generated
//   temperature = 0.0           # generate: 0 = greedy; else sampled with `seed`
//   normalize = ["strip"]       # generate: before the exact match: strip, lower, collapse
//                               # (whitespace runs to one space), punctuation (ASCII, dropped)
//
// The text asked: the examples, each its context followed by its answer (a choice item's correct
// choice), joined by `delimiter`, then `delimiter` and the item's context. A choice's
// continuation is the choice as written, so its leading space (" lamb") belongs in the file, as
// lm-evaluation-harness's target_delimiter puts it there.
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
  std::vector<std::string> stop;
};

struct TaskSpec {
  std::string file;  // the task file, absolute
  std::string name;
  TaskKind kind = TaskKind::kChoice;
  std::string items, few_shot;  // absolute paths
  int64_t num_fewshot = 0, seed = 0, limit = 0;
  std::string delimiter = "\n\n";
  std::string chat_template = "none";
  std::vector<std::string> stop = {"\n"};
  int64_t max_tokens = 32;
  double temperature = 0;
  std::vector<std::string> normalize = {"strip"};
};

// The task file at `path`: a UserError "FILE:LINE:COL: what: how to fix" for a bad key or value.
TaskSpec read_task_spec(const std::string& path);

// One request of a task: the text asked, and per choice the continuation scored (choice tasks)
// or the answer and stop strings (generate tasks).
struct TaskRequest {
  int64_t item = 0;  // index among the task's items
  int64_t line = 0;  // the item's line in its JSONL file
  std::string context;
  std::vector<std::string> choices;
  int64_t label = 0;
  std::string answer;
  std::vector<std::string> stop;
};

struct Task {
  TaskSpec spec;
  std::vector<TaskRequest> requests;  // one per item, up to spec.limit
};

// The task's items read and checked (a UserError "FILE:LINE: what" for a record that is not one,
// a label out of range, empty choices, a few-shot count the pool cannot give) and laid out.
Task load_task(const TaskSpec& spec);

// The answer as exact match compares it, after the task's normalize steps.
std::string normalize_answer(const std::string& text, const std::vector<std::string>& steps);

// The generated text cut at the first of `stop` it contains.
std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stop);

}  // namespace kiln
