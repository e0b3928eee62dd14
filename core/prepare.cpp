#include "core/prepare.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"
#include "core/shard.h"
#include "core/tokenizer.h"

namespace kiln {

namespace {

std::string read_inputs(const std::vector<std::string>& inputs) {
  std::string corpus;
  for (const auto& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      throw UserError(fmt::format("cannot read text file '{}': {}: check the path", path,
                                  std::strerror(errno)));
    }
    std::stringstream text;
    text << in.rdbuf();
    corpus += text.str();
  }
  if (corpus.empty()) throw UserError("the input text is empty: nothing to tokenize");
  return corpus;
}

// Writes tokens[begin, end) as shards named <split>_NNNNNN.bin; removes older, higher-numbered
// shards of the split left by a previous prepare, so the glob sees only this dataset.
int64_t write_split(const std::vector<uint16_t>& tokens, size_t begin, size_t end,
                    const std::string& dir, const std::string& split, int64_t shard_tokens) {
  int64_t index = 0;
  for (size_t at = begin; at < end; at += static_cast<size_t>(shard_tokens), ++index) {
    size_t stop = std::min(end, at + static_cast<size_t>(shard_tokens));
    write_shard(fmt::format("{}/{}_{:06}.bin", dir, split, index),
                std::vector<uint16_t>(tokens.begin() + at, tokens.begin() + stop));
  }
  for (const auto& stale : glob_files(fmt::format("{}/{}_*.bin", dir, split))) {
    auto stem = std::filesystem::path(stale).stem().string();
    if (std::stoll(stem.substr(split.size() + 1)) >= index) std::filesystem::remove(stale);
  }
  return index;
}

}  // namespace

PrepareSummary prepare_dataset(const PrepareOptions& options,
                               const std::function<void(const std::string&)>& progress) {
  if (options.inputs.empty()) throw UserError("kiln prepare needs at least one text file");
  if (!(options.val_fraction >= 0 && options.val_fraction < 1)) {
    throw UserError(fmt::format("--val-fraction {} is out of range: use a value in [0, 1)",
                                options.val_fraction));
  }
  if (options.shard_tokens < 1) throw UserError("--shard-tokens must be at least 1");
  auto tokenizer = new_tokenizer(options.tokenizer);

  const std::string corpus = read_inputs(options.inputs);
  progress(fmt::format("read {} bytes from {} file(s)", corpus.size(), options.inputs.size()));
  tokenizer->fit(corpus);
  if (tokenizer->vocab_size() > 65536) {
    throw UserError(fmt::format("tokenizer '{}' has {} ids, more than uint16 shards can hold",
                                options.tokenizer, tokenizer->vocab_size()));
  }
  const std::vector<uint32_t> ids = tokenizer->encode(corpus);
  const std::vector<uint16_t> tokens(ids.begin(), ids.end());
  progress(fmt::format("encoded {} tokens with tokenizer '{}' ({} ids)", tokens.size(),
                       options.tokenizer, tokenizer->vocab_size()));

  const auto val_tokens =
      static_cast<size_t>(std::llround(static_cast<double>(tokens.size()) * options.val_fraction));
  const size_t split_at = tokens.size() - val_tokens;
  ensure_parent_dir(options.out_dir + "/tokenizer.json");
  PrepareSummary summary;
  summary.train_shards =
      write_split(tokens, 0, split_at, options.out_dir, "train", options.shard_tokens);
  summary.val_shards =
      write_split(tokens, split_at, tokens.size(), options.out_dir, "val", options.shard_tokens);
  save_tokenizer(*tokenizer, options.tokenizer, options.out_dir);
  summary.train_tokens = static_cast<int64_t>(split_at);
  summary.val_tokens = static_cast<int64_t>(val_tokens);
  summary.vocab_size = tokenizer->vocab_size();
  return summary;
}

}  // namespace kiln
