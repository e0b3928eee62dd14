// Asynchronous successive halving (ASHA: Li, Jamieson, Rostamizadeh, Gonina, Ben-tzur, Hardt,
// Recht and Talwalkar, "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020): every
// trial trains to the first rung, and at each rung the best 1/η of the members that reached it go
// on to the next one, the others stay paused there. It is asynchronous: whenever a worker is free
// it promotes the best paused member that is in the top 1/η of its rung so far (the highest rung
// first), and otherwise starts a new trial; no worker waits for a rung to fill. A paused member
// may still be promoted later, when enough members below it reach its rung.
// Here a rung is a step of the member's one run, whose schedule is planned over the last rung's
// steps: a member pauses there (`kiln run|resume --until`, core/train/session.h), evaluated and
// snapshotted, and a promotion resumes it bit for bit. This file is the pure part: the rungs, and
// which member to promote; core/app/sweeps/asha_search.h reads the members' state from the store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace kiln {

struct SweepSpec;

// The steps a member of an asha sweep pauses at, ascending, and last its train.steps (the
// search's max_steps, or the base experiment's): min_steps * reduction_factor^k below it, less
// those below `grace`. A UserError naming the [search] key for min_steps above max_steps, or a
// max_steps that [set] or another part of the file contradicts.
std::vector<int64_t> asha_rungs(const SweepSpec& spec);

// With rung_cooldown = F: the cooldown branch that scores a member at rung step S, max(1, F x S)
// steps (core/train/cooldown_probe.h); 0 without.
int64_t rung_cooldown_steps(const SweepSpec& spec, int64_t rung_step);
// rung_cooldown's conditions, a UserError naming the [search] key and the fix for each: an asha
// search, scored by val_loss, whose schedule has a stable phase (core/api/schedule.h's
// ScheduleCooldown: a cosine or linear one decays from the start, and no branch of it scores what
// a shorter run would), with every rung below the last after its warmup and at or before its
// decay's start, as the schedule answers them for the longest warmup and the earliest decay
// [space] can draw. Asked of the spec alone, before any member runs. Nothing without
// rung_cooldown.
void check_rung_cooldown(const SweepSpec& spec);

// A member as the ladder sees it.
struct AshaMember {
  std::vector<double> results;  // its score at each rung it reached, in order; lower is better
  bool busy = false;    // running, or stopped between rungs: on its way to rung results.size()
  bool failed = false;  // failed: it is never promoted (its results still rank the others)
};

struct AshaPromotion {
  size_t member = 0;  // an index into the members
  size_t rung = 0;    // the rung it goes on to
};

// Li et al.'s get_job: from the rung below the top down, the best member of the top
// floor(n / reduction_factor) of the n members with a result at that rung, that is neither
// promoted already (a result at a higher rung, or busy) nor failed; ties by index. None: start a
// new trial (or wait for the busy ones).
std::optional<AshaPromotion> asha_promotion(const std::vector<AshaMember>& members, size_t rungs,
                                            int64_t reduction_factor);

// The search's end, when no trial is left to start and no member runs: with no member at the
// last rung yet (too few trials for any rung's top 1/η to reach it), the best member of the
// highest rung reached that can go on, so that a sweep always trains its best trial to the end;
// none once one is there.
std::optional<AshaPromotion> asha_closing_promotion(const std::vector<AshaMember>& members,
                                                    size_t rungs);

// Where a member with these results stands at rung `rung`: its place among the members with a
// result there (1 = best), and how many they are.
struct AshaPlace {
  size_t place = 0;
  size_t of = 0;
};
AshaPlace asha_place(const std::vector<AshaMember>& members, size_t member, size_t rung);

}  // namespace kiln
