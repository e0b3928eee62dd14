// The cores of this machine, and the Kiln processes training on it. Two runs started side by side
// on 2 cores, each with a thread per core, ran 7.7x slower per step than one alone (OpenMP's
// spinning workers fight over cores they do not own: 0.26x the throughput of one run, added
// together); with a thread each they give 1.2x (docs/benchmarks.md). Every run registers here, so
// that one can say how many others train beside it; a run that asks to share
// (run.share_cores = true) follows the cores divided by the Kiln processes registered now: it
// shrinks when a second one starts and grows back when it ends. LibTorch splits its sums by
// thread, so such a run's numerics depend on what else runs; by default a run keeps the count it
// started with.
//
// The registry: one file per process in $XDG_RUNTIME_DIR/kiln/running (or /tmp/kiln-UID/running),
// named by its pid and held under an exclusive flock for the process's life, so a process that
// died (even by SIGKILL) leaves a file anyone can lock: whoever counts next removes it. A file is
// locked under a temporary name and then renamed into place, so no counter ever sees it unlocked.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace kiln {

// The CPUs this process may run on: its affinity mask, capped by its cgroup's CPU quota (cgroup
// v2's cpu.max, as a container's limit appears), rounded up; at least 1.
int usable_cpus();

class CoreShare {
 public:
  // Registers this process; nothing is shared (one process alone) when the registry cannot be
  // made or is not this user's own (a directory another user made, one others may write, a
  // symbolic link), which is not an error: the threads then stay what they are.
  explicit CoreShare(int cores);
  ~CoreShare();
  CoreShare(const CoreShare&) = delete;
  CoreShare& operator=(const CoreShare&) = delete;

  // Kiln processes registered on this machine now, this one included (1 without a registry).
  int processes();
  // max(1, cores / processes()).
  int fair_threads();
  // Sets LibTorch's threads to fair_threads() when they differ, at most every `every` (listing
  // the registry costs a few system calls); returns the threads in force.
  int rebalance(std::chrono::milliseconds every = std::chrono::milliseconds(500));

 private:
  int cores_;
  int fd_ = -1;  // this process's file, flocked; -1 without a registry
  std::string dir_, path_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace kiln
