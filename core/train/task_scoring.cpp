#include "core/train/task_scoring.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/api/tokenizer.h"
#include "core/train/assemble.h"
#include "core/util/counter_hash.h"
#include "core/util/error.h"
#include "core/util/statistics.h"

namespace kiln {

namespace {

std::string where_of(const Task& task, const TaskRequest& request) {
  return fmt::format("{}:{}", task.spec.items, request.line);
}

std::vector<uint32_t> encode(const Tokenizer& tokenizer, const std::string& text,
                             const std::string& where) {
  try {
    return tokenizer.encode(text);
  } catch (const UserError& e) {
    throw UserError(
        fmt::format("{}: the item's text does not encode: {}: use text the run's "
                    "tokenizer covers",
                    where, e.what()));
  }
}

// The harness's empty context: the end-of-text token, so the first token has something before it.
std::vector<uint32_t> context_ids(const Tokenizer& tokenizer, const std::string& context,
                                  const std::string& where) {
  std::vector<uint32_t> ids = encode(tokenizer, context, where);
  if (ids.empty()) {
    const auto end = tokenizer.end_of_text();
    if (!end) {
      throw UserError(where +
                      ": the text asked is empty and the tokenizer has no end-of-text "
                      "token to start from: give the item a context");
    }
    ids.push_back(*end);
  }
  return ids;
}

// Choice requests as the model reads them (see the header for the encoding).
std::vector<TaskSequence> choice_sequences(const Task& task, const Tokenizer& tokenizer,
                                           int64_t block, int64_t& truncated) {
  std::vector<TaskSequence> out;
  for (size_t r = 0; r < task.requests.size(); ++r) {
    const TaskRequest& request = task.requests[r];
    const std::string where = where_of(task, request);
    std::string context = request.context;
    const size_t kept = context.find_last_not_of(' ');
    const std::string moved = kept == std::string::npos ? context : context.substr(kept + 1);
    context.resize(context.size() - moved.size());
    const std::vector<uint32_t> ctx = context_ids(tokenizer, context, where);
    bool cut = false;
    for (size_t c = 0; c < request.choices.size(); ++c) {
      std::vector<uint32_t> whole = encode(tokenizer, context + moved + request.choices[c], where);
      const size_t from = context.empty() ? 0 : ctx.size();
      if (whole.size() <= from) {
        throw UserError(
            fmt::format("{}: choice {} adds no token to the context once encoded: "
                        "give it text of its own",
                        where, c));
      }
      TaskSequence s{
          r, c, ctx, {whole.begin() + static_cast<std::ptrdiff_t>(from), whole.end()}, 0};
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
  }
  return out;
}

// Batches of `size` consecutive sequences of `order`; every data rank gets the same number of
// batches (a rank with fewer repeats one, its results dropped) so that collective forwards
// (fsdp, tensor parallel) stay in step.
struct Shard {
  std::vector<std::vector<size_t>> batches;
  size_t owned = 0;  // batches[0, owned) are this rank's own
};

Shard shard(const std::vector<size_t>& order, int64_t size, int rank, int world) {
  std::vector<std::vector<size_t>> all;
  for (size_t i = 0; i < order.size(); i += static_cast<size_t>(size)) {
    const size_t end = std::min(order.size(), i + static_cast<size_t>(size));
    all.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(i),
                     order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  Shard out;
  for (size_t b = static_cast<size_t>(rank); b < all.size(); b += static_cast<size_t>(world))
    out.batches.push_back(all[b]);
  out.owned = out.batches.size();
  const size_t per_rank =
      (all.size() + static_cast<size_t>(world) - 1) / static_cast<size_t>(world);
  while (out.batches.size() < per_rank)
    out.batches.push_back(all.front());
  return out;
}

// Longest first, as the harness orders them: similar lengths share a batch, and an
// out-of-memory shows at the first one.
template <class Length>
std::vector<size_t> longest_first(size_t count, Length length) {
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return length(a) > length(b); });
  return order;
}

// Rows right-padded with 0 (a causal model's real positions never see the padding).
torch::Tensor padded(const std::vector<const std::vector<uint32_t>*>& rows, torch::Device device) {
  size_t width = 0;
  for (const auto* row : rows)
    width = std::max(width, row->size());
  torch::Tensor tokens =
      torch::zeros({static_cast<int64_t>(rows.size()), static_cast<int64_t>(width)}, torch::kLong);
  auto access = tokens.accessor<int64_t, 2>();
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t t = 0; t < rows[r]->size(); ++t)
      access[static_cast<int64_t>(r)][static_cast<int64_t>(t)] = (*rows[r])[t];
  return tokens.to(device);
}

torch::Tensor logits_of(AssembledRun& run, const torch::Tensor& tokens) {
  auto scope = run.precision->forward_scope();
  const int64_t vocab = run.model->vocab_size();
  return run.model->forward(tokens).narrow(-1, 0, vocab).to(torch::kFloat);
}

// This rank's results summed with the other data ranks' (tensor-parallel peers hold the same
// ones, so each adds its share).
std::vector<double> summed(AssembledRun& run, const std::vector<double>& local) {
  const double weight = run.parallel->loss_share() * run.parallel->data_world();
  torch::Tensor t = torch::tensor(local, torch::kDouble).to(run.device) * weight;
  t = run.parallel->sum(t).cpu().contiguous();
  return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

// The mean and the harness's standard error: the sample standard deviation over sqrt(n).
TaskMetric mean_metric(const std::string& name, const std::vector<double>& scores) {
  const stats::Summary s = stats::summarize(scores);
  return {name, s.mean, s.n > 1 ? s.sd / std::sqrt(static_cast<double>(s.n)) : 0.0};
}

size_t best_of(const std::vector<double>& values) {
  return static_cast<size_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

void score_choices(AssembledRun& run, const PreparedTask& prepared, const TaskScoring& scoring,
                   TaskResult& result) {
  const Task& task = prepared.task;
  const std::vector<TaskSequence>& sequences = prepared.sequences;
  const auto order =
      longest_first(sequences.size(), [&](size_t i) { return sequences[i].input.size(); });
  const Shard mine =
      shard(order, scoring.batch, run.parallel->data_rank(), run.parallel->data_world());
  // Per sequence: its log-likelihood, and the tokens read (on the rank that scored it).
  std::vector<double> local(sequences.size() * 2, 0.0);
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
  std::vector<double> acc, acc_norm;
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
    std::vector<double> per_byte;
    for (size_t c = 0; c < d.loglik.size(); ++c)
      per_byte.push_back(d.loglik[c] / static_cast<double>(request.choices[c].size()));
    const auto label = static_cast<size_t>(request.label);
    d.score = best_of(d.loglik) == label ? 1.0 : 0.0;
    acc.push_back(d.score);
    acc_norm.push_back(best_of(per_byte) == label ? 1.0 : 0.0);
  }
  result.metrics = {mean_metric("acc", acc), mean_metric("acc_norm", acc_norm)};
}

// splitmix64 of (seed, item, position): a sampled token is the same in any batch or shard.
double uniform_draw(uint64_t seed, int64_t item, int64_t position) {
  return unit_interval(splitmix64(seed ^ (static_cast<uint64_t>(item) * 0x9E3779B97F4A7C15ULL) ^
                                  (static_cast<uint64_t>(position) << 32)));
}

uint32_t next_token(const torch::Tensor& logits, const TaskSpec& spec, int64_t item,
                    int64_t position) {
  if (spec.temperature == 0) return static_cast<uint32_t>(logits.argmax().item<int64_t>());
  const torch::Tensor p = torch::softmax(logits.to(torch::kDouble) / spec.temperature, -1);
  const double u = uniform_draw(static_cast<uint64_t>(spec.seed), item, position);
  const torch::Tensor cdf = p.cumsum(0);
  const int64_t index = (cdf < u).sum().item<int64_t>();
  return static_cast<uint32_t>(std::min(index, p.size(0) - 1));
}

// The prompts of a generate task, cut from the left to leave max_tokens of room.
std::vector<std::vector<uint32_t>> generation_prompts(const Task& task, const Tokenizer& tokenizer,
                                                      int64_t block, int64_t& truncated) {
  const TaskSpec& spec = task.spec;
  if (spec.max_tokens >= block) {
    throw UserError(fmt::format(
        "{}: max_tokens = {} leaves no room for the prompt in the model's context ({}): lower "
        "max_tokens",
        spec.file, spec.max_tokens, block));
  }
  std::vector<std::vector<uint32_t>> prompts;
  for (const TaskRequest& request : task.requests) {
    std::vector<uint32_t> ids = context_ids(tokenizer, request.context, where_of(task, request));
    const auto room = static_cast<size_t>(block - spec.max_tokens);
    if (ids.size() > room) {
      ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(room));
      ++truncated;
    }
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

void score_generations(AssembledRun& run, const Tokenizer& tokenizer, const PreparedTask& prepared,
                       const TaskScoring& scoring, TaskResult& result) {
  const Task& task = prepared.task;
  const TaskSpec& spec = task.spec;
  const auto end_of_text = tokenizer.end_of_text();
  const std::vector<std::vector<uint32_t>>& prompts = prepared.prompts;
  const auto order = longest_first(prompts.size(), [&](size_t i) { return prompts[i].size(); });
  const Shard mine =
      shard(order, scoring.batch, run.parallel->data_rank(), run.parallel->data_world());
  std::vector<std::vector<uint32_t>> generated(prompts.size());
  std::vector<double> local(prompts.size() * 2, 0.0);  // per request: match, tokens read
  for (size_t b = 0; b < mine.batches.size(); ++b) {
    const std::vector<size_t>& batch = mine.batches[b];
    std::vector<std::vector<uint32_t>> rows;
    for (size_t i : batch)
      rows.push_back(prompts[i]);
    std::vector<bool> done(batch.size(), false);
    for (int64_t t = 0; t < spec.max_tokens; ++t) {
      int64_t active = 0;
      for (size_t r = 0; r < batch.size(); ++r)
        active += done[r] ? 0 : 1;
      // Every rank forwards until no rank has a row left (collective forwards stay in step).
      if (run.parallel
              ->sum(torch::full({}, static_cast<double>(active), torch::kDouble).to(run.device))
              .item<double>() == 0) {
        break;
      }
      std::vector<const std::vector<uint32_t>*> pointers;
      for (const auto& row : rows)
        pointers.push_back(&row);
      const torch::Tensor logits = logits_of(run, padded(pointers, run.device)).cpu();
      for (size_t r = 0; r < batch.size(); ++r) {
        if (done[r]) continue;
        const auto at = static_cast<int64_t>(rows[r].size()) - 1;
        const TaskRequest& request = task.requests[batch[r]];
        const uint32_t token =
            next_token(logits[static_cast<int64_t>(r)][at], spec, request.item, t);
        std::vector<uint32_t>& out = generated[batch[r]];
        if (end_of_text && token == *end_of_text) {
          done[r] = true;
          continue;
        }
        out.push_back(token);
        rows[r].push_back(token);
        const std::string text = tokenizer.decode(out);
        done[r] = cut_at_stop(text, request.stop).size() < text.size();
      }
    }
    if (b >= mine.owned) continue;
    for (size_t r = 0; r < batch.size(); ++r) {
      const size_t i = batch[r];
      const TaskRequest& request = task.requests[i];
      const std::string text = cut_at_stop(tokenizer.decode(generated[i]), request.stop);
      local[i * 2] =
          normalize_answer(text, spec.normalize) == normalize_answer(request.answer, spec.normalize)
              ? 1.0
              : 0.0;
      local[i * 2 + 1] = static_cast<double>(prompts[i].size() + generated[i].size());
    }
  }
  const std::vector<double> all = summed(run, local);
  std::vector<double> matches;
  result.details.resize(task.requests.size());
  for (size_t i = 0; i < task.requests.size(); ++i) {
    TaskDetail& d = result.details[i];
    d.item = task.requests[i].item;
    d.context = prompts[i];
    d.generated = generated[i];  // only on the rank that generated it
    d.text = cut_at_stop(tokenizer.decode(generated[i]), task.requests[i].stop);
    d.score = all[i * 2];
    matches.push_back(d.score);
    result.tokens += static_cast<int64_t>(std::llround(all[i * 2 + 1]));
  }
  result.metrics = {mean_metric("exact_match", matches)};
}

}  // namespace

PreparedTask prepare_task(Task task, const Tokenizer& tokenizer, int64_t context_length,
                          int64_t vocab_size) {
  PreparedTask prepared{std::move(task), {}, {}, 0};
  const Task& t = prepared.task;
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
