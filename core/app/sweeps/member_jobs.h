// Running a sweep's members as jobs, `jobs` at a time: each job one member's `kiln run` or
// `kiln resume` (core/app/sweeps/member.h), the next job asked for whenever a slot is free. The
// local runner (core/app/sweeps/runner.h) gives the jobs of a list, or of TPE's proposals; an asha
// search (core/app/sweeps/asha_search.h) gives them from its ladder, claiming each in the run
// store so that other workers of the same sweep never run it too.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/app/sweeps/member.h"

namespace kiln {

struct JobHooks {
  // The next job, asked when a slot is free, with the members running here; none when nothing
  // can start until a running member ends (it is asked again then), or nothing is left.
  std::function<std::optional<MemberJob>(const std::vector<const SweepMember*>& running)> next;
  // A member's process ended (after its line is printed). Optional.
  std::function<void(const SweepMember&)> ended;
  // Called at least every `tick` while members run (a worker's heartbeat); optional.
  std::function<void()> tick;
  std::chrono::milliseconds tick_every{1000};
  // With nothing running here and nothing to start: whether to wait and ask again (other
  // workers' members may still bring a job). Optional: no.
  std::function<bool()> others_working;
};

// Runs the jobs `hooks.next` gives, `jobs` at a time (`total` of them, for the progress lines;
// 0: not known before), printing a line as each ends. A SIGINT or SIGTERM starts no new member
// and is passed on to the running ones, which snapshot and stop; then it returns true. An
// exception from `next` stops the running members (each snapshots) and is rethrown. A member
// started while others run here is told what they are yet to take of the memory they need
// (MemberJob::memory_reserved), which its memory check counts as taken.
bool run_jobs(const MemberLaunch& launch, int jobs, const JobHooks& hooks, size_t total,
              const std::function<void(const std::string&)>& print);

}  // namespace kiln
