#include "core/train/sample_trace.h"

#include <unistd.h>

#include <fmt/format.h>

#include <ATen/core/TensorAccessor.h>

#include "core/util/env.h"
#include "core/util/fs.h"

namespace kiln {

std::unique_ptr<SampleTrace> SampleTrace::from_environment(int rank) {
  const auto dir = env_text("KILN_TRACE_SAMPLES");
  if (!dir) return nullptr;
  return std::unique_ptr<SampleTrace>(
      new SampleTrace(fmt::format("{}/rank{}.{}.tsv", *dir, rank, ::getpid())));
}

void SampleTrace::record(int64_t step, const at::Tensor& inputs) {
  const auto rows = inputs.accessor<int64_t, 2>();
  for (int64_t r = 0; r < rows.size(0); ++r) {
    uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64-bit, over each id's 8 bytes
    for (int64_t t = 0; t < rows.size(1); ++t) {
      auto id = static_cast<uint64_t>(rows[r][t]);
      for (int byte = 0; byte < 8; ++byte, id >>= 8)
        hash = (hash ^ (id & 0xff)) * 1099511628211ull;
    }
    lines_ += fmt::format("{}\t{:016x}\n", step, hash);
  }
}

void SampleTrace::flush() const {
  write_file_atomic(path_, lines_);
}

}  // namespace kiln
