// Data sources hand the trainer micro-batches of token ids for one split.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "core/registry.h"
#include "core/token_loader.h"

namespace kiln {

struct DataRequest {
  std::string split;  // "train", "val" or "test"
  int64_t micro_batch = 1;
  int64_t seq_len = 1;
  int rank = 0;
  int world = 1;
  int64_t vocab_limit = 0;  // the model's vocabulary: larger token ids are an error
  bool pinned = false;      // batches go to a CUDA device: hand them out in page-locked memory
};

struct Batch {
  // int64 [micro_batch, seq_len], on the CPU. Sources reuse these buffers once nothing holds
  // them (core/batch_buffers.h): copy a batch's contents to keep them past its use.
  at::Tensor inputs;
  at::Tensor targets;  // inputs shifted by one token
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual Batch next() = 0;
  virtual void reset() = 0;
  virtual LoaderPosition position() const = 0;
  virtual void seek(const LoaderPosition& position) = 0;
  virtual std::string describe() const = 0;  // one line for the console
  // Micro-batches in one pass over the split (what `kiln eval` reads by default).
  virtual int64_t batches_per_pass() const = 0;
  // Where the tokenizer that made this data lives (tokenizer.json), for sampling.
  virtual std::string tokenizer_dir() const = 0;
};

struct DataKind {
  static constexpr const char* name = "data";
  using Product = DataSource;
  // Returns null when the plugin has no data for the split (e.g. no validation files).
  using Factory = std::function<std::shared_ptr<DataSource>(const Params&, const DataRequest&)>;
};
using DataRegistry = Registry<DataKind>;

}  // namespace kiln
