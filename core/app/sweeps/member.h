// One sweep member as a child process of this binary: `kiln run` for a member without a run,
// `kiln resume` for one with a run (interrupted or failed), its console into its console.log.
// The local runner (core/app/sweeps/runner.h) starts its members this way, `jobs` at a time, and a
// Slurm array task (core/app/slurm/task.h) its one member, so that both start, resume and record a
// member alike.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/app/sweeps/spec.h"
#include "core/config/config.h"
#include "core/util/process.h"

namespace kiln {

// What starting any member of a sweep needs.
struct MemberLaunch {
  std::string base;                // the experiment every member starts from
  std::string db;                  // the run store
  std::vector<std::string> extra;  // --set values every new member gets after its own
  int threads = 0;                 // run.threads of new and resumed members; 0: the config's
  // Runs the member's command, e.g. {"srun", "--kill-on-bad-exit=1"} for a member of several
  // ranks; empty: it runs as this binary.
  std::vector<std::string> wrapper;
  std::vector<std::pair<std::string, std::string>> env;  // added to the member's environment
};

// What a free worker runs: a member, to its train.steps or (an asha search's rung) paused after
// step `until` (`kiln run|resume --until`).
struct MemberJob {
  const SweepMember* member = nullptr;
  int64_t until = 0;  // 0: to the run's end
  // > 0: at `until`, the cooldown branch of this many steps that scores the rung
  // (`--probe-cooldown`, an asha search's rung_cooldown).
  int64_t probe_cooldown = 0;
  // Bytes the members running beside it on this machine are yet to take, which its memory check
  // counts as taken (kMemoryReserved, core/train/memory_check.h).
  double memory_reserved = 0;
};

struct MemberProcess {
  Process process;
  const SweepMember* member = nullptr;
  int64_t until = 0;   // the job's
  std::string uuid;    // the identity chosen for a new member (core/store/runs/paths.h)
  std::string folder;  // the member's folder, where its console.log is
  std::string log;
  std::chrono::steady_clock::time_point started;
  double memory_floor = 0;  // bytes it needs at least (core/train/memory_check.h); 0: not weighed
};

// The member's config as its `kiln run` resolves it.
ResolvedConfig member_config(const MemberLaunch& launch, const SweepMember& member);

// Starts the job's member (in its own process group, so that a terminal's Ctrl-C reaches only
// the caller, which passes it on once) and prints "start NAME (new|resume)[ to step S]".
MemberProcess start_member(const MemberLaunch& launch, const MemberJob& job,
                           const std::function<void(const std::string&)>& print);

// The last line its console.log holds: once it ended, what it said last (a refusal's reason).
std::string last_console_line(const MemberProcess& child);

// The member's state once its process ended, as its run row says; a member without a row
// failed before creating it, and is recorded now as failed with its console's last line, so
// that the store has every member.
std::string finished_member_state(const MemberLaunch& launch, const MemberProcess& child);

}  // namespace kiln
