#include "core/app/slurm/task.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/app/slurm/node_range.h"
#include "core/app/slurm/sbatch.h"
#include "core/app/sweeps/member.h"
#include "core/distributed/world_env.h"
#include "core/store/runs/lookup.h"
#include "core/store/runs/sweep_records.h"
#include "core/store/runs/writer.h"
#include "core/train/step_batch.h"
#include "core/util/env.h"
#include "core/util/error.h"
#include "core/util/stop_signal.h"
#include "core/util/text.h"

namespace kiln {

namespace {

std::atomic<bool> g_requeue{false};  // set by the SIGUSR1 handler: lock-free, signal-safe

void on_requeue_signal(int) {
  g_requeue = true;
}

// SIGUSR1 recorded while it lives, without SA_RESTART so that a wait for the member returns.
class RequeueSignal {
 public:
  RequeueSignal() {
    g_requeue = false;
    struct sigaction action {};
    action.sa_handler = on_requeue_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR1, &action, &previous_);
  }
  ~RequeueSignal() { sigaction(SIGUSR1, &previous_, nullptr); }
  RequeueSignal(const RequeueSignal&) = delete;
  RequeueSignal& operator=(const RequeueSignal&) = delete;

 private:
  struct sigaction previous_ {};
};

constexpr int64_t kMostSlurm = INT32_MAX;  // Slurm's ids and counts are 32-bit

int64_t array_task() {
  if (!env_text("SLURM_ARRAY_TASK_ID")) {
    throw UserError(
        "kiln sweep task runs inside a task of the job array `kiln sweep --launcher slurm` "
        "submits (SLURM_ARRAY_TASK_ID is not set): to run a sweep here, use kiln sweep without "
        "--launcher slurm");
  }
  return env_integer("SLURM_ARRAY_TASK_ID", -1, 0, kMostSlurm);
}

// The job's first node.
std::string first_node() {
  const CapturedRun hosts = run_slurm_tool(
      {"scontrol", "show", "hostnames", env_text("SLURM_JOB_NODELIST").value_or("")});
  return hosts.output.substr(0, hosts.output.find('\n'));
}

// A port of this job's own, so that two members sharing a node do not meet: its first, or the
// one of its relaunch number `relaunch` on fewer nodes.
int job_port(int relaunch) {
  return rendezvous_port(env_integer("SLURM_JOB_ID", 0, 0, kMostSlurm), relaunch);
}

// The ranks' rendezvous at `node`: its NodeAddr, which a node name need not resolve to (a
// cluster's names may be aliases; several slurmd of one machine share its address), or the name
// itself where scontrol does not say.
std::vector<std::pair<std::string, std::string>> rendezvous_at(const std::string& node, int port) {
  return {{"MASTER_ADDR", slurm_node_address(node).value_or(node)},
          {"MASTER_PORT", std::to_string(port)}};
}

// The launch of this task's member: the CPUs Slurm gave it, and srun for several ranks.
MemberLaunch launch_for(const SweepRecord& sweep, const std::string& db) {
  MemberLaunch launch;
  launch.base = sweep.base;
  launch.db = db;
  launch.extra = sweep.settings;
  launch.threads = static_cast<int>(env_integer("SLURM_CPUS_PER_TASK", 0, 1, kMostSlurm));
  if (env_integer("SLURM_NTASKS", 1, 1, kMostSlurm) > 1) {
    launch.wrapper = {"srun", "--kill-on-bad-exit=1"};
    launch.env = rendezvous_at(first_node(), job_port(0));
  }
  return launch;
}

// With --nodes MIN-MAX (KILN_MIN_NODES), a member that lost nodes resumes at once in this
// allocation, on the nodes of it that remain usable, when they are at least MIN: no requeue, no
// wait for Slurm to start the task again. Its ranks meet at the first of them, on `port` (the
// last store's may linger), and resume at that smaller world (core/app/slurm/node_range.h says
// when that is the same run). nullopt: no range, nothing lost, or too few left.
struct RemainingNodes {
  std::vector<std::string> nodes;
  int ranks = 0;
  MemberLaunch launch;  // the member's on them
};
std::optional<RemainingNodes> on_remaining_nodes(const MemberLaunch& launch, int port) {
  if (!env_text("KILN_MIN_NODES") || launch.wrapper.empty()) return std::nullopt;
  const int64_t fewest = env_integer("KILN_MIN_NODES", 1, 1, kMostSlurm);
  const std::string nodes = env_text("SLURM_JOB_NODELIST").value_or("");
  const int64_t allocated = env_integer("SLURM_JOB_NUM_NODES", 1, 1, kMostSlurm);
  // Usable: idle, mixed, allocated or completing, and responding (a '*' marks a node that is not).
  const CapturedRun states = run_slurm_tool({"sinfo", "-h", "-N", "-n", nodes, "-o", "%N %t"});
  std::vector<std::string> usable;
  for (const auto& line : split(states.code == 0 ? states.output : "", '\n')) {
    const std::vector<std::string> fields = split(line, ' ');
    if (fields.size() == 2 &&
        std::set<std::string>{"idle", "mix", "alloc", "comp"}.count(fields[1]) &&
        std::find(usable.begin(), usable.end(), fields[0]) == usable.end())
      usable.push_back(fields[0]);
  }
  const int64_t left = static_cast<int64_t>(usable.size());
  if (left >= allocated || left < fewest) return std::nullopt;
  const int64_t per_node = env_integer("SLURM_NTASKS", allocated, 1, kMostSlurm) / allocated;
  MemberLaunch smaller = launch;
  smaller.wrapper.insert(smaller.wrapper.end(), {fmt::format("--nodes={}", left),
                                                 fmt::format("--ntasks={}", left * per_node),
                                                 "--nodelist=" + join(usable, ",")});
  smaller.env = rendezvous_at(usable.front(), port);
  return RemainingNodes{usable, static_cast<int>(left * per_node), smaller};
}

// What reached the task: the time limit's SIGUSR1 (requeue), or a stop.
enum class Asked { nothing, stop, requeue };

Asked asked_so_far() {
  if (g_requeue) return Asked::requeue;
  return StopSignal::requested() ? Asked::stop : Asked::nothing;
}

// Waits for the member, passing a stop on to it once. The task's StopSignal and RequeueSignal
// are in place (run_sweep_task).
Asked wait_for_member(MemberProcess& child, const std::function<void(const std::string&)>& print) {
  bool forwarded = false;
  const auto unforwarded_stop = [&] { return !forwarded && asked_so_far() != Asked::nothing; };
  while (!Process::wait_any({&child.process}, unforwarded_stop)) {
    forwarded = true;
    print(g_requeue ? "the time limit is near: the member snapshots and stops, then this task "
                      "is requeued"
                    : "stopping: the member snapshots and stops");
    child.process.signal(SIGTERM);
  }
  // A stop that came as the member ended was not passed on, but it was asked all the same.
  return asked_so_far();
}

// The newest snapshot the store lists for run `name` ("step_000010"), "" for none.
std::string newest_snapshot(RunStore& store, const std::string& name) {
  const std::optional<RunRecord> run = store.find_run(name);
  if (!run) return "";
  const std::vector<std::string> labels = listed_snapshot_labels(store.connection(), run->id);
  return labels.empty() ? "" : labels.back();
}

void requeue_this_task(const std::function<void(const std::string&)>& print) {
  const std::string task = fmt::format("{}_{}", env_text("SLURM_ARRAY_JOB_ID").value_or(""),
                                       env_text("SLURM_ARRAY_TASK_ID").value_or(""));
  const CapturedRun result = run_slurm_tool({"scontrol", "requeue", task});
  print(result.code == 0 ? fmt::format("requeued Slurm task {}", task)
                         : fmt::format("scontrol requeue {} failed: {}", task, result.output));
}

}  // namespace

