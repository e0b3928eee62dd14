// `kiln prepare`: text files -> token shards (llm.c format: uint16 ids, or uint32 when the
// vocabulary has more than 65,536) plus the tokenizer that made them.
// Each file is a document, or with `field` each line of a JSON Lines file is one (its `field`).
// An input with *, ? or [ is a glob, its files taken in sorted order. The tokens split in order:
// train, then the last val_fraction and test_fraction as validation and test.
//
// The inputs stream through in constant memory (core/data/prepare_input.h), encoded on
// `threads` threads into the same tokens at any count. The work goes to OUT/.prepare/ (the
// tokens so far, and where the inputs stopped, saved after every batch), and the shards and
// tokenizer.json are renamed into OUT only once all are written: an interrupted prepare leaves
// no half shard under a final name, and `resume` goes on from its last saved batch. A SIGINT or
// SIGTERM stops it after the batch being encoded, saved.
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
  int threads = 0;                // encoding threads; 0 = every core
  bool resume = false;            // go on with OUT/.prepare/ (the same inputs and options)
  int64_t piece_bytes = 1 << 20;  // text a thread encodes at once; the cuts depend on it
};

struct PrepareSummary {
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
  int64_t test_tokens = 0;
  int64_t train_shards = 0;
  int64_t val_shards = 0;
  int64_t test_shards = 0;
  int64_t vocab_size = 0;
  // A SIGINT or SIGTERM stopped the encoding after a saved batch: nothing is published, and
  // `resume` goes on. The counts above are then zero.
  bool interrupted = false;
};

// Where a pass over the inputs is, after each batch.
struct PrepareStatus {
  const char* pass = "";  // "fit" (the tokenizer learns its vocabulary) or "encode"
  int64_t bytes_done = 0, bytes_total = 0;
  int64_t bytes_at_start = 0;  // done before this process began the pass (a resume's)
  int64_t tokens = 0;          // written so far (encode)
  int64_t tokens_at_start = 0;
  double seconds = 0;  // since this process began the pass
};

struct PrepareReport {
  std::function<void(const std::string&)> line;      // a stage's outcome, said once
  std::function<void(const PrepareStatus&)> status;  // after every batch
};

PrepareSummary prepare_dataset(const PrepareOptions& options, const PrepareReport& report = {});

}  // namespace kiln
