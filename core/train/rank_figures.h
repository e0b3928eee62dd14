// Figures every rank holds of its own (bytes of training state, of memory), gathered so that rank 0
// prints them side by side: what sharding saves is read across the ranks, not on one. Each
// function is a collective: every rank calls it, in the same order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/train/assemble.h"

namespace kiln {

// Every rank's `mine`, in rank order.
std::vector<int64_t> every_rank(const AssembledRun& run, int64_t mine);

// "optimizer state per rank: 0.42, 0.42 MiB | training state per rank: 1.57, 1.57 MiB
// (parameters, gradients, optimizer)": the optimizer's state tensors (core/api/optimizer.h) and
// the whole training state each rank holds once the first step created them.
std::string state_per_rank_line(const AssembledRun& run);

}  // namespace kiln
