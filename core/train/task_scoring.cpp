#include "core/train/task_scoring.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/api/tokenizer.h"
#include "core/data/chat_records.h"
#include "core/train/assemble.h"
#include "core/train/cached_choices.h"
#include "core/train/task_batches.h"
#include "core/train/task_generation.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// Choice requests as the model reads them (see the header for the encoding).
std::vector<TaskSequence> choice_sequences(const Task& task, const Tokenizer& tokenizer,
                                           int64_t block, int64_t& truncated) {
  std::vector<TaskSequence> out;
  for (size_t r = 0; r < task.requests.size(); ++r) {
    const TaskRequest& request = task.requests[r];
    const std::string where = where_of(task, request);
    std::string context = request.context;
    const std::string moved = context.substr(python_rstrip(context).size());
    context.resize(context.size() - moved.size());
    const std::vector<uint32_t> ctx = context_ids(tokenizer, context, where);
    bool cut = false;
    for (size_t c = 0; c < request.continuations.size(); ++c) {
      std::vector<uint32_t> whole =
          encode(tokenizer, context + moved + request.continuations[c], where);
      const size_t from = context.empty() ? 0 : ctx.size();
      if (whole.size() <= from) {
        throw UserError(
            fmt::format("{}: choice {} adds no token to the context once encoded: "
                        "give it text of its own",
                        where, c));
      }
      TaskSequence s{r, c,   ctx, {whole.begin() + static_cast<std::ptrdiff_t>(from), whole.end()},
                     0, true};
      if (static_cast<int64_t>(s.target.size()) > block) {
        throw UserError(fmt::format(
            "{}: choice {} is {} tokens, longer than the model's context ({}) even with the "
            "context cut away: shorten the choice",
            where, c, s.target.size(), block));
      }
      // What the model reads: context + continuation less its last token, cut to the block.
      s.input.insert(s.input.end(), s.target.begin(), s.target.end() - 1);
      const auto over = static_cast<int64_t>(s.input.size()) - block;
      if (over > 0) {
        s.input.erase(s.input.begin(), s.input.begin() + over);
        cut = true;
      }
      s.first = s.input.size() - (s.target.size() - 1) - 1;
      out.push_back(std::move(s));
    }
    truncated += cut ? 1 : 0;
    if (cut) {
      for (size_t c = 0; c < request.continuations.size(); ++c)
        out[out.size() - 1 - c].whole = false;
    }
  }
  return out;
}

size_t best_of(const std::vector<double>& values) {
  return static_cast<size_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

void score_choices(AssembledRun& run, const PreparedTask& prepared, const TaskScoring& scoring,
                   TaskResult& result) {
  const Task& task = prepared.task;
  const std::vector<TaskSequence>& sequences = prepared.sequences;
  // Per sequence: its log-likelihood, and the tokens read (on the rank that scored it).
  std::vector<double> local(sequences.size() * 2, 0.0);
  // A request whose choices each read its whole context reads it once, from a cache; the
  // sequences of a request cut to fit are read whole.
  std::vector<size_t> cached;
  for (const TaskSequence& s : sequences)
    if (s.choice == 0 && s.whole) cached.push_back(s.request);
  score_cached_choices(run, prepared, cached, scoring, local);
  std::vector<size_t> cut;
  for (size_t s = 0; s < sequences.size(); ++s)
    if (!sequences[s].whole) cut.push_back(s);
  const auto by_length =
      longest_first(cut.size(), [&](size_t i) { return sequences[cut[i]].input.size(); });
  std::vector<size_t> order;
  for (size_t i : by_length)
    order.push_back(cut[i]);
  const Shard mine =
      shard(order, scoring.batch, run.parallel->data_rank(), run.parallel->data_world());
  for (size_t b = 0; b < mine.batches.size(); ++b) {
    std::vector<const std::vector<uint32_t>*> rows;
    for (size_t i : mine.batches[b])
      rows.push_back(&sequences[i].input);
    const torch::Tensor log_probs =
        torch::log_softmax(logits_of(run, padded(rows, run.device)), -1).cpu();
    if (b >= mine.owned) continue;
    for (size_t r = 0; r < mine.batches[b].size(); ++r) {
      const TaskSequence& s = sequences[mine.batches[b][r]];
      const auto n = static_cast<int64_t>(s.target.size());
      torch::Tensor targets =
          torch::tensor(std::vector<int64_t>(s.target.begin(), s.target.end()), torch::kLong);
      torch::Tensor picked = log_probs[static_cast<int64_t>(r)]
                                 .narrow(0, static_cast<int64_t>(s.first), n)
                                 .gather(1, targets.unsqueeze(1));
      local[mine.batches[b][r] * 2] = picked.to(torch::kDouble).sum().item<double>();
      local[mine.batches[b][r] * 2 + 1] = static_cast<double>(s.input.size());
    }
  }
  const std::vector<double> all = summed(run, local);
  std::vector<double> acc, acc_norm, acc_bytes;
  result.details.resize(task.requests.size());
  for (size_t i = 0; i < sequences.size(); ++i) {
    const TaskSequence& s = sequences[i];
    TaskDetail& d = result.details[s.request];
    d.item = task.requests[s.request].item;
    if (s.choice == 0) d.context.assign(s.input.begin(), s.input.begin() + s.first + 1);
    d.continuations.push_back(s.target);
    d.loglik.push_back(all[i * 2]);
    result.tokens += static_cast<int64_t>(std::llround(all[i * 2 + 1]));
  }
  for (size_t r = 0; r < task.requests.size(); ++r) {
    const TaskRequest& request = task.requests[r];
    TaskDetail& d = result.details[r];
    // The bare choice's length, without the delimiter: in characters (Python's len) for
    // acc_norm, in UTF-8 bytes for acc_bytes.
    std::vector<double> per_char, per_byte;
    for (size_t c = 0; c < d.loglik.size(); ++c) {
      const std::string& choice = request.choices[c];
      per_char.push_back(d.loglik[c] / static_cast<double>(utf8_code_points(choice).size()));
      per_byte.push_back(d.loglik[c] / static_cast<double>(choice.size()));
    }
    const auto label = static_cast<size_t>(request.label);
    d.score = best_of(d.loglik) == label ? 1.0 : 0.0;
    acc.push_back(d.score);
    acc_norm.push_back(best_of(per_char) == label ? 1.0 : 0.0);
    acc_bytes.push_back(best_of(per_byte) == label ? 1.0 : 0.0);
  }
  result.metrics = {mean_metric("acc", acc), mean_metric("acc_norm", acc_norm),
                    mean_metric("acc_bytes", acc_bytes)};
}

}  // namespace

