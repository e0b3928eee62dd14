#include "core/app/sweeps/asha_search.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "core/store/history/queries.h"
#include "core/store/history/reader.h"
#include "core/store/history/rung_ladder.h"
#include "core/store/history/selection.h"
#include "core/util/fault.h"
#include "core/util/text.h"

namespace kiln {

namespace {

std::string ordinal(size_t n) {
  const char* suffix = n % 100 / 10 == 1 ? "th"
                       : n % 10 == 1     ? "st"
                       : n % 10 == 2     ? "nd"
                       : n % 10 == 3     ? "rd"
                                         : "th";
  return fmt::format("{}{}", n, suffix);
}

}  // namespace

AshaSearch::AshaSearch(const SweepSpec& spec, std::string db,
                       const std::vector<SweepMember>& members, Admit admit)
    : spec_(spec), db_(std::move(db)), rungs_(asha_rungs(spec)), admit_(std::move(admit)) {
  set_members(members);
  if (spec.search.tpe()) {
    // A trial's score for TPE: the rungs its members reached, then their values at the highest
    // one (so a trial that went further ranks above one stopped earlier); none while one of its
    // members is on its way to a rung.
    tpe_.emplace(spec, db_, [this](const std::string& name) -> std::optional<double> {
      const auto it = scores_.find(name);
      return it == scores_.end() ? std::nullopt : it->second;
    });
  }
}

void AshaSearch::set_members(const std::vector<SweepMember>& members) {
  members_.clear();
  for (const auto& m : members)
    members_.push_back(&m);
}

LadderShape AshaSearch::shape() const {
  return {spec_.search.metric, spec_.search.maximize, spec_.search.reduction_factor, rungs_,
          spec_.search.rung_cooldown > 0};
}

AshaSearch::State AshaSearch::state_of(HistoryDb& db, const RunRecord* run) const {
  State s;
  if (!run) return s;
  s.status = run->status;
  s.steps = run->steps;
  for (double y : rung_values(db, *run, shape()))
    s.ladder.results.push_back(!std::isfinite(y) ? INFINITY : spec_.search.maximize ? -y : y);
  s.ladder.failed = s.status == "failed";
  const size_t reached = s.ladder.results.size();
  const bool at_rung = reached > 0 && s.steps == rungs_[reached - 1];
  s.between = (s.status == "interrupted" || s.status == "running") && !at_rung;
  s.ladder.busy = s.between;
  return s;
}

std::vector<AshaSearch::State> AshaSearch::read(const std::set<std::string>& running) {
  HistoryDb db(db_);
  std::map<std::string, RunRecord> runs;
  for (auto& r : list_runs(db, {"sweep = " + single_quoted(spec_.name), "id", 0}))
    runs.emplace(r.name, std::move(r));
  std::vector<State> states;
  scores_.clear();
  for (const SweepMember* m : members_) {
    const auto run = runs.find(m->name);
    State s = state_of(db, run == runs.end() ? nullptr : &run->second);
    s.running = running.count(m->name) > 0;
    s.ladder.busy = s.ladder.busy || s.running;
    if (!s.ladder.busy && !s.status.empty()) {
      const auto& results = s.ladder.results;
      const double rung_weight = 1e9;  // far above any metric's range: rungs rank first
      scores_[m->name] = results.empty()
                             ? INFINITY
                             : results.back() - rung_weight * static_cast<double>(results.size());
    }
    states.push_back(std::move(s));
  }
  return states;
}

const SweepMember* AshaSearch::member(const std::string& name) const {
  for (const SweepMember* m : members_)
    if (m->name == name) return m;
  return nullptr;
}

void AshaSearch::add_trial(std::vector<SweepMember> trial) {
  proposed_.push_back(std::move(trial));
  admit_(proposed_.back(), &*tpe_);
  for (const auto& m : proposed_.back())
    members_.push_back(&m);
}

bool AshaSearch::propose(SweepClaims& claims) {
  if (!tpe_) return false;
  read({});  // the scores TPE proposes from
  std::vector<std::vector<SweepMember>> made;
  claims.in_transaction([&] {
    for (auto& values : claims.proposals(tpe_->made()))
      made.push_back(tpe_->adopt(std::move(values)));
    if (!made.empty() || tpe_->left() <= 0) return;  // another worker's trials go first
    made.push_back(tpe_->next());
    claims.record_proposal(tpe_->made() - 1, tpe_->values(tpe_->made() - 1));
  });
  for (auto& trial : made)
    add_trial(std::move(trial));
  return !made.empty();
}

void AshaSearch::adopt_recorded(SweepClaims& claims) {
  if (!tpe_) return;
  for (auto& values : claims.proposals(tpe_->made()))
    add_trial(tpe_->adopt(std::move(values)));
}

std::optional<SweepDecision> AshaSearch::decide(const std::set<std::string>& running) {
  const std::vector<State> states = read(running);
  for (size_t i = 0; i < states.size(); ++i) {
    if (states[i].between && !states[i].running) {
      const size_t rung = states[i].ladder.results.size();
      const std::string why =
          spec_.search.rung_cooldown > 0 && states[i].steps == rungs_[rung]
              ? fmt::format(
                    "stopped in its cooldown probe at step {}: the probe is taken again "
                    "from the step-{} snapshot",
                    rungs_[rung], rungs_[rung])
              : fmt::format("stopped at step {}, between rungs: resumed to step {}",
                            states[i].steps, rungs_[rung]);
      return SweepDecision{members_[i]->name, until(rung), "resume", why};
    }
  }
  std::vector<AshaMember> ladder;
  for (const auto& s : states)
    ladder.push_back(s.ladder);
  if (auto p = asha_promotion(ladder, rungs_.size(), spec_.search.reduction_factor)) {
    const size_t from = p->rung - 1;
    const AshaPlace place = asha_place(ladder, p->member, from);
    return SweepDecision{
        members_[p->member]->name, until(p->rung), "promote",
        fmt::format(
            "{} {:.4f} at step {} is {} of {} (the best {} go on): to step {}", spec_.search.metric,
            spec_.search.maximize ? -ladder[p->member].results[from]
                                  : ladder[p->member].results[from],
            rungs_[from], ordinal(place.place), place.of,
            place.of / static_cast<size_t>(spec_.search.reduction_factor), rungs_[p->rung])};
  }
  for (size_t i = 0; i < states.size(); ++i) {
    if (states[i].status.empty() && !states[i].running) {
      return SweepDecision{members_[i]->name, until(0), "start",
                           fmt::format("a new trial: to step {}", rungs_[0])};
    }
  }
  if (!running.empty() || (tpe_ && tpe_->left() > 0)) return std::nullopt;
  if (auto p = asha_closing_promotion(ladder, rungs_.size())) {
    return SweepDecision{members_[p->member]->name, until(p->rung), "promote",
                         fmt::format("no trial is left, and it is the best at step {}, the "
                                     "furthest any member reached: to step {}",
                                     rungs_[p->rung - 1], rungs_[p->rung])};
  }
  return std::nullopt;
}

JobHooks AshaSearch::hooks(SweepClaims& claims,
                           const std::function<void(const std::string&)>& print) {
  JobHooks hooks;
  hooks.next = [this, &claims, print](const std::vector<const SweepMember*>& here) {
    for (;;) {
      // The whole ladder: the trials other workers proposed (or this sweep before a restart)
      // count in every rank, not only when nothing else is left to do. Adopted before the
      // decision's transaction: adopting checks each trial against the store through a
      // connection of its own, which would wait on that transaction's lock.
      adopt_recorded(claims);
      const std::optional<SweepDecision> decision =
          claims.claim_next([&](const std::set<std::string>& elsewhere) {
            std::set<std::string> running = elsewhere;
            for (const SweepMember* m : here)
              running.insert(m->name);
            return decide(running);
          });
      if (decision) {
        if (decision->action == "promote") fault_point("sweep.promotion_claimed");
        if (decision->action != "start") {
          print(fmt::format("{} {}: {}", decision->action, decision->member, decision->reason));
        }
        return std::optional<MemberJob>(
            MemberJob{member(decision->member), decision->until,
                      decision->until > 0 ? rung_cooldown_steps(spec_, decision->until) : 0});
      }
      if (!propose(claims)) return std::optional<MemberJob>();
    }
  };
  hooks.ended = [&claims](const SweepMember& m) { claims.release(m.name); };
  hooks.tick = [&claims] { claims.heartbeat(); };
  hooks.others_working = [&claims] { return claims.others_working(); };
  return hooks;
}

std::set<std::string> AshaSearch::stopped_members() {
  const std::vector<State> states = read({});
  std::set<std::string> stopped;
  for (size_t i = 0; i < members_.size(); ++i) {
    const State& s = states[i];
    if (s.status == "interrupted" && !s.between && s.ladder.results.size() < rungs_.size())
      stopped.insert(members_[i]->name);
  }
  return stopped;
}

std::string AshaSearch::standing() {
  size_t completed = 0, paused = 0, failed = 0;
  for (const State& s : read({})) {
    completed += s.status == "completed";
    failed += s.status == "failed";
    paused += (s.status == "interrupted" || s.status == "running") && !s.between;
  }
  return fmt::format("{} completed, {} paused at a rung, {} to run{}", completed, paused,
                     members_.size() - completed - paused - failed,
                     failed > 0 ? fmt::format(", {} failed", failed) : "");
}

SearchNow search_now(const SweepSpec& spec, const std::string& db) {
  const std::vector<SweepMember> members = expand_sweep(spec);
  const auto as_listed = [](std::vector<SweepMember>& trial, TpeTrials*) {
    std::vector<const SweepMember*> listed;
    for (const auto& m : trial)
      listed.push_back(&m);
    return listed;
  };
  AshaSearch search(spec, db, members, as_listed);
  RunStore store(db);
  SweepClaims claims(store, spec.name, worker_name(), claim_timeout());
  search.adopt_recorded(claims);
  return {search.shape(), claims.held()};
}

}  // namespace kiln
