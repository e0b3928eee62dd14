// Evaluation tasks (`kiln eval --task`, eval.tasks): the items of a task file (its JSON Lines
// file, core/data/task_spec.h reads the task file that names it) read and checked, each laid out
// as the text the model is asked, with its few-shot examples. No LibTorch here (scoring is
// core/train/task_scoring.h).
//
// Choices and answers are written without the delimiter (" God." is "God."): the continuation
// scored is target_delimiter + choice. The text asked: each example's context, target_delimiter,
// its answer (a choice item's correct choice) and fewshot_delimiter, then the item's context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/data/task_spec.h"

namespace kiln {

struct TaskItem {
  int64_t line = 0;     // in its JSONL file
  std::string context;  // "context" or "prompt"
  std::vector<std::string> choices;
  int64_t label = 0;
  std::string answer;
};

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
