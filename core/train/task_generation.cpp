// Generation scoring (task_generation.h).
#include "core/train/task_generation.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/api/tokenizer.h"
#include "core/layers/kv_cache.h"
#include "core/train/assemble.h"
#include "core/train/task_batches.h"
#include "core/util/counter_hash.h"
#include "core/util/error.h"

namespace kiln {

namespace {

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

}  // namespace

std::vector<std::vector<uint32_t>> generation_prompts(const Task& task, const Tokenizer& tokenizer,
                                                      int64_t block, int64_t& truncated) {
  const TaskSpec& spec = task.spec;
  if (spec.max_gen_toks >= block) {
    throw UserError(fmt::format(
        "{}: max_gen_toks = {} leaves no room for the prompt in the model's context ({}): lower "
        "max_gen_toks",
        spec.file, spec.max_gen_toks, block));
  }
  std::vector<std::vector<uint32_t>> prompts;
  for (const TaskRequest& request : task.requests) {
    std::vector<uint32_t> ids = context_ids(tokenizer, request.context, where_of(task, request));
    const auto room = static_cast<size_t>(block - spec.max_gen_toks);
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
  // The harness adds the end-of-text token's text to every request's stop strings.
  std::vector<std::vector<std::string>> until;
  for (const TaskRequest& request : task.requests) {
    until.push_back(request.until);
    const std::string eos = end_of_text ? tokenizer.decode({*end_of_text}) : "";
    if (!eos.empty() &&
        std::find(until.back().begin(), until.back().end(), eos) == until.back().end())
      until.back().push_back(eos);
  }
  const std::vector<std::vector<uint32_t>>& prompts = prepared.prompts;
  const auto order = longest_first(prompts.size(), [&](size_t i) { return prompts[i].size(); });
  const Shard mine =
      shard(order, scoring.batch, run.parallel->data_rank(), run.parallel->data_world());
  std::vector<std::vector<uint32_t>> generated(prompts.size());
  std::vector<double> local(prompts.size() * 2, 0.0);  // per request: match, tokens read
  for (size_t b = 0; b < mine.batches.size(); ++b) {
    const std::vector<size_t>& batch = mine.batches[b];
    // The prompts read once into a cache, then one new token per row at a time.
    std::vector<const std::vector<uint32_t>*> rows;
    for (size_t i : batch)
      rows.push_back(&prompts[i]);
    std::vector<int64_t> pad;
    const torch::Tensor prompt = left_padded(rows, run.device, pad);
    KvCache cache(pad, prompt.size(1) + spec.max_gen_toks, run.model->context_length());
    torch::Tensor last = logits_of(run, cache, prompt, /*last=*/true).select(1, 0).cpu();
    std::vector<bool> done(batch.size(), false);
    for (int64_t t = 0; t < spec.max_gen_toks; ++t) {
      int64_t active = 0;
      for (size_t r = 0; r < batch.size(); ++r)
        active += done[r] ? 0 : 1;
      // Every rank forwards until no rank has a row left (collective forwards stay in step).
      if (run.parallel
              ->sum(torch::full({}, static_cast<double>(active), torch::kDouble).to(run.device))
              .item<double>() == 0) {
        break;
      }
      torch::Tensor next = torch::zeros({static_cast<int64_t>(batch.size()), 1}, torch::kLong);
      for (size_t r = 0; r < batch.size(); ++r) {
        if (done[r]) continue;
        const TaskRequest& request = task.requests[batch[r]];
        const uint32_t token = next_token(last[static_cast<int64_t>(r)], spec, request.item, t);
        std::vector<uint32_t>& out = generated[batch[r]];
        if (end_of_text && token == *end_of_text) {
          done[r] = true;
          continue;
        }
        out.push_back(token);
        next[static_cast<int64_t>(r)][0] = static_cast<int64_t>(token);
        const std::string text = tokenizer.decode(out);
        done[r] = cut_at_stop(text, until[batch[r]]).size() < text.size();
      }
      if (t + 1 < spec.max_gen_toks)
        last = logits_of(run, cache, next.to(run.device)).select(1, 0).cpu();
    }
    if (b >= mine.owned) continue;
    for (size_t r = 0; r < batch.size(); ++r) {
      const size_t i = batch[r];
      const TaskRequest& request = task.requests[i];
      const std::string text = cut_at_stop(tokenizer.decode(generated[i]), until[i]);
      local[i * 2] = exact_match(spec, text, request.answer) ? 1.0 : 0.0;
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
    d.text = cut_at_stop(tokenizer.decode(generated[i]), until[i]);
    d.score = all[i * 2];
    matches.push_back(d.score);
    result.tokens += static_cast<int64_t>(std::llround(all[i * 2 + 1]));
  }
  result.metrics = {mean_metric("exact_match", matches)};
}

}  // namespace kiln