int run_sweep_task(const std::string& db, const std::string& name,
                   const std::function<void(const std::string&)>& print) {
  const int64_t task = array_task();
  RunStore store(db);
  const SweepRecord sweep = require_sweep(store, name);
  std::optional<SweepMember> member;
  for (const auto& m : sweep_members(store, name)) {
    if (m.task == task) member = SweepMember{m.name, m.overrides};
  }
  if (!member) {
    throw UserError(
        fmt::format("sweep '{}' in run store '{}' has no member of task {}", name, db, task));
  }
  const std::optional<RunRecord> run = store.find_run(member->name);
  if (run && run->status == "completed") {
    print(fmt::format("{} completed already: nothing to do", member->name));
    return kExitOk;
  }
  MemberLaunch launch = launch_for(sweep, db);
  int ranks = static_cast<int>(env_integer("SLURM_NTASKS", 1, 1, kMostSlurm));
  const std::string task_started_from = newest_snapshot(store, member->name);
  std::string started_from = task_started_from;  // the latest snapshot as this start began
  // For the whole task, not only while a member runs: a time-limit SIGUSR1 or a scancel that
  // lands between two starts of the member is recorded, not the default end of the task.
  const StopSignal stop;
  const RequeueSignal requeue;
  Asked asked = Asked::nothing;
  std::string state;
  for (int relaunch = 0;; ++relaunch) {
    if (relaunch > 0) {  // a signal that came while the nodes that remain were sought
      asked = asked_so_far();
      if (asked != Asked::nothing) break;
    }
    MemberProcess child = start_member(launch, MemberJob{&*member, 0}, print);
    asked = wait_for_member(child, print);
    state = finished_member_state(launch, child);
    if (state == "running") {  // rank 0 itself ended without a word: killed, or its node lost
      store.finish_run(store.find_run(member->name)->id, "interrupted",
                       "rank 0 ended without recording why: killed, or its node lost");
      state = "interrupted";
    }
    print(fmt::format("{} {}", member->name, state));
    const std::string latest = newest_snapshot(store, member->name);
    if (relaunch > 0 && state != "completed" && latest == started_from) {
      print(fmt::format("{} ended on the {} rank(s) that remain before its next snapshot: {}",
                        member->name, ranks, last_console_line(child)));
    }
    // A rank stopped answering (nothing was asked of the task): go on here on fewer nodes, when
    // --nodes is a range and the member saved a newer snapshot than it started from.
    if (state != "interrupted" || asked != Asked::nothing || latest.empty() ||
        latest == started_from)
      break;
    const std::optional<RemainingNodes> remaining =
        on_remaining_nodes(launch, job_port(relaunch + 1));
    if (!remaining) break;
    const ResolvedConfig config = member_config(launch, *member);
    const std::string where = fmt::format("the {} node(s) that remain ({})",
                                          remaining->nodes.size(), join(remaining->nodes, ","));
    if (const std::string why = cannot_shrink(config, ranks, remaining->ranks); !why.empty()) {
      print(
          fmt::format("a rank of {} stopped answering: it does not go on on {}, where it would "
                      "not be the same run: {}",
                      member->name, where, why));
      break;
    }
    print(fmt::format(
        "a rank of {} stopped answering: it resumes from {} on {}, {}", member->name, latest, where,
        world_change(step_batch(config, ranks), step_batch(config, remaining->ranks))));
    launch = remaining->launch;
    ranks = remaining->ranks;
    started_from = latest;
  }
  if (state == "completed") return kExitOk;
  if (state == "interrupted" && asked == Asked::requeue) requeue_this_task(print);
  // Interrupted with no signal here: a rank stopped answering (its node lost, its process
  // killed or hung) and the others stopped. The task runs again from the latest snapshot, as
  // long as it left a newer one than it started from: a rank that fails before that would fail
  // so again, from the same steps.
  if (state == "interrupted" && asked == Asked::nothing) {
    const std::string latest = newest_snapshot(store, member->name);
    if (!latest.empty() && latest != task_started_from) {
      print(
          fmt::format("a rank of {} stopped answering: requeued to resume from its latest "
                      "snapshot, {}",
                      member->name, latest));
      requeue_this_task(print);
    } else {
      print(
          fmt::format("a rank of {} stopped answering before it saved a snapshot newer than "
                      "the one it started from ({}): not requeued, which would repeat the "
                      "same steps; see its console.log, then `kiln sweep resubmit`",
                      member->name, task_started_from.empty() ? "none" : task_started_from));
    }
  }
  return state == "interrupted" ? kExitInterrupted : kExitSomeFailed;
}

}  // namespace kiln
