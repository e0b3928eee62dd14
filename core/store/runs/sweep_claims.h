// What lets several workers share one search with no controller (an asha or tpe sweep's `kiln
// sweep` processes, and its Slurm array tasks: core/app/slurm/worker.h): every decision is one
// write transaction on the run store, on SQLite and PostgreSQL alike (core/store/db/statement.h's
// Transaction takes the store's write lock), so two workers never decide from the same state.
// A decision reads the members other workers hold, decides, and records in the same transaction
// its claim on the member it runs and a line saying what it did and why. A worker refreshes its
// claims' heartbeat while its members run and drops a claim when the member ends; a claim whose
// heartbeat is older than the timeout belongs to a worker that was killed, and is dropped by the
// next decision (at once when that worker ran on this host and its process is gone), so the member
// it held is decided again (resumed from its snapshot). A tpe search's proposals are recorded here
// too, so that every worker proposes from, and names, the same trials.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/store/runs/writer.h"

namespace kiln {

// Migration 13 of the run store (core/store/runs/schema.cpp): the tables below.
extern const char* const kSweepClaimTablesSql;

// What an asha sweep's ladder is read by (core/store/history/rung_ladder.h): recorded by its
// workers when they start, so that `kiln serve` and `kiln sweep status` draw it from the store
// alone.
struct LadderShape {
  std::string metric;
  bool maximize = false;
  int64_t reduction_factor = 3;
  std::vector<int64_t> rungs;  // the rungs' steps, ascending; the last is the members' end
  // rung_cooldown: every rung below the last is scored by a cooldown probe, so a member there
  // without one (stopped during it) has not reached it yet (migration 17; false before it).
  bool cooled = false;
};
// The shape recorded for `sweep`, or none (not an asha sweep, or a store from before ladders).
std::optional<LadderShape> find_ladder_shape(Connection& db, const std::string& sweep);

// A decision: run `member` to step `until` (0: to its end); `action` (start, promote, resume)
// and `reason` are recorded in sweep_decisions.
struct SweepDecision {
  std::string member;
  int64_t until = 0;
  std::string action;
  std::string reason;
};

class SweepClaims {
 public:
  // `worker`: this process's name in the claims (host:pid); `timeout`: how old a claim's heartbeat
  // may be before its worker counts as gone.
  SweepClaims(RunStore& store, std::string sweep, std::string worker, std::chrono::seconds timeout);

  // One transaction: drops the claims gone stale, calls `decide` with the members that the
  // other workers' live claims hold, and records its decision's claim and line. The decision,
  // or none (nothing recorded).
  using Decide =
      std::function<std::optional<SweepDecision>(const std::set<std::string>& held_elsewhere)>;
  std::optional<SweepDecision> claim_next(const Decide& decide);
  // Another worker holds a live claim: a member it runs may still bring a promotion.
  bool others_working();
  // This worker's claims, alive now; at most once per timeout / 4 unless `now_anyway`.
  void heartbeat(bool now_anyway = false);
  void release(const std::string& member);

  // Records the sweep's ladder shape (in place of an earlier one).
  void record_ladder_shape(const LadderShape& shape);
  // `work` in one write transaction (committed unless it throws): for proposals.
  void in_transaction(const std::function<void()>& work);
  // A tpe search's proposals from trial `from` on, each its values (one per [space] key); and a
  // new one, recorded in the transaction of the decision that makes it.
  std::vector<std::vector<std::string>> proposals(int64_t from);
  void record_proposal(int64_t trial, const std::vector<std::string>& values);

  // The decisions recorded, oldest first.
  std::vector<SweepDecision> decisions();
  // The live claims, with their workers (in `reason`).
  std::vector<SweepDecision> held();

 private:
  int64_t now() const;
  void drop_dead_local_claims();

  RunStore& store_;
  std::string sweep_, worker_;
  std::chrono::seconds timeout_;
  std::chrono::steady_clock::time_point last_heartbeat_{};
};

// This process's worker name: host:pid.
std::string worker_name();
// KILN_SWEEP_CLAIM_TIMEOUT (seconds), else 120: how long a killed worker's claim blocks its member.
std::chrono::seconds claim_timeout();

}  // namespace kiln
