// --nodes MIN-MAX: a member that loses nodes goes on at once at a smaller world, on the nodes of
// its allocation that remain (core/app/slurm/task.h). That is the same run only where the smaller
// world runs its strategy and keeps its global batch, with more micro-steps on each rank (gradient
// accumulation). train.batch_tokens = 0 would not keep it (it follows the world), so submission
// pins it at the largest world's; a range with a smaller world that cannot keep it is refused at
// submission, and the task asks again before it shrinks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/app/slurm/sbatch.h"
#include "core/config/config.h"

namespace kiln {

// The --set values that pin the global batch of the member `base` + `overrides` at the range's
// largest world ("train.batch_tokens=512" where it is 0; none where it is set). A UserError
// naming the first smaller world of the range where the member could not go on (cannot_shrink).
std::vector<std::string> pin_global_batch(const std::string& base,
                                          const std::vector<std::string>& overrides,
                                          const SlurmOptions& slurm);

// Why `config`, running at `now` ranks, cannot go on at `ranks` as the same run: its strategy
// cannot run there, or its global batch does not divide into micro-steps there, or would change
// (train.batch_tokens = 0). Empty when it can.
std::string cannot_shrink(const ResolvedConfig& config, int now, int ranks);

// The port the ranks of Slurm job `job` meet at, on its first start (`relaunch` 0, one of
// 20000-39999) and on its relaunch number `relaunch` on fewer nodes (one of 40000-59999, since the
// last rendezvous store may linger): a relaunch's port is never another job's first one, and the
// first 8 relaunches of 2500 consecutive jobs have ports of their own.
int rendezvous_port(int64_t job, int relaunch);

}  // namespace kiln
