// A tpe search's trials (core/app/sweeps/tpe.h) as the sweep runs them: the startup trials that
// expand_sweep drew, then one proposed each time a worker is free, from the scores the run store
// holds for the trials before it. A trial's score is the mean over its members (its seeds,
// variants and grid points) of the best value of the search's metric in each member's run (the
// lowest, or the highest with mode = "max"); a member that failed, or completed without a value,
// counts as the worst; a trial with a member not yet ended is not used. With --jobs 1 every
// earlier trial has ended when a trial is proposed, so a sweep run again proposes the same trials
// and resumes or skips them; with more jobs, a proposal sees the trials that ended by then, as in
// any asynchronous search.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/app/sweeps/spec.h"
#include "core/app/sweeps/tpe.h"

namespace kiln {

class HistoryDb;

class TpeTrials {
 public:
  // A member's score (lower better), or none while it has not ended: an asha search's
  // (core/app/sweeps/asha_search.h), which changes as members are promoted.
  using MemberScore = std::function<std::optional<double>(const std::string& name)>;

  // `member_score`: null for a trial's score as above, read once it ended and kept.
  TpeTrials(const SweepSpec& spec, std::string db, MemberScore member_score = nullptr);
  // The members of the next trial, TPE's proposal; none once `trials` are made.
  std::vector<SweepMember> next();
  // The members of a trial another worker proposed (its values, in [space] order): the next
  // trial here too, so that every worker proposes from, and names, the same trials.
  std::vector<SweepMember> adopt(std::vector<std::string> values);
  // The trials made so far, startup ones included, and trial `trial`'s values.
  int64_t made() const { return static_cast<int64_t>(values_.size()); }
  const std::vector<std::string>& values(int64_t trial) const {
    return values_[static_cast<size_t>(trial)];
  }
  // A member run again under a new name (--rerun-changed): its score is read from that run.
  void rename(const std::string& from, const std::string& to);
  // Trials still to propose.
  int64_t left() const { return spec_.search.trials - static_cast<int64_t>(values_.size()); }

 private:
  // The trials made so far that have ended, with their scores (lower better).
  std::vector<TpeTrial> finished();
  // Trial `trial`'s score, once every member's run has ended; none before.
  std::optional<double> score(HistoryDb& db, size_t trial) const;

  const SweepSpec& spec_;
  std::string db_;
  std::vector<std::vector<std::string>> values_;  // each trial's values, in [space] order
  std::vector<std::vector<std::string>> names_;   // each trial's members
  std::vector<std::optional<double>> scores_;     // each ended trial's, read once
  MemberScore member_score_;
};

}  // namespace kiln
