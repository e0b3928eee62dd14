#include "core/train/cached_choices.h"

#include <algorithm>

#include <torch/torch.h>

#include "core/layers/kv_cache.h"
#include "core/train/assemble.h"
#include "core/train/task_batches.h"

namespace kiln {

namespace {

// A request's sequences: [begin, end) of prepared.sequences (choice_sequences keeps a request's
// choices together, in order).
struct RequestSequences {
  size_t begin = 0, end = 0;
};

std::vector<RequestSequences> sequences_of(const PreparedTask& prepared) {
  std::vector<RequestSequences> out(prepared.task.requests.size());
  const auto& sequences = prepared.sequences;
  for (size_t s = 0; s < sequences.size(); ++s) {
    RequestSequences& r = out[sequences[s].request];
    if (r.end == 0) r.begin = s;
    r.end = s + 1;
  }
  return out;
}

}  // namespace

void score_cached_choices(AssembledRun& run, const PreparedTask& prepared,
                          const std::vector<size_t>& requests, const TaskScoring& scoring,
                          std::vector<double>& local) {
  const std::vector<TaskSequence>& sequences = prepared.sequences;
  const std::vector<RequestSequences> of = sequences_of(prepared);
  size_t most_choices = 1;
  for (size_t r : requests)
    most_choices = std::max(most_choices, of[r].end - of[r].begin);
  // A batch holds about `scoring.batch` choices, as the whole path's holds that many sequences.
  const auto per_batch =
      static_cast<int64_t>(std::max<size_t>(1, static_cast<size_t>(scoring.batch) / most_choices));
  // By context length: a request's context is its first choice's input up to `first`.
  const auto order = longest_first(
      requests.size(), [&](size_t i) { return sequences[of[requests[i]].begin].first + 1; });
  const Shard mine = shard(order, per_batch, run.parallel->data_rank(), run.parallel->data_world());
  for (size_t b = 0; b < mine.batches.size(); ++b) {
    std::vector<std::vector<uint32_t>> contexts;  // each the front of its first choice's input
    std::vector<int64_t> rows;                    // per choice: its context's row
    std::vector<size_t> members;
    size_t longest_choice = 1;
    for (size_t i : mine.batches[b]) {
      const RequestSequences& r = of[requests[i]];
      const TaskSequence& opening = sequences[r.begin];
      contexts.emplace_back(opening.input.begin(),
                            opening.input.begin() + static_cast<std::ptrdiff_t>(opening.first + 1));
      for (size_t s = r.begin; s < r.end; ++s) {
        rows.push_back(static_cast<int64_t>(contexts.size()) - 1);
        members.push_back(s);
        longest_choice = std::max(longest_choice, sequences[s].target.size() - 1);
      }
    }
    std::vector<int64_t> pad;
    std::vector<const std::vector<uint32_t>*> context_rows;
    for (const auto& context : contexts)
      context_rows.push_back(&context);
    const torch::Tensor read = left_padded(context_rows, run.device, pad);
    KvCache cache(pad, read.size(1) + static_cast<int64_t>(longest_choice),
                  run.model->context_length());
    const torch::Tensor first =
        torch::log_softmax(logits_of(run, cache, read, /*last=*/true).select(1, 0), -1).cpu();
    // Each choice less its last token, right-padded: a padding token comes after every token
    // that is scored, which never sees it. At least one column, so that every rank forwards.
    std::vector<std::vector<uint32_t>> tails;
    for (size_t s : members) {
      const auto& target = sequences[s].target;
      tails.emplace_back(target.begin(), target.end() - 1);
    }
    std::vector<const std::vector<uint32_t>*> tail_rows;
    for (const auto& tail : tails)
      tail_rows.push_back(&tail);
    torch::Tensor tokens = padded(tail_rows, run.device);
    if (tokens.size(1) == 0) tokens = torch::zeros({tokens.size(0), 1}, tokens.options());
    KvCache choices = cache.select(rows);
    const torch::Tensor rest = torch::log_softmax(logits_of(run, choices, tokens), -1).cpu();
    if (b >= mine.owned) continue;
    const auto at_first = first.accessor<float, 2>();
    const auto at_rest = rest.accessor<float, 3>();
    for (size_t k = 0; k < members.size(); ++k) {
      const TaskSequence& s = sequences[members[k]];
      const auto row = static_cast<int64_t>(k);
      double loglik = at_first[rows[k]][s.target[0]];
      for (size_t j = 1; j < s.target.size(); ++j)
        loglik += at_rest[row][static_cast<int64_t>(j) - 1][s.target[j]];
      local[members[k] * 2] = loglik;
      const bool opens = members[k] == of[s.request].begin;
      local[members[k] * 2 + 1] =
          static_cast<double>((opens ? s.first + 1 : 0) + s.target.size() - 1);
    }
  }
}

}  // namespace kiln
