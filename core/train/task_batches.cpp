// The pieces both kinds of task scoring share (task_batches.h).
#include "core/train/task_batches.h"

#include <cmath>

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/api/tokenizer.h"
#include "core/layers/kv_cache.h"
#include "core/train/assemble.h"
#include "core/util/error.h"
#include "core/util/statistics.h"

namespace kiln {

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

namespace {

// Rows padded with 0 to the longest, on the right or (`pad` given: each row's padding) the left.
torch::Tensor padded_rows(const std::vector<const std::vector<uint32_t>*>& rows,
                          torch::Device device, std::vector<int64_t>* pad) {
  size_t width = 0;
  for (const auto* row : rows)
    width = std::max(width, row->size());
  torch::Tensor tokens =
      torch::zeros({static_cast<int64_t>(rows.size()), static_cast<int64_t>(width)}, torch::kLong);
  auto access = tokens.accessor<int64_t, 2>();
  if (pad) pad->clear();
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto first = static_cast<int64_t>(pad ? width - rows[r]->size() : 0);
    if (pad) pad->push_back(first);
    for (size_t t = 0; t < rows[r]->size(); ++t)
      access[static_cast<int64_t>(r)][first + static_cast<int64_t>(t)] = (*rows[r])[t];
  }
  return tokens.to(device);
}

}  // namespace

torch::Tensor padded(const std::vector<const std::vector<uint32_t>*>& rows, torch::Device device) {
  return padded_rows(rows, device, nullptr);
}

torch::Tensor left_padded(const std::vector<const std::vector<uint32_t>*>& rows,
                          torch::Device device, std::vector<int64_t>& pad) {
  return padded_rows(rows, device, &pad);
}

torch::Tensor logits_of(AssembledRun& run, const torch::Tensor& tokens) {
  auto scope = run.precision->forward_scope();
  const int64_t vocab = run.model->vocab_size();
  return run.model->forward(tokens).narrow(-1, 0, vocab).to(torch::kFloat);
}

torch::Tensor logits_of(AssembledRun& run, KvCache& cache, const torch::Tensor& tokens, bool last) {
  KvCacheScope reads(cache, tokens.size(1), run.device,
                     last ? CachedLogits::kLast : CachedLogits::kEvery);
  return logits_of(run, tokens);
}

std::vector<double> summed(AssembledRun& run, const std::vector<double>& local) {
  const double weight = run.parallel->loss_share() * run.parallel->data_world();
  torch::Tensor t = torch::tensor(local, torch::kDouble).to(run.device) * weight;
  t = run.parallel->sum(t).cpu().contiguous();
  return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

TaskMetric mean_metric(const std::string& name, const std::vector<double>& scores) {
  const stats::Summary s = stats::summarize(scores);
  return {name, s.mean, s.n > 1 ? s.sd / std::sqrt(static_cast<double>(s.n)) : 0.0};
}

}  // namespace kiln
