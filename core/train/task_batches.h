// What choice scoring (task_scoring.cpp) and generation scoring (task_generation.cpp) share: a
// request's text encoded, with its item's file:line in errors; requests ordered longest first and
// dealt to the data ranks in batches; a batch's forward pass over right-padded rows; the results
// summed over the data ranks; and a metric with the harness's standard error. Apart from both so
// that each kind of scoring reads on its own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/data/task_file.h"
#include "core/train/task_scoring.h"

namespace kiln {

struct AssembledRun;
class KvCache;
class Tokenizer;

// "ITEMS_FILE:LINE" of a request, for its errors.
std::string where_of(const Task& task, const TaskRequest& request);

// `text` encoded; a UserError at `where` when the tokenizer cannot encode it.
std::vector<uint32_t> encode(const Tokenizer& tokenizer, const std::string& text,
                             const std::string& where);

// The harness's empty context: the end-of-text token, so the first token has something before it.
std::vector<uint32_t> context_ids(const Tokenizer& tokenizer, const std::string& context,
                                  const std::string& where);

// Batches of `size` consecutive sequences of `order`; every data rank gets the same number of
// batches (a rank with fewer repeats one, its results dropped) so that collective forwards
// (fsdp, tensor parallel) stay in step.
struct Shard {
  std::vector<std::vector<size_t>> batches;
  size_t owned = 0;  // batches[0, owned) are this rank's own
};

Shard shard(const std::vector<size_t>& order, int64_t size, int rank, int world);

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
torch::Tensor padded(const std::vector<const std::vector<uint32_t>*>& rows, torch::Device device);
// Rows left-padded with 0, so that each ends at the last column, as a KvCache reads a prompt;
// `pad` gets each row's padding.
torch::Tensor left_padded(const std::vector<const std::vector<uint32_t>*>& rows,
                          torch::Device device, std::vector<int64_t>& pad);

// The model's logits for `tokens`, its vocabulary's columns only, in float.
torch::Tensor logits_of(AssembledRun& run, const torch::Tensor& tokens);
// The same for `tokens` that follow what `cache` holds (core/layers/kv_cache.h), which keeps them;
// with `last`, the last token's logits only ([rows, 1, vocab]).
torch::Tensor logits_of(AssembledRun& run, KvCache& cache, const torch::Tensor& tokens,
                        bool last = false);

// This rank's results summed with the other data ranks' (tensor-parallel peers hold the same
// ones, so each adds its share).
std::vector<double> summed(AssembledRun& run, const std::vector<double>& local);

// The mean and the harness's standard error: the sample standard deviation over sqrt(n).
TaskMetric mean_metric(const std::string& name, const std::vector<double>& scores);

}  // namespace kiln
