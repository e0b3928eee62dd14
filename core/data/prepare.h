// `kiln prepare`: text files -> token shards (llm.c format: uint16 ids, or uint32 when the
// vocabulary has more than 65,536) plus the tokenizer that made them.
// Each file is a document, or with `field` each line of a JSON Lines file is one (its `field`).
// An input with *, ? or [ is a glob, its files taken in sorted order. The tokens split in order:
// train, then the last val_fraction and test_fraction as validation and test. Encoding runs on
// every core.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files or globs
  std::string field;                // non-empty: the inputs are JSON Lines, a document a line
  std::string tokenizer = "char";
  std::string tokenizer_file;  // for a tokenizer that reads one (hf: a tokenizer.json)
  std::string out_dir;
  double val_fraction = 0.1;
  double test_fraction = 0.0;
  int64_t shard_tokens = 100'000'000;
};

struct PrepareSummary {
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
  int64_t test_tokens = 0;
  int64_t train_shards = 0;
  int64_t val_shards = 0;
  int64_t test_shards = 0;
  int64_t vocab_size = 0;
};

PrepareSummary prepare_dataset(const PrepareOptions& options,
                               const std::function<void(const std::string&)>& progress);

}  // namespace kiln
