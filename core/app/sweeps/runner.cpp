#include "core/app/sweeps/runner.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/app/sweeps/asha_search.h"
#include "core/app/sweeps/check.h"
#include "core/app/sweeps/member.h"
#include "core/app/sweeps/member_jobs.h"
#include "core/app/sweeps/member_threads.h"
#include "core/app/sweeps/tpe_trials.h"
#include "core/config/canonical.h"
#include "core/config/config.h"
#include "core/config/options.h"
#include "core/store/history/queries.h"
#include "core/store/runs/writer.h"
#include "core/util/core_share.h"
#include "core/util/process.h"
#include "core/util/stop_signal.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// The sweep being run here: its members' launch, and how many run at once.
struct SweepRun {
  const SweepSpec& spec;
  MemberLaunch launch;
  int jobs = 1;
};

// "train.steps 15 -> 25" for each key whose value differs between a stored run's config and a
// member's (differing_keys, as `kiln runs compare` finds them), less where the run is kept
// (run.out_dir, run.db, run.sweep), which says nothing of what it trains.
std::vector<std::string> changed_keys(const RunRecord& stored, const ResolvedConfig& member) {
  std::vector<std::string> changed;
  for (const auto& [key, values] : differing_keys({flatten_config(stored.config), member.flat()})) {
    if (key == "run.out_dir" || key == "run.db" || key == "run.sweep") continue;
    changed.push_back(fmt::format("{} {} -> {}", key, values[0], values[1]));
  }
  return changed;
}

// The members to run, in order, a line for each one skipped; `members` itself as the sweep now
// names them (a changed member rerun under a new name gets it here). A member whose run in the
// store has none of the member's config hashes was made from another sweep file: matched by
// name alone, it would have been skipped as completed or resumed on the old config.
std::vector<const SweepMember*> members_to_run(const MemberLaunch& launch,
                                               std::vector<SweepMember>& members,
                                               SweepOptions::Changed on_changed,
                                               const std::function<void(const std::string&)>& print,
                                               TpeTrials* tpe = nullptr) {
  RunStore store(launch.db);
  std::vector<std::string> refusals;
  for (auto& m : members) {
    auto existing = store.find_run(m.name);
    if (!existing) continue;
    const ResolvedConfig config = member_config(launch, m);
    const std::vector<std::string> hashes = run_config_hashes(store.connection(), *existing);
    if (std::find(hashes.begin(), hashes.end(), config.hash()) != hashes.end()) continue;
    const std::string changes = join(changed_keys(*existing, config), ", ");
    if (on_changed == SweepOptions::Changed::kRefuse) {
      refusals.push_back(fmt::format("'{}' ({})", m.name, changes));
    } else if (on_changed == SweepOptions::Changed::kRerun) {
      std::string renamed;
      for (int version = 2; renamed.empty() || store.find_run(renamed); ++version)
        renamed = fmt::format("{}:v{}", m.name, version);
      print(fmt::format("rerun {} as {} ({})", m.name, renamed, changes));
      if (tpe) tpe->rename(m.name, renamed);  // its score is the new run's
      m.name = renamed;
    } else {
      print(fmt::format("keep {} as it ran ({} now differ)", m.name, changes));
      m.name.clear();  // kept as it ran: neither run nor counted as this sweep's member
    }
  }
  members.erase(std::remove_if(members.begin(), members.end(),
                               [](const SweepMember& m) { return m.name.empty(); }),
                members.end());
  if (!refusals.empty()) {
    throw UserError(fmt::format(
        "{} of the sweep's members ran before with another config: {}: pass --rerun-changed to "
        "train them again as new runs (NAME:v2, ...), or --keep-old to keep what they ran",
        refusals.size(), join(refusals, "; ")));
  }
  std::vector<const SweepMember*> queue;
  for (const auto& m : members) {
    auto existing = store.find_run(m.name);
    if (existing && existing->status == "completed") {
      print(fmt::format("skip {} (completed)", m.name));
    } else {
      queue.push_back(&m);
    }
  }
  return queue;
}

