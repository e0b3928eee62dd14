#include "core/data/token_loader.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

TokenLoader::TokenLoader(TokenLoaderOptions options) : options_(std::move(options)) {
  if (options_.files.empty()) throw UserError("no token shards given");
  window_ = options_.micro_batch * options_.seq_len;
  stride_ = window_ * options_.world;
  shards_.reserve(options_.files.size());
  for (const auto& file : options_.files) {
    shards_.emplace_back(file, options_.format);
    if (shards_.back().size() < stride_ + 1) {
      throw UserError(fmt::format(
          "token shard '{}' holds {} tokens, fewer than one round of windows needs "
          "(micro_batch {} x seq_len {} x world {} + 1 = {}): lower train.micro_batch or "
          "train.seq_len, or prepare more data",
          file, shards_.back().size(), options_.micro_batch, options_.seq_len, options_.world,
          stride_ + 1));
    }
  }
  vocab_checked_.assign(shards_.size(), false);
  seek(LoaderPosition{});
}

void TokenLoader::seek(const LoaderPosition& position) {
  if (position.shard < 0 || position.shard >= static_cast<int64_t>(shards_.size()) ||
      position.offset < 0 || position.offset % window_ != 0 ||
      position.offset / window_ >= windows_in(position.shard)) {
    throw UserError(
        fmt::format("data position (shard {}, offset {}) does not exist in these {} "
                    "shards: the data changed since the position was saved",
                    position.shard, position.offset, shards_.size()));
  }
  position_ = position;
  check_vocab(static_cast<size_t>(position_.shard));
}

void TokenLoader::check_vocab(size_t shard) {
  if (options_.vocab_limit <= 0 || vocab_checked_[shard]) return;
  const ShardFile& file = shards_[shard];
  constexpr int64_t kChunk = 1 << 20;  // tokens read at a time: 4 MiB
  std::vector<uint32_t> chunk;
  for (int64_t first = 0; first < file.size(); first += kChunk) {
    chunk.resize(static_cast<size_t>(std::min(kChunk, file.size() - first)));
    file.read(first, static_cast<int64_t>(chunk.size()), chunk.data());
    const auto top = std::max_element(chunk.begin(), chunk.end());
    if (*top >= options_.vocab_limit) {
      throw UserError(
          fmt::format("token shard '{}' holds token id {} at position {}, but the "
                      "model's vocabulary has {} ids: raise model.vocab_size or use "
                      "data prepared with this model's tokenizer",
                      file.path(), *top, first + (top - chunk.begin()), options_.vocab_limit));
    }
  }
  vocab_checked_[shard] = true;
}

int64_t TokenLoader::windows_in(int64_t shard) const {
  return (shards_[static_cast<size_t>(shard)].size() - 1) / window_;
}

LoaderPosition TokenLoader::after(LoaderPosition from, int64_t windows) const {
  int64_t index = from.offset / window_ + windows;  // within from.shard, if it had room
  while (index >= windows_in(from.shard)) {
    index -= windows_in(from.shard);
    if (++from.shard == static_cast<int64_t>(shards_.size())) {
      from.shard = 0;
      ++from.epoch;
    }
  }
  from.offset = index * window_;
  return from;
}

void TokenLoader::copy_window(const LoaderPosition& at, int64_t* inputs, int64_t* targets) {
  check_vocab(static_cast<size_t>(at.shard));
  // The window and the one token after it, the last target.
  window_tokens_.resize(static_cast<size_t>(window_ + 1));
  shards_[at.shard].read(at.offset, window_ + 1, window_tokens_.data());
  const uint32_t* tokens = window_tokens_.data();
  for (int64_t i = 0; i < window_; ++i) {
    inputs[i] = tokens[i];
    targets[i] = tokens[i + 1];
  }
}

void TokenLoader::next(int64_t* inputs, int64_t* targets) {
  copy_window(after(position_, options_.rank), inputs, targets);
  position_ = after(position_, options_.world);
}

void TokenLoader::read_window(int64_t index, int64_t* inputs, int64_t* targets) {
  const int64_t per_epoch = windows_in_all();
  copy_window(after(LoaderPosition{0, 0, index / per_epoch}, index % per_epoch), inputs, targets);
}

int64_t TokenLoader::windows_in_all() const {
  int64_t windows = 0;
  for (size_t s = 0; s < shards_.size(); ++s)
    windows += windows_in(static_cast<int64_t>(s));
  return windows;
}

int64_t TokenLoader::windows_per_pass() const {
  return windows_in_all() / options_.world;
}

int64_t TokenLoader::total_tokens() const {
  int64_t total = 0;
  for (const auto& s : shards_)
    total += s.size();
  return total;
}

}  // namespace kiln
