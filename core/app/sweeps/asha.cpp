#include "core/app/sweeps/asha.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "core/api/schedule.h"
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

// A value a schedule key can take: an end of its [space] draws (where that is), or the base's.
struct SpaceTop {
  double value = 0;
  std::string where;  // the [space] key's file:line:col; empty: the base's value
};

// The two ends of a numeric [space] key's draws; none for choices that are not all numbers.
std::optional<std::pair<double, double>> space_ends(const SweepDistribution& d) {
  if (d.kind != SweepDistribution::Kind::kChoice) return std::pair(d.low, d.high);
  std::pair<double, double> ends(INFINITY, -INFINITY);
  for (const std::string& choice : d.choices) {
    char* end = nullptr;
    const double x = std::strtod(choice.c_str(), &end);
    if (end == choice.c_str() || *end != '\0') return std::nullopt;
    ends = {std::min(ends.first, x), std::max(ends.second, x)};
  }
  return ends;
}

// The largest value of a schedule key any member can have.
SpaceTop space_top(const SweepSpec& spec, const std::string& key, double base_value) {
  for (const SweepDistribution& d : spec.space) {
    const auto ends = d.key == key ? space_ends(d) : std::nullopt;
    if (ends) return {ends->second, d.where};
  }
  return {base_value, ""};
}

// The earliest step any member's decay can start at, as the schedule answers it: each numeric
// [space] key of the schedule's (its warmup aside) at whichever end starts the decay sooner, and
// the [space] key that moved it (empty: the base's own).
SpaceTop earliest_decay(const SweepSpec& spec, const ScheduleCooldown& cooldown, Params params,
                        int64_t last) {
  const std::string prefix = "schedule.";
  SpaceTop earliest{static_cast<double>(cooldown.decay_start(params, last)), ""};
  for (const SweepDistribution& d : spec.space) {
    const std::string key = d.key.substr(std::min(d.key.size(), prefix.size()));
    if (d.key.rfind(prefix, 0) != 0 || key == "warmup" || !params.has(key)) continue;
    const bool integer = std::holds_alternative<int64_t>(params.value(key));
    const auto ends = space_ends(d);
    if (!ends || !(integer || std::holds_alternative<double>(params.value(key)))) continue;
    for (const double x : {ends->first, ends->second}) {
      Params drawn = params;
      drawn.set(key, integer ? ParamValue(std::llround(x)) : ParamValue(x));
      const auto start = static_cast<double>(cooldown.decay_start(drawn, last));
      if (start < earliest.value) {
        earliest = {start, d.where};
        params = drawn;
      }
    }
  }
  return earliest;
}

// A [space] choice of schedule.type (TOML text) that names a schedule without a stable phase.
const std::string* uncoolable_choice(const SweepSpec& spec) {
  for (const SweepDistribution& d : spec.space) {
    if (d.key != "schedule.type") continue;
    for (const std::string& choice : d.choices) {
      const bool quoted = choice.size() >= 2 && choice.front() == '"' && choice.back() == '"';
      if (!ScheduleCooldowns::find(quoted ? choice.substr(1, choice.size() - 2) : choice))
        return &choice;
    }
  }
  return nullptr;
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
  const std::string& type = base.type("schedule");
  const ScheduleCooldown* cooldown = ScheduleCooldowns::find(type);
  const std::string* varied_type = uncoolable_choice(spec);
  if (!cooldown || varied_type) {
    const std::vector<std::string> coolable = ScheduleCooldowns::names();
    throw UserError(fmt::format(
        "{}: rung_cooldown branches a {} schedule's stable phase, and {} '{}', which decays "
        "from the start (no branch of it scores what a shorter run would): set schedule.type = "
        "{} (under [set]){}",
        at, ScheduleCooldowns::names_text(false),
        varied_type ? "[space] gives schedule.type" : "the base's schedule is",
        varied_type ? *varied_type : type, ScheduleCooldowns::names_text(true),
        coolable.size() == 1 ? fmt::format("; {} is the one schedule it allows", coolable[0])
                             : ""));
  }
  const std::vector<int64_t> rungs = asha_rungs(spec);
  const Params& schedule = base.params("schedule");
  const int64_t last = rungs.back();
  // Every member must branch in its stable phase: the longest warmup and the earliest decay
  // [space] can draw count, not only the base's.
  const SpaceTop warmup = space_top(spec, "schedule.warmup", schedule.integer("warmup"));
  const SpaceTop decay = earliest_decay(spec, *cooldown, schedule, last);
  for (size_t i = 0; i + 1 < rungs.size(); ++i) {
    if (rungs[i] >= warmup.value && rungs[i] <= decay.value) continue;
    const bool in_warmup = rungs[i] < warmup.value;
    const auto drawn = [](const SpaceTop& top) {
      return top.where.empty() ? std::string() : fmt::format(" ([space] at {})", top.where);
    };
    throw UserError(fmt::format(
        "{}: the rung at step {} lies {} (the {} schedule warms up for {}{} steps{} and decays "
        "from step {}{}{} of {}): a branch there cannot be cooled from the stable lr; {}",
        at, rungs[i], in_warmup ? "in the warmup" : "in the decay", type,
        warmup.where.empty() ? "" : "up to ", warmup.value, drawn(warmup),
        decay.where.empty() ? "" : "as early as ", decay.value, drawn(decay), last,
        in_warmup ? "raise min_steps or grace above the warmup" : cooldown->later_decay));
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