// The members that did not complete (and that the search did not stop: `stopped`, for an asha
// search's), as the store has them.
int count_incomplete(const SweepRun& sweep, const std::vector<SweepMember>& members,
                     const std::function<bool(const std::string&)>& stopped) {
  HistoryDb history(sweep.launch.db);
  std::set<std::string> completed;
  for (const auto& r : list_runs(history, ListQuery{"sweep = " + single_quoted(sweep.spec.name)}))
    if (r.status == "completed") completed.insert(r.name);
  int incomplete = 0;
  for (const auto& m : members)
    incomplete += !completed.count(m.name) && !(stopped && stopped(m.name));
  return incomplete;
}

// The hooks of a sweep whose members run in the queue's order: each job is the first member of
// `queue` that no worker holds, that this worker has not started, and whose run no other worker
// has moved on since this one read the store; `more` extends the queue when it is used up (a tpe
// search's next trial), or gives nothing.
JobHooks queue_hooks(SweepClaims& claims, RunStore& store, std::vector<const SweepMember*>& queue,
                     std::function<std::vector<const SweepMember*>()> more) {
  // The status of each member's run as this worker first saw it ("" for none yet).
  auto seen = std::make_shared<std::map<std::string, std::string>>();
  auto started = std::make_shared<std::set<std::string>>();
  auto status_of = [&store](const std::string& name) {
    const std::optional<RunRecord> run = store.find_run(name);
    return run ? run->status : std::string();
  };
  JobHooks hooks;
  hooks.next = [&claims, &queue, more, seen, started,
                status_of](const std::vector<const SweepMember*>&) -> std::optional<MemberJob> {
    for (;;) {
      for (const SweepMember* m : queue) {
        if (!seen->count(m->name)) seen->emplace(m->name, status_of(m->name));
      }
      const SweepMember* chosen = nullptr;
      claims.claim_next([&](const std::set<std::string>& elsewhere)
                            -> std::optional<SweepDecision> {
        for (const SweepMember* m : queue) {
          if (started->count(m->name) || elsewhere.count(m->name)) continue;
          if (status_of(m->name) != seen->at(m->name)) continue;  // another worker ran it
          chosen = m;
          return SweepDecision{m->name, 0, "start", "the first member of the queue no one holds"};
        }
        return std::nullopt;
      });
      if (chosen) {
        started->insert(chosen->name);
        return MemberJob{chosen, 0};
      }
      const std::vector<const SweepMember*> added = more();
      if (added.empty()) return std::nullopt;
      queue.insert(queue.end(), added.begin(), added.end());
    }
  };
  hooks.ended = [&claims](const SweepMember& m) { claims.release(m.name); };
  hooks.tick = [&claims] { claims.heartbeat(); };
  hooks.others_working = [&claims] { return claims.others_working(); };
  return hooks;
}

}  // namespace

