// Sequential reader of token windows across a list of shards, in the manner of llm.c's
// DataLoaderLite. Each call yields one micro-batch of micro_batch x seq_len inputs and the
// targets shifted by one token. The windows have one global order, whatever the world size:
// each shard's whole windows ((tokens - 1) / window of them) in turn, then the first shard's
// again (a new epoch); nothing is shuffled, so the order depends on the window's index alone
// (no seed). Ranks interleave: with world size W, rank r reads the r-th window of every W
// consecutive ones (a round may straddle two shards or epochs), so a step's windows are the same
// tokens at any W and a resume at another W neither repeats nor skips one. Windows are copied out
// of the shards (ShardFile::read), so a shard truncated under a run is an error, not SIGBUS.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/api/data_position.h"
#include "core/data/shard.h"

namespace kiln {

struct TokenLoaderOptions {
  std::vector<std::string> files;
  int64_t micro_batch = 1;
  int64_t seq_len = 1;
  int rank = 0;
  int world = 1;
  int64_t vocab_limit = 0;  // tokens must be < this; 0 = unchecked
  ShardFormat format = ShardFormat::kAuto;
};

class TokenLoader {
 public:
  explicit TokenLoader(TokenLoaderOptions options);

  // Writes micro_batch x seq_len token ids to each of `inputs` and `targets`.
  void next(int64_t* inputs, int64_t* targets);
  // Writes window `index` of the global order, counted from the first shard's start epoch after
  // epoch, as next() would; position() stays as it was. For readers that pick windows by number
  // (a blend's sources), with world 1.
  void read_window(int64_t index, int64_t* inputs, int64_t* targets);
  void reset() { seek(LoaderPosition{}); }
  LoaderPosition position() const { return position_; }
  void seek(const LoaderPosition& position);
  int64_t total_tokens() const;
  // Calls of next() on every rank that read every shard's windows once (rounded down).
  int64_t windows_per_pass() const;
  int64_t windows_in_all() const;  // the windows of one pass over every shard
  size_t shard_count() const { return shards_.size(); }

 private:
  void check_vocab(size_t shard);
  void copy_window(const LoaderPosition& at, int64_t* inputs, int64_t* targets);
  int64_t windows_in(int64_t shard) const;
  // The position `windows` windows after `from` in the global order.
  LoaderPosition after(LoaderPosition from, int64_t windows) const;

  TokenLoaderOptions options_;
  std::vector<ShardFile> shards_;
  std::vector<bool> vocab_checked_;
  LoaderPosition position_;
  std::vector<uint32_t> window_tokens_;  // the window next() copies from its shard
  int64_t window_ = 0;                   // micro_batch x seq_len
  int64_t stride_ = 0;                   // window_ x world
};

}  // namespace kiln
