// An asha sweep as it runs (core/app/sweeps/asha.h): the ladder read from the run store each time
// a worker is free, and the job that worker does next. Nothing of the ladder is kept anywhere
// else: a member's rung results are its run's values of the search's metric at the rungs' steps,
// and its state its run's (running, paused at a rung = interrupted there with a value, stopped
// between rungs, completed, failed). With rung_cooldown a rung's value is its probe's, so a member
// stopped during its probe is between rungs too, and its resume takes the probe from the rung's
// snapshot (`kiln resume --until S`, S its snapshot's step). So a sweep stopped or killed at any
// point, and run again, goes on with the same ladder: members stopped between rungs are resumed
// to their rung first, then promotions and new trials follow as if the sweep had not stopped.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/app/sweeps/asha.h"
#include "core/app/sweeps/member.h"
#include "core/app/sweeps/member_jobs.h"
#include "core/app/sweeps/spec.h"
#include "core/app/sweeps/tpe_trials.h"
#include "core/store/runs/sweep_claims.h"

namespace kiln {

struct RunRecord;

class AshaSearch {
 public:
  // `members`: those known before the sweep runs (every trial with the random sampler, the
  // startup trials with tpe), started in this order. `admit`: checks a trial TPE proposed against
  // the store as the sweep's own members were (it may rename them), before any of them starts.
  using Admit =
      std::function<std::vector<const SweepMember*>(std::vector<SweepMember>&, TpeTrials*)>;
  AshaSearch(const SweepSpec& spec, std::string db, const std::vector<SweepMember>& members,
             Admit admit);
  // The members known before the sweep runs, once `admit` checked them (and dropped those kept
  // as they ran).
  void set_members(const std::vector<SweepMember>& members);
  // The TPE proposer of a search with sampler = "tpe", for `admit`'s renames; null otherwise.
  TpeTrials* tpe() { return tpe_ ? &*tpe_ : nullptr; }

  // What a free worker does next, given the members running anywhere (this worker's, and those
  // other workers' claims hold: core/store/runs/sweep_claims.h): resume a member stopped between
  // rungs, promote the best paused member that qualifies, or start the first member not started
  // yet; with no trial left and nothing running, the closing promotion (asha_closing_promotion).
  // None when nothing can start now; `propose` may then make more trials.
  std::optional<SweepDecision> decide(const std::set<std::string>& running);
  // A tpe sampler's next trial, in one transaction of `claims`: first the trials other workers
  // proposed since, then TPE's proposal, recorded there; each checked with `admit`. False when no
  // trial is left to propose (or the sampler is random).
  bool propose(SweepClaims& claims);
  // The hooks that run the search's jobs (core/app/sweeps/member_jobs.h) as one of its workers:
  // each job decided and claimed in one transaction of `claims` (a tpe sampler's proposals made
  // when nothing else can start), its claim kept alive while it runs and dropped when it ends,
  // and a worker with nothing to do waits while other workers' members run. Promotions and
  // resumes are printed with their reasons.
  JobHooks hooks(SweepClaims& claims, const std::function<void(const std::string&)>& print);
  // The trials a tpe sampler proposed in other processes (or before a restart), from the store,
  // as propose() adopts them: before every decision, so that the ladder it reads is whole.
  void adopt_recorded(SweepClaims& claims);
  // The member of that name, among those made so far; null when none.
  const SweepMember* member(const std::string& name) const;
  // Members paused at a rung below the top: with the search over, ASHA stopped them.
  std::set<std::string> stopped_members();
  // Where the members stand, for the line the sweep starts with: "1 completed, 5 paused at a
  // rung, 0 to run" (to run: not started, or stopped between rungs), and how many failed.
  std::string standing();
  // Every member started so far, or known before the sweep ran, in the order they start.
  const std::vector<const SweepMember*>& members() const { return members_; }
  const std::vector<int64_t>& rungs() const { return rungs_; }
  // What the ladder is read by: the metric, its mode, reduction_factor and the rungs.
  LadderShape shape() const;

 private:
  struct State {
    AshaMember ladder;
    std::string status;    // the run's, "" without a run
    int64_t steps = 0;     // the run's steps done
    bool running = false;  // its process runs now
    bool between = false;  // stopped between rungs: resumed to its next rung first
  };
  // Each member's state, as the store says, with `running` busy.
  std::vector<State> read(const std::set<std::string>& running);
  State state_of(HistoryDb& db, const RunRecord* run) const;
  // The rung's step a job to rung `rung` stops at: 0 for the last (the run's own end).
  int64_t until(size_t rung) const { return rung + 1 < rungs_.size() ? rungs_[rung] : 0; }
  // The members of a trial TPE proposed (here or elsewhere), once `admit` checked them.
  void add_trial(std::vector<SweepMember> trial);

  const SweepSpec& spec_;
  std::string db_;
  std::vector<int64_t> rungs_;
  std::vector<const SweepMember*> members_;
  std::optional<TpeTrials> tpe_;
  std::list<std::vector<SweepMember>> proposed_;  // stable: members_ points into them
  Admit admit_;
  std::map<std::string, std::optional<double>> scores_;  // TPE's score of each ended member
};

// An asha sweep as `kiln sweep status` shows it (core/app/presentation/sweep_summary.h): the shape
// its ladder is read by, and the members running, each with its worker and the step it runs to
// (the trials a tpe sampler proposed elsewhere adopted first).
struct SearchNow {
  LadderShape ladder;
  std::vector<SweepDecision> running;
};
SearchNow search_now(const SweepSpec& spec, const std::string& db);

}  // namespace kiln
