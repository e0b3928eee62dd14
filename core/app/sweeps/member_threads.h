// The CPU threads a sweep's members train on, for the line a sweep starts with: what their runs
// will take (core/train/run_device.h), not what the sweep would give them had it set the count.
#pragma once

#include <string>
#include <vector>

#include "core/app/sweeps/member.h"

namespace kiln {

// The threads of each member of `launch`: the sweep's share (MemberLaunch::threads), else its own
// run.threads or OMP_NUM_THREADS, else the CPUs this process may use. "1 CPU thread each", or
// "1 to 4 CPU threads each" where members differ.
std::string member_threads_text(const MemberLaunch& launch,
                                const std::vector<SweepMember>& members);

}  // namespace kiln
