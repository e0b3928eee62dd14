#include "core/train/sample_trace.h"

#include <unistd.h>

#include <string_view>

#include <fmt/format.h>

#include "core/util/counter_hash.h"
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
  const at::Tensor rows = inputs.contiguous();
  const auto bytes = static_cast<size_t>(rows.size(1)) * sizeof(int64_t);
  const char* data = static_cast<const char*>(rows.data_ptr());
  for (int64_t r = 0; r < rows.size(0); ++r) {
    const uint64_t hash = fnv1a64(std::string_view(data + static_cast<size_t>(r) * bytes, bytes));
    lines_ += fmt::format("{}\t{:016x}\n", step, hash);
  }
}

void SampleTrace::flush() const {
  write_file_atomic(path_, lines_);
}

}  // namespace kiln
