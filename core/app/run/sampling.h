// `kiln sample`: text generated from a run's snapshot, or from a Hugging Face model directory
// (--hf, core/app/run/hf_checkpoint.h). The prompt is read once into a key/value cache
// (core/layers/kv_cache.h), then each new token alone; a full context is read again from its last
// half. The cache's size, and the bytes the allocator gave it, go to stderr.
#pragma once

#include <cstdint>
#include <string>

#include "core/app/run/from_snapshot.h"

namespace kiln {

struct SampleOptions {
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 1.0;  // 0 = always the most likely token
  int64_t top_k = 0;         // 0 = no cut
  int64_t seed = 1337;
};

// The prompt followed by the generated text.
std::string sample_snapshot(const SnapshotRequest& request, const SampleOptions& options);

}  // namespace kiln
