#include "core/app/sweeps/asha.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>

#include <fmt/format.h>

#include "core/app/sweeps/spec.h"
#include "core/config/config.h"
#include "core/config/options.h"
#include "core/util/error.h"

namespace kiln {

namespace {

// The members with a result at `rung`, best first (ties by index).
std::vector<size_t> ranked_at(const std::vector<AshaMember>& members, size_t rung) {
  std::vector<size_t> at;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].results.size() > rung) at.push_back(i);
  std::stable_sort(at.begin(), at.end(), [&](size_t a, size_t b) {
    return members[a].results[rung] < members[b].results[rung];
  });
  return at;
}

// The largest value of a schedule key any member can have: the top of its [space] distribution
// (where that is), or the base's value.
struct SpaceTop {
  double value = 0;
  std::string where;  // the [space] key's file:line:col; empty: the base's value
};

SpaceTop space_top(const SweepSpec& spec, const std::string& key, double base_value) {
  for (const SweepDistribution& d : spec.space) {
    if (d.key != key) continue;
    if (d.kind != SweepDistribution::Kind::kChoice) return {d.high, d.where};
    SpaceTop top{-INFINITY, d.where};
    for (const std::string& choice : d.choices)
      top.value = std::max(top.value, std::strtod(choice.c_str(), nullptr));
    return top;
  }
  return {base_value, ""};
}

}  // namespace

std::vector<int64_t> asha_rungs(const SweepSpec& spec) {
  const SweepSearch& search = spec.search;
  const int64_t last = search.max_steps > 0
                           ? search.max_steps
                           : train_options(load_config(spec.base, spec.fixed)).steps;
  if (search.min_steps < 1 || search.min_steps >= last) {
    throw UserError(fmt::format(
        "{}: asha's min_steps = {} must be at least 1 and below {} = {}, the steps every "
        "member is planned to train: the first rung is where the worst trials stop",
        search.min_steps_where.empty() ? search.where : search.min_steps_where, search.min_steps,
        search.max_steps > 0 ? "max_steps" : "the base experiment's train.steps", last));
  }
  std::vector<int64_t> rungs;
  for (int64_t step = search.min_steps; step < last; step *= search.reduction_factor) {
    if (step >= search.grace) rungs.push_back(step);
  }
  rungs.push_back(last);
  return rungs;
}

int64_t rung_cooldown_steps(const SweepSpec& spec, int64_t rung_step) {
  const double fraction = spec.search.rung_cooldown;
  if (fraction <= 0) return 0;
  return std::max<int64_t>(1, std::llround(fraction * static_cast<double>(rung_step)));
}

void check_rung_cooldown(const SweepSpec& spec) {
  const SweepSearch& search = spec.search;
  if (search.rung_cooldown <= 0) return;
  const std::string& at = search.rung_cooldown_where;
  if (search.type != SweepSearch::Type::kAsha) {
    throw UserError(fmt::format(
        "{}: rung_cooldown scores an asha search's rungs: set [search] type = \"asha\", or "
        "leave rung_cooldown out",
        at));
  }
  if (search.metric != "val_loss") {
    throw UserError(fmt::format(
        "{}: rung_cooldown scores a rung by the val loss of its cooldown branch, and metric is "
        "'{}': set metric = \"val_loss\"",
        at, search.metric));
  }
  const ResolvedConfig base = load_config(spec.base, spec.fixed);
  const std::string* varied_type = nullptr;
  for (const SweepDistribution& d : spec.space) {
    if (d.key != "schedule.type") continue;
    for (const std::string& choice : d.choices)
      if (choice != "\"wsd\"") varied_type = &choice;
  }
  if (base.type("schedule") != "wsd" || varied_type) {
    throw UserError(fmt::format(
        "{}: rung_cooldown branches a wsd schedule's stable phase, and {} '{}', which decays "
        "from the start (no branch of it scores what a shorter run would): set schedule.type = "
        "\"wsd\" (under [set]); wsd is the one schedule it allows",
        at, varied_type ? "[space] gives schedule.type" : "the base's schedule is",
        varied_type ? *varied_type : base.type("schedule")));
  }
  const std::vector<int64_t> rungs = asha_rungs(spec);
  const Params& schedule = base.params("schedule");
  const int64_t last = rungs.back();
  // Every member must branch in its stable phase: the longest warmup and the longest decay
  // [space] can draw count, not only the base's.
  const SpaceTop warmup = space_top(spec, "schedule.warmup", schedule.integer("warmup"));
  const SpaceTop decay =
      space_top(spec, "schedule.decay_fraction", schedule.real("decay_fraction"));
  const int64_t decay_start = last - std::llround(decay.value * static_cast<double>(last));
  for (size_t i = 0; i + 1 < rungs.size(); ++i) {
    if (rungs[i] >= warmup.value && rungs[i] <= decay_start) continue;
    const bool in_warmup = rungs[i] < warmup.value;
    const auto drawn = [](const SpaceTop& top) {
      return top.where.empty() ? std::string() : fmt::format(" ([space] at {})", top.where);
    };
    throw UserError(fmt::format(
        "{}: the rung at step {} lies {} (the wsd schedule warms up for {}{} steps{} and decays "
        "from step {}{}{} of {}): a branch there cannot be cooled from the stable lr; {}",
        at, rungs[i], in_warmup ? "in the warmup" : "in the decay",
        warmup.where.empty() ? "" : "up to ", warmup.value, drawn(warmup),
        decay.where.empty() ? "" : "as early as ", decay_start, drawn(decay), last,
        in_warmup ? "raise min_steps or grace above the warmup" : "lower schedule.decay_fraction"));
  }
}

std::optional<AshaPromotion> asha_promotion(const std::vector<AshaMember>& members, size_t rungs,
                                            int64_t reduction_factor) {
  for (size_t rung = rungs >= 2 ? rungs - 2 : 0; rungs >= 2; --rung) {
    const std::vector<size_t> ranked = ranked_at(members, rung);
    const size_t keep = ranked.size() / static_cast<size_t>(reduction_factor);
    for (size_t k = 0; k < keep; ++k) {
      const AshaMember& m = members[ranked[k]];
      if (m.results.size() == rung + 1 && !m.busy && !m.failed)
        return AshaPromotion{ranked[k], rung + 1};
    }
    if (rung == 0) break;
  }
  return std::nullopt;
}

std::optional<AshaPromotion> asha_closing_promotion(const std::vector<AshaMember>& members,
                                                    size_t rungs) {
  for (const auto& m : members)
    if (m.results.size() >= rungs) return std::nullopt;
  for (size_t rung = rungs - 1; rung-- > 0;) {
    for (size_t i : ranked_at(members, rung)) {
      const AshaMember& m = members[i];
      if (m.results.size() == rung + 1 && !m.busy && !m.failed) return AshaPromotion{i, rung + 1};
    }
  }
  return std::nullopt;
}

AshaPlace asha_place(const std::vector<AshaMember>& members, size_t member, size_t rung) {
  const std::vector<size_t> ranked = ranked_at(members, rung);
  const auto at = std::find(ranked.begin(), ranked.end(), member);
  return {at == ranked.end() ? 0 : static_cast<size_t>(at - ranked.begin()) + 1, ranked.size()};
}

}  // namespace kiln