SweepOutcome run_sweep(const SweepSpec& spec, const SweepOptions& options,
                       const std::function<void(const std::string&)>& print) {
  std::vector<SweepMember> members = expand_sweep(spec);
  const std::vector<MemberCheck> checks = check_members(spec, members);
  for (const MemberCheck& check : checks) {
    for (const std::string& note : check.notes)
      print(fmt::format("sweep member '{}': {}", check.name, note));
  }
  if (options.dry_run) {
    print(fmt::format("sweep '{}': {} members, each assembled without training; nothing run",
                      spec.name, members.size()));
    print(members_table(spec, checks));
    if (spec.search.tpe() && spec.search.trials > spec.search.startup) {
      print(fmt::format("and {} trials more, which TPE proposes as the ones before them end",
                        spec.search.trials - spec.search.startup));
    }
    if (spec.search.type == SweepSearch::Type::kAsha) {
      print(fmt::format("asha: rungs at steps {}; the best 1/{} of each rung go on",
                        fmt::join(asha_rungs(spec), ", "), spec.search.reduction_factor));
    }
    return {};
  }
  const RunOptions base = run_options(load_config(spec.base, spec.fixed));
  const int jobs = std::max(1, options.jobs);
  const int threads = std::max(1, usable_cpus() / jobs);
  std::vector<std::string> extra = {"run.sweep=" + format_value(spec.name)};
  if (!options.db.empty()) extra.push_back("run.db=" + format_value(options.db));
  MemberLaunch launch;
  launch.base = spec.base;
  launch.db = options.db.empty() ? base.db : options.db;
  launch.extra = extra;
  if (jobs > 1) launch.threads = threads;
  if (options.threads > 0) launch.threads = options.threads;
  const SweepRun sweep{spec, launch, jobs};

  // A tpe search proposes its later trials when the queue is done, one per free worker; an asha
  // search's ladder decides each job (its members are checked against the store all the same).
  std::optional<TpeTrials> tpe;
  if (spec.search.type == SweepSearch::Type::kTpe) tpe.emplace(spec, launch.db);
  std::optional<AshaSearch> asha;
  const auto admit = [&](std::vector<SweepMember>& trial, TpeTrials* proposer) {
    return members_to_run(sweep.launch, trial, options.changed, print, proposer);
  };
  if (spec.search.type == SweepSearch::Type::kAsha) asha.emplace(spec, launch.db, members, admit);
  std::vector<const SweepMember*> queue = admit(members, tpe    ? &*tpe
                                                         : asha ? asha->tpe()
                                                                : nullptr);
  if (asha) asha->set_members(members);  // those kept as they ran (--keep-old) are gone
  {
    // --sort orders the summary at the end: a key it cannot sort by is reported now, not after
    // every member has run.
    HistoryDb history(sweep.launch.db);
    list_runs(history, ListQuery{"", options.sort, 1, declared_task_metrics(spec.search)});
  }
  // An asha search runs what its ladder decides: a member paused at a rung is not one to run.
  const std::string standing =
      asha ? asha->standing()
           : fmt::format("{} completed, {} to run", members.size() - queue.size(), queue.size());
  print(fmt::format(
      "sweep '{}': {} members, {}, {} at a time ({}); logs in "
      "{}/<member>@<id>/console.log{}",
      spec.name, members.size(), standing, jobs, member_threads_text(launch, members), base.out_dir,
      asha ? fmt::format("\nasha: rungs at steps {}; the best 1/{} of each rung go on",
                         fmt::join(asha->rungs(), ", "), spec.search.reduction_factor)
           : ""));
  std::list<std::vector<SweepMember>> proposed;  // stable: the queue points into them
  // Every job is claimed in the store before it starts, so that two `kiln sweep` processes of
  // one sweep share its members (an asha search's ladder decides which; otherwise the queue's
  // order), and neither runs a member the other holds or has finished.
  RunStore store(launch.db);
  SweepClaims claims(store, spec.name, worker_name(), claim_timeout());
  JobHooks hooks;
  if (asha) {
    claims.record_ladder_shape(asha->shape());  // for `kiln serve` and `kiln sweep status`
    hooks = asha->hooks(claims, print);
  } else {
    hooks = queue_hooks(claims, store, queue, [&]() -> std::vector<const SweepMember*> {
      // A proposal whose members all ran before (a rerun) adds nothing: the next one is asked.
      while (tpe && tpe->left() > 0) {
        proposed.push_back(tpe->next());
        std::vector<const SweepMember*> added = admit(proposed.back(), &*tpe);
        if (!added.empty()) return added;
      }
      return {};
    });
  }
  const size_t per_trial =
      members.size() /
      static_cast<size_t>(std::max<int64_t>(1, std::min(spec.search.trials, spec.search.startup)));
  const size_t total =
      asha ? 0 : queue.size() + (tpe ? static_cast<size_t>(tpe->left()) * per_trial : 0);
  const bool interrupted = run_jobs(launch, jobs, hooks, total, print);
  if (!asha) {
    for (const auto& trial : proposed)
      members.insert(members.end(), trial.begin(), trial.end());
    return {count_incomplete(sweep, members, nullptr), interrupted, launch.db, std::nullopt};
  }
  std::vector<SweepMember> started;
  for (const SweepMember* m : asha->members())
    started.push_back(*m);
  const std::set<std::string> stopped =
      interrupted ? std::set<std::string>{} : asha->stopped_members();
  const auto was_stopped = [&](const std::string& name) { return stopped.count(name) > 0; };
  return {count_incomplete(sweep, started, was_stopped), interrupted, launch.db, asha->shape()};
}

}  // namespace kiln
