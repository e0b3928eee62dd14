// Where a data source stands in its split: what a snapshot records for each rank and what a
// resumed source seeks back to. Plain numbers, so that torch-free code (the token loader, the
// snapshot's state.json) can carry one.
#pragma once

#include <cstdint>

namespace kiln {

struct LoaderPosition {
  int64_t shard = 0;
  int64_t offset = 0;  // token index of rank 0's next window in that shard
  int64_t epoch = 0;
};

}  // namespace kiln