PreparedTask prepare_task(Task task, const Tokenizer& tokenizer, int64_t context_length,
                          int64_t vocab_size) {
  PreparedTask prepared{std::move(task), {}, {}, 0};
  const Task& t = prepared.task;
  // The template's own markers first: else the first item is blamed for a byte it never had.
  if (t.spec.chat_template != "none") {
    try {
      check_template_encodes(chat_template(t.spec.chat_template), tokenizer);
    } catch (const UserError& e) {
      throw UserError(
          fmt::format("{}: template = \"{}\": {}", t.spec.file, t.spec.chat_template, e.what()));
    }
  }
  // An id past the model's rows would index outside its embedding.
  auto check_ids = [&](const std::vector<uint32_t>& ids, const TaskRequest& request) {
    for (uint32_t id : ids) {
      if (static_cast<int64_t>(id) < vocab_size) continue;
      throw UserError(
          fmt::format("{}: the item encodes to token id {}, but the model has {} ids: "
                      "use text the run was trained on",
                      where_of(t, request), id, vocab_size));
    }
  };
  if (t.spec.kind == TaskKind::kChoice) {
    prepared.sequences = choice_sequences(t, tokenizer, context_length, prepared.truncated);
    for (const TaskSequence& s : prepared.sequences) {
      check_ids(s.input, t.requests[s.request]);
      check_ids(s.target, t.requests[s.request]);
    }
  } else {
    prepared.prompts = generation_prompts(t, tokenizer, context_length, prepared.truncated);
    for (size_t i = 0; i < prepared.prompts.size(); ++i)
      check_ids(prepared.prompts[i], t.requests[i]);
  }
  return prepared;
}

TaskResult score_task(AssembledRun& run, const Tokenizer& tokenizer, const PreparedTask& prepared,
                      const TaskScoring& scoring) {
  const Task& task = prepared.task;
  if (run.parallel->stages() > 1) {
    throw UserError(fmt::format(
        "task '{}': tasks are not scored under pipeline parallelism (each stage holds part of the "
        "model): score them after the run with `kiln eval RUN --task {}`",
        task.spec.name, task.spec.file));
  }
  torch::NoGradGuard no_grad;
  run.model->eval();
  TaskResult result;
  result.task = task.spec.name;
  result.items = static_cast<int64_t>(task.requests.size());
  result.truncated = prepared.truncated;
  if (task.spec.kind == TaskKind::kChoice) {
    score_choices(run, prepared, scoring, result);
  } else {
    score_generations(run, tokenizer, prepared, scoring, result);
  }
  run.model->train();
  return result;
}

}  // namespace kiln
