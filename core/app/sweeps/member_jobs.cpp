#include "core/app/sweeps/member_jobs.h"

#include <algorithm>
#include <csignal>
#include <thread>

#include <fmt/format.h>

#include "core/store/runs/writer.h"
#include "core/train/assemble.h"
#include "core/util/process.h"
#include "core/util/stop_signal.h"
#include "core/util/text.h"

namespace kiln {

namespace {

void report_finished(const MemberLaunch& launch, const MemberProcess& child, size_t finished,
                     size_t total, const std::function<void(const std::string&)>& print) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - child.started).count();
  std::string state = finished_member_state(launch, child);
  const std::optional<RunRecord> run = RunStore(launch.db).find_run(child.member->name);
  if (state == "interrupted" && child.until > 0 && run && run->steps == child.until) {
    state = fmt::format("paused at step {}", child.until);
  }
  print(fmt::format("[{}] {} {} in {}",
                    total > 0 ? fmt::format("{}/{}", finished, total) : std::to_string(finished),
                    child.member->name, state, format_duration(seconds)));
}

// The bytes `member` needs at least, weighed as its `kiln run` weighs them; 0 where assembling it
// fails (its own process reports why).
double memory_floor(const MemberLaunch& launch, const SweepMember& member) {
  try {
    return assemble(member_config(launch, member), Assembly::kCheck).memory.total();
  } catch (const UserError&) {
    return 0;
  }
}

// What the running members are yet to take of the memory they need at least: each one's floor
// less what it holds resident already (counted in MemAvailable by now).
double memory_yet_to_take(const std::vector<MemberProcess>& running) {
  double bytes = 0;
  for (const MemberProcess& c : running)
    bytes += std::max(0.0, c.memory_floor - resident_bytes(c.process.pid()));
  return bytes;
}

// The running members stop (each snapshots) before an error leaves them to go on alone.
void stop_all(std::vector<MemberProcess>& running) {
  for (const auto& c : running)
    c.process.signal(SIGTERM);
  for (auto& c : running)
    c.process.wait();
}

}  // namespace

bool run_jobs(const MemberLaunch& launch, int jobs, const JobHooks& hooks, size_t total,
              const std::function<void(const std::string&)>& print) {
  const StopSignal stop;
  int forwarded = 0;
  const auto unforwarded_stop = [&] {
    return StopSignal::requested() && forwarded != StopSignal::received();
  };
  std::vector<MemberProcess> running;
  size_t finished = 0;
  try {
    for (;;) {
      while (!StopSignal::requested() && static_cast<int>(running.size()) < jobs) {
        std::vector<const SweepMember*> members;
        for (const auto& c : running)
          members.push_back(c.member);
        std::optional<MemberJob> job = hooks.next(members);  // may read the store
        if (!job) break;
        job->memory_reserved = memory_yet_to_take(running);
        running.push_back(start_member(launch, *job, print));
        if (jobs > 1) running.back().memory_floor = memory_floor(launch, *job->member);
      }
      if (running.empty()) {  // all ended, or stopped before the rest started
        if (StopSignal::requested() || !hooks.others_working || !hooks.others_working()) break;
        std::this_thread::sleep_for(hooks.tick_every);
        continue;
      }
      std::vector<Process*> processes;
      for (auto& c : running)
        processes.push_back(&c.process);
      const std::optional<size_t> ended = Process::wait_any(
          processes, unforwarded_stop, hooks.tick ? std::optional(hooks.tick_every) : std::nullopt);
      if (hooks.tick) hooks.tick();
      if (!ended) {  // a stop to pass on came, or the tick
        if (unforwarded_stop()) {
          forwarded = StopSignal::received();
          print(
              "stopping: members finish their current step, snapshot and stop; re-run the "
              "sweep to resume them");
          for (const auto& c : running)
            c.process.signal(forwarded);
        }
        continue;
      }
      report_finished(launch, running[*ended], ++finished, total, print);
      const SweepMember& member = *running[*ended].member;
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(*ended));
      if (hooks.ended) hooks.ended(member);
    }
  } catch (...) {
    stop_all(running);
    throw;
  }
  return StopSignal::requested();
}

}  // namespace kiln
