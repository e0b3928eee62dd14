#include "core/app/sweeps/member_threads.h"

#include <set>

#include <fmt/format.h>

#include "core/config/options.h"
#include "core/train/run_device.h"
#include "core/util/core_share.h"

namespace kiln {

std::string member_threads_text(const MemberLaunch& launch,
                                const std::vector<SweepMember>& members) {
  std::set<int> counts;
  for (const SweepMember& member : members) {
    const int fixed = launch.threads > 0
                          ? launch.threads
                          : fixed_threads(run_options(member_config(launch, member)));
    counts.insert(fixed > 0 ? fixed : usable_cpus());
  }
  if (counts.empty()) counts.insert(launch.threads > 0 ? launch.threads : usable_cpus());
  const int low = *counts.begin(), high = *counts.rbegin();
  if (low == high) return fmt::format("{} CPU thread{} each", low, low == 1 ? "" : "s");
  return fmt::format("{} to {} CPU threads each", low, high);
}

}  // namespace kiln
