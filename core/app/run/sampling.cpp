#include "core/app/run/sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/api/tokenizer.h"
#include "core/app/run/hf_checkpoint.h"
#include "core/app/run/opened_snapshot.h"
#include "core/layers/kv_cache.h"
#include "core/train/assemble.h"
#include "core/util/allocation_meter.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// The prompt continued by `run`'s model; `source` names it in errors. `checked` is called once
// the prompt is known to fit the model, before anything is generated.
std::string continue_prompt(AssembledRun& run, const Tokenizer& tokenizer,
                            const SampleOptions& options, const std::string& source,
                            const std::function<void()>& checked) {
  std::vector<uint32_t> ids = tokenizer.encode(options.prompt);
  if (ids.empty()) {
    auto start = tokenizer.end_of_text();
    ids = start ? std::vector<uint32_t>{*start} : tokenizer.encode("\n");
  }
  Model& model = *run.model;
  const int64_t vocab = model.vocab_size();
  for (uint32_t id : ids) {
    if (static_cast<int64_t>(id) >= vocab) {
      throw UserError(
          fmt::format("the prompt encodes to token id {}, but the model of {} has {} ids: use a "
                      "prompt in the text the model was trained on",
                      id, source, vocab));
    }
  }
  checked();
  torch::manual_seed(static_cast<uint64_t>(options.seed));
  torch::NoGradGuard no_grad;
  // The prompt is read once into a key/value cache, then each new token alone. A full context
  // is read again from its last half (positions cannot run past the model's context).
  const int64_t room = model.context_length();
  std::vector<int64_t> tokens(ids.begin(), ids.end());
  std::unique_ptr<KvCache> cache;
  auto read = [&](int64_t count) {
    const torch::Tensor in =
        torch::tensor(std::vector<int64_t>(tokens.end() - count, tokens.end()), torch::kLong)
            .unsqueeze(0)
            .to(run.device);
    KvCacheScope reads(*cache, count, run.device, CachedLogits::kLast);
    auto scope = run.precision->forward_scope();
    return model.forward(in).select(1, 0).narrow(-1, 0, vocab).to(torch::kFloat);
  };
  // Room for what this call reads and adds, not the whole context: a 128k-token model would
  // otherwise hold gigabytes of zeros for a short prompt.
  const auto prompt = std::min<int64_t>(static_cast<int64_t>(tokens.size()), room);
  const int64_t capacity = std::min<int64_t>(room, prompt + options.tokens);
  const int64_t live = allocation_counts(run.device).live;
  cache = std::make_unique<KvCache>(std::vector<int64_t>{0}, capacity, room);
  torch::Tensor logits = read(prompt);
  const auto measured =
      allocation_counts(run.device).live - live - static_cast<int64_t>(logits.nbytes());
  std::cerr << fmt::format("kiln: key/value cache: {} for {} tokens ({} allocated)\n",
                           format_bytes(static_cast<double>(cache->bytes())), capacity,
                           format_bytes(static_cast<double>(measured)));
  std::vector<uint32_t> generated;
  for (int64_t i = 0; i < options.tokens; ++i) {
    torch::Tensor next;
    if (options.temperature == 0) {
      next = logits.argmax(-1, /*keepdim=*/true);
    } else {
      logits = logits / options.temperature;
      if (options.top_k > 0 && options.top_k < vocab) {
        auto kth = std::get<0>(logits.topk(options.top_k, -1)).narrow(-1, options.top_k - 1, 1);
        logits = logits.masked_fill(logits < kth, -INFINITY);
      }
      next = torch::multinomial(torch::softmax(logits, -1), 1);
    }
    tokens.push_back(next.item<int64_t>());
    generated.push_back(static_cast<uint32_t>(tokens.back()));
    if (i + 1 == options.tokens) break;
    if (cache->length() < capacity) {
      logits = read(1);
    } else {
      cache = std::make_unique<KvCache>(std::vector<int64_t>{0}, room, room);
      logits = read(std::max<int64_t>(1, room / 2));
    }
  }
  return options.prompt + tokenizer.decode(generated);
}

}  // namespace

std::string sample_snapshot(const SnapshotRequest& request, const SampleOptions& options) {
  if (options.tokens < 1) throw UserError("--tokens must be at least 1");
  // NaN passes `< 0` and then fails deep in multinomial; inf flattens every choice to uniform.
  if (!std::isfinite(options.temperature) || options.temperature < 0) {
    throw UserError(fmt::format(
        "--temperature {} is not a temperature: give 0 (greedy) or a finite positive number, "
        "e.g. 0.8",
        options.temperature));
  }
  if (options.top_k < 0) throw UserError("--top-k must be >= 0 (0 = no cut)");
  install_allocation_meter();  // to print what the key/value cache takes
  if (!request.hf.empty()) {
    HfCheckpoint checkpoint = open_hf_checkpoint(request.hf);
    return continue_prompt(checkpoint.run, *checkpoint.tokenizer, options, request.hf, [] {});
  }
  OpenedSnapshot opened = open_snapshot_read_only(request, Assembly::kLoad);
  auto tokenizer = load_tokenizer(opened.run.train_data->tokenizer_dir());
  return continue_prompt(opened.run, *tokenizer, options, "run '" + opened.info.name + "'",
                         [&] { announce(request, opened); });
}

}  // namespace kiln
