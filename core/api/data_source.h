// Data sources hand the trainer micro-batches of token ids for one split.
//
// Over a run: assemble() asks the factory once per split ("train", "val", "test") on every rank,
// after the model and the parallel strategy's attach(), with this rank's share of the data
// (the strategy's data_rank and data_world). The trainer then reads the train source one
// micro-batch per micro-step, and each evaluation resets a source and reads from its start.
// Snapshots record the train source's position; a resume seeks to it before the first step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/api/data_position.h"
#include "core/config/registry.h"

namespace kiln {

struct DataRequest {
  std::string split;  // "train", "val" or "test"
  int64_t micro_batch = 1;
  int64_t seq_len = 1;
  int rank = 0;
  int world = 1;
  int64_t vocab_limit = 0;  // the model's vocabulary: larger token ids are an error
  bool pinned = false;      // batches go to a CUDA device: hand them out in page-locked memory
  // `kiln eval --data`: a path or glob of files in the run's data format, read instead of the
  // split's configured ones. Empty = the split's (Params::path of the key named `split`).
  std::string files;
  // The trainer's reads: one stream that runs on from epoch to epoch, so that the rows of a step
  // are the same at any world size. False (evaluation): passes, each reading the split once.
  bool endless = false;
  uint64_t seed = 0;  // run.seed, for sources that draw their order (a blend's mixture)
  // What the trainer will read (endless requests): train.steps optimizer steps of rows_per_step
  // rows each (micro_batch x data ranks x micro-steps), so that a source of limited supply can
  // say before the first step at which step it would run out.
  int64_t steps = 0;
  int64_t rows_per_step = 0;
};

// The files a request reads: `kiln eval --data`'s pattern when given, else the split's key
// (data.train, data.val, data.test) as a path, with the files it matches in name order.
struct SplitFiles {
  std::string pattern;
  std::vector<std::string> files;
};

// Nothing when the split's key is empty and the split is not "train" (the data has no such
// split). A UserError when data.train is empty (`empty_train` is the whole message: what to set
// it to), or when the pattern matches no file: the pattern as the user gave it (`data.val =
// "GIVEN"`, with the absolute form read when that differs, or `--data PATTERN`), "matches no
// file:" and `no_match_fix`, what the plugin's user does about it.
std::optional<SplitFiles> split_files(const Params& p, const DataRequest& request,
                                      const std::string& empty_train,
                                      const std::string& no_match_fix);

struct Batch {
  // int64 [micro_batch, seq_len], on the CPU. Sources reuse these buffers once nothing holds
  // them (core/data/batch_buffers.h): copy a batch's contents to keep them past its use.
  at::Tensor inputs;
  at::Tensor targets;  // inputs shifted by one token
  // bool [micro_batch, seq_len], from sources whose masks_loss() is true: the targets the loss
  // counts (a fine-tuning record's response tokens). Undefined = every target counts.
  at::Tensor loss_mask;
  // int64 [micro_batch, seq_len], from sources that pack several documents into a row (data.pack;
  // always with a loss_mask): each input's position in its own document, 0 where one starts.
  // Attention stays within a document (core/layers/document_positions.h). Undefined = a row is one
  // document, positions 0 .. seq_len - 1.
  at::Tensor positions;
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  // This rank's next micro-batch; never runs out (a pass over the split wraps to the next
  // epoch). Called by the trainer once per micro-step and per evaluation batch, on every rank
  // (every pipeline stage reads too, so that all keep the same position).
  virtual Batch next() = 0;
  // Back to the start of the split: called before every evaluation, so each one reads the same
  // batches.
  virtual void reset() = 0;
  // Where the next global batch starts (rank 0's window in it), so that it holds at any world
  // size. Read on rank 0 for each snapshot, between steps.
  virtual LoaderPosition position() const = 0;
  // Goes to a position() saved by a run of any world size (rank r reads r windows further).
  // Called on every rank when a run resumes, before its first step.
  virtual void seek(const LoaderPosition& position) = 0;
  virtual std::string describe() const = 0;  // one line for the run's header on the console
  // Micro-batches in one pass over the split: what the closing test pass and `kiln eval` read.
  virtual int64_t batches_per_pass() const = 0;
  // Where the tokenizer that made this data lives (tokenizer.json), for `kiln sample`.
  virtual std::string tokenizer_dir() const = 0;
  // Whether batches carry a loss_mask. The trainer then takes a step's loss as the sum of the
  // counted targets' losses over the step's micro-batches (all ranks) divided by their count.
  // Asked once, when the trainer is built.
  virtual bool masks_loss() const { return false; }
  // Data mixed from several sources (a blend): their names, in a fixed order, and the tokens of
  // each that the global batches read since the split's start took, all ranks together (the
  // same on every rank). The session logs each step's share (MetricRow::source_tokens). Empty
  // for data of one source.
  virtual std::vector<std::string> source_names() const { return {}; }
  virtual std::vector<int64_t> source_tokens() const { return {}; }
};

struct DataKind {
  static constexpr const char* name = "data";
  using Product = DataSource;
  // Returns null when the plugin has no data for the split (e.g. no validation files).
  using Factory = std::function<std::shared_ptr<DataSource>(const Params&, const DataRequest&)>;
};
using DataRegistry = Registry<DataKind>;

}  // namespace kiln
