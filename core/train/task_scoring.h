// Scoring an evaluation task (core/data/task_file.h) on an assembled run's model, as
// lm-evaluation-harness scores it:
// - choice: each choice's summed log-likelihood given the text asked. The continuation is
//   target_delimiter + the choice, the context's trailing whitespace moved to its front; the
//   context is encoded alone and the continuation's tokens are what encoding context +
//   continuation adds after it; the model reads context + continuation, cut from the left to its
//   context length when longer. A request none of whose choices was cut reads its context once
//   (core/train/cached_choices.h). acc: the highest log-likelihood is the label's; acc_norm: the
//   same after dividing each by its choice's length in characters; acc_bytes: in UTF-8 bytes.
// - generate: the continuation of the prompt (cut from the left to leave max_gen_toks of room),
//   token by token until a stop string, the end-of-text token or max_gen_toks; exact_match: the
//   text before the stop equals the answer, by the task's exact_match options.
// Each metric's standard error is the harness's: the sample standard deviation of the per-item
// scores over sqrt(items) (for 0/1 scores, sqrt(p(1-p)/(n-1))).
// Requests run in batches of similar length (longest first). Under data parallelism each data
// rank scores every data_world-th batch and the scores are summed over ranks, so every rank ends
// with the whole task's results, equal to one process's.
// Generate tasks are scored in task_generation.cpp; what both kinds share (encoding, batches,
// the sum over ranks) is task_batches.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/data/task_file.h"

namespace kiln {

struct AssembledRun;
class Tokenizer;

struct TaskMetric {
  std::string name;  // acc, acc_norm or exact_match
  double value = 0;
  double stderr_ = 0;
};

// What one request was asked and answered: the token ids the model read, for a comparison with
// another library (kiln eval --details).
struct TaskDetail {
  int64_t item = 0;
  std::vector<uint32_t> context;                     // the text asked, as read (after any cut)
  std::vector<std::vector<uint32_t>> continuations;  // choice: each choice's tokens
  std::vector<double> loglik;                        // choice: each choice's log-likelihood
  std::vector<uint32_t> generated;                   // generate: the tokens generated
  std::string text;                                  // generate: the text before the stop
  double score = 0;                                  // acc, or exact_match
};

struct TaskResult {
  std::string task;
  int64_t items = 0;
  int64_t truncated = 0;  // requests cut from the left to fit the model's context
  int64_t tokens = 0;     // tokens the model read (all ranks), padding left out
  std::vector<TaskMetric> metrics;
  std::vector<TaskDetail> details;  // every request, in item order
};

// One sequence a choice request has the model read: `input` (already cut to the context), the
// continuation `target`, and the position of `input` whose logits predict target[0].
// `whole`: no choice of the request was cut to fit, so every choice's input is the same context
// (input[0, first]) then target less its last token (core/train/cached_choices.h reads the
// context once).
struct TaskSequence {
  size_t request = 0, choice = 0;
  std::vector<uint32_t> input, target;
  size_t first = 0;
  bool whole = true;
};

// A task's requests encoded and cut to the model's context, so that every request the model
// cannot read is refused before any is scored.
struct PreparedTask {
  Task task;
  std::vector<TaskSequence> sequences;         // choice: one per item and choice
  std::vector<std::vector<uint32_t>> prompts;  // generate: one per item
  int64_t truncated = 0;                       // requests cut from the left
};

// A UserError "FILE:LINE: what: how to fix" for a text the tokenizer cannot encode or encodes to
// ids the model has no row for (`vocab_size`), a choice longer than the context, a choice that
// adds no token, or max_gen_toks that leaves the prompt no room.
PreparedTask prepare_task(Task task, const Tokenizer& tokenizer, int64_t context_length,
                          int64_t vocab_size);

struct TaskScoring {
  int64_t batch = 16;  // requests per forward pass
};

// Collective under data parallelism (every rank calls it with the same task). A UserError under
// a strategy that cuts the model into pipeline stages.
TaskResult score_task(AssembledRun& run, const Tokenizer& tokenizer, const PreparedTask& task,
                      const TaskScoring& scoring);

}  // namespace kiln
