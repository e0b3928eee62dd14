// A test mode that shows which samples each step read. With KILN_TRACE_SAMPLES=DIR set, the
// trainer adds a line per row of every training micro-batch it reads, "STEP<TAB>FINGERPRINT"
// (FNV-1a over the bytes of the row's int64 input token ids), and rewrites DIR/rank<R>.<pid>.tsv
// with them after each step (one file per process, so a resume adds its own).
// tests/e2e/sample_order_test.cpp gathers every rank's lines and compares what each step read at
// different world sizes. Unset, the trainer makes none and it costs one branch per micro-batch. A
// pipeline's stages read their micro-batches themselves and are not traced.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

namespace kiln {

class SampleTrace {
 public:
  // Null unless KILN_TRACE_SAMPLES is set.
  static std::unique_ptr<SampleTrace> from_environment(int rank);

  // The rows of `inputs` (int64 [rows, seq_len], on the CPU), read for step `step`.
  void record(int64_t step, const at::Tensor& inputs);
  // Writes the lines so far.
  void flush() const;

 private:
  explicit SampleTrace(std::string path) : path_(std::move(path)) {}
  std::string path_;
  std::string lines_;
};

}  // namespace kiln
