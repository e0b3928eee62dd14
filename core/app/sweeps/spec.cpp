#include "core/app/sweeps/spec.h"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "core/app/sweeps/asha.h"
#include "core/config/config.h"
#include "core/store/runs/paths.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// The label of a value in a member's name: strings without their quotes.
std::string label_of(const std::string& value_text) {
  if (value_text.size() >= 2 && value_text.front() == '"' && value_text.back() == '"') {
    return value_text.substr(1, value_text.size() - 2);
  }
  return value_text;
}

// Members are runs named <sweep>/<key=value,...>: the rule of `kiln run`'s names
// (core/store/runs/paths.h), checked before any member starts rather than by each member's process.
void check_name(const std::string& what, const std::string& name) {
  check_run_name(name, fmt::format("it is the {}: rename the sweep (name = \"...\" or --name) or "
                                   "vary other values",
                                   what));
}

// Far more runs than anyone sweeps by hand: a grid this big is a mistake, and expanding it would
// take the machine's memory before the first member starts.
constexpr size_t kMaxMembers = 10000;

// One key=value per axis: a member's values, in axis order.
using Combination = std::vector<std::pair<std::string, std::string>>;

std::string key_of(const std::string& assignment) {
  return assignment.substr(0, assignment.find('='));
}

// What else in the file gives `key` ("[grid] varies", ...), or null: a key given in two places
// would leave the member's value to the order of its overrides. `variants`: look in them too.
const char* other_place_of(const SweepSpec& spec, const std::string& key, bool variants) {
  auto in_axes = [&](const std::vector<SweepAxis>& axes) {
    return std::any_of(axes.begin(), axes.end(), [&](const SweepAxis& a) { return a.key == key; });
  };
  auto in_assignments = [&](const std::vector<std::string>& assignments) {
    return std::any_of(assignments.begin(), assignments.end(),
                       [&](const std::string& a) { return key_of(a) == key; });
  };
  if (in_axes(spec.grid)) return "[grid] varies";
  if (in_axes(spec.zip)) return "[zip] varies";
  if (in_assignments(spec.fixed)) return "[set] (or --set) sets";
  const bool varied =
      variants && std::any_of(spec.variants.begin(), spec.variants.end(),
                              [&](const auto& v) { return in_assignments(v.overrides); });
  return varied ? "a [[variant]] sets" : nullptr;
}

// A key a variant sets is varied by the variant alone.
void check_variant_keys(const SweepSpec& spec) {
  for (const auto& variant : spec.variants) {
    for (const auto& assignment : variant.overrides) {
      const std::string key = key_of(assignment);
      if (const char* other = other_place_of(spec, key, /*variants=*/false)) {
        throw UserError(fmt::format("{}: [[variant]] sets '{}', which {} too: give it in one place",
                                    variant.where, key, other));
      }
    }
  }
}

// An asha search plans every member over one train.steps (max_steps, or the base's): nothing varies
// it.
void check_asha_steps(const SweepSpec& spec) {
  const char* other = other_place_of(spec, "train.steps", true);
  for (const auto& d : spec.space)
    if (d.key == "train.steps") other = "[space] draws";
  if (other && (spec.search.max_steps > 0 || std::string(other).rfind("[set]", 0) != 0)) {
    throw UserError(fmt::format(
        "{}: {} train.steps, which an asha search sets for every member: its rungs pause the "
        "members of one schedule, planned over max_steps (default: the base's train.steps)",
        spec.search.where, other));
  }
  asha_rungs(spec);
}

// A random search's [space] and [search] agree, and no other part of the file gives a key it
// samples.
void check_search(const SweepSpec& spec) {
  const SweepSearch& search = spec.search;
  if (!search.draws()) {
    if (!spec.space.empty()) {
      throw UserError(
          fmt::format("{}: [space] gives distributions, which only a random, tpe or asha search "
                      "draws from: add [search] type = \"random\" and trials = N",
                      spec.space.front().where));
    }
    return;
  }
  const char* type = search.type == SweepSearch::Type::kAsha  ? "an asha"
                     : search.type == SweepSearch::Type::kTpe ? "a tpe"
                                                              : "a random";
  if (search.trials < 1) {
    throw UserError(
        fmt::format("{}: {} search needs trials = N (how many draws)", search.where, type));
  }
  if (spec.space.empty()) {
    throw UserError(
        fmt::format("{}: {} search needs [space], a distribution per key it "
                    "varies, e.g. optimizer.lr = {{ log_uniform = [1e-4, 3e-2] }}",
                    search.where, type));
  }
  if (search.type != SweepSearch::Type::kRandom && search.metric.empty()) {
    throw UserError(
        fmt::format("{}: {} search needs metric = \"...\" (what it minimises, or maximises with "
                    "mode = \"max\"): {}",
                    search.where, type,
                    search.type == SweepSearch::Type::kTpe
                        ? "the trials it proposes follow the finished ones' values of it"
                        : "its rungs keep the trials with the best values of it"));
  }
  if (search.type == SweepSearch::Type::kAsha) check_asha_steps(spec);
  check_rung_cooldown(spec);
  for (const auto& d : spec.space) {
    if (const char* other = other_place_of(spec, d.key, /*variants=*/true)) {
      throw UserError(fmt::format("{}: [space] draws '{}', which {} too: give it in one place",
                                  d.where, d.key, other));
    }
  }
}

// The sampled values of every trial known before the sweep runs, in [space] order: a random
// search's, or a tpe search's startup trials.
std::vector<Combination> trials(const SweepSpec& spec) {
  std::vector<Combination> out;
  if (!spec.search.draws()) return {{}};
  const int64_t known =
      spec.search.tpe() ? std::min(spec.search.trials, spec.search.startup) : spec.search.trials;
  for (int64_t t = 0; t < known; ++t) {
    Combination values;
    for (const auto& d : spec.space)
      values.emplace_back(d.key, sample_value(d, spec.search.seed, t));
    out.push_back(std::move(values));
  }
  return out;
}

// The [zip] lists line up, and the product is not absurd (checked before it is expanded).
void check_shape(const SweepSpec& spec) {
  check_search(spec);
  check_metric(spec);
  if (spec.grid.empty() && spec.zip.empty() && spec.variants.empty() && !spec.search.draws()) {
    throw UserError(
        "the sweep varies nothing: give [grid], [zip], [[variant]] or seeds (or --grid/--zip)");
  }
  for (const auto& axis : spec.zip) {
    if (axis.values.size() != spec.zip.front().values.size()) {
      throw UserError(fmt::format(
          "[zip] lists must have equal lengths: '{}' has {} values, '{}' "
          "has {}",
          spec.zip.front().key, spec.zip.front().values.size(), axis.key, axis.values.size()));
    }
  }
  double count = spec.zip.empty() ? 1.0 : static_cast<double>(spec.zip.front().values.size());
  count *= static_cast<double>(std::max<size_t>(1, spec.variants.size()));
  if (spec.search.draws()) count *= static_cast<double>(spec.search.trials);
  for (const auto& axis : spec.grid)
    count *= static_cast<double>(axis.values.size());
  if (count > static_cast<double>(kMaxMembers)) {
    throw UserError(fmt::format(
        "the sweep would have {:.0f} members, more than the {} a sweep may have: vary fewer keys "
        "or fewer values",
        count, kMaxMembers));
  }
  check_variant_keys(spec);
}

// Each combination: one value per grid axis (odometer order), then one zip position.
std::vector<Combination> combinations(const SweepSpec& spec) {
  std::vector<Combination> combos = {{}};
  for (const auto& axis : spec.grid) {
    std::vector<Combination> next;
    for (const auto& combo : combos) {
      for (const auto& value : axis.values) {
        auto extended = combo;
        extended.emplace_back(axis.key, value);
        next.push_back(std::move(extended));
      }
    }
    combos = std::move(next);
  }
  if (spec.zip.empty()) return combos;
  std::vector<Combination> next;
  for (const auto& combo : combos) {
    for (size_t i = 0; i < spec.zip.front().values.size(); ++i) {
      auto extended = combo;
      for (const auto& axis : spec.zip)
        extended.emplace_back(axis.key, axis.values[i]);
      next.push_back(std::move(extended));
    }
  }
  return next;
}

// A variant's part of its members' names: its name, or its key=value pairs.
std::string variant_label(const SweepVariant& variant) {
  if (!variant.name.empty()) return variant.name;
  std::vector<std::string> labels;
  for (const auto& assignment : variant.overrides) {
    const size_t eq = assignment.find('=');
    labels.push_back(assignment.substr(0, eq + 1) + label_of(assignment.substr(eq + 1)));
  }
  return join(labels, ",");
}

// Each variant's keys load over the base: a mistake in one is reported at its [[variant]] line.
void check_variants(const SweepSpec& spec) {
  for (const auto& variant : spec.variants) {
    std::vector<std::string> overrides = spec.fixed;
    overrides.insert(overrides.end(), variant.overrides.begin(), variant.overrides.end());
    try {
      load_config(spec.base, overrides);
    } catch (const UserError& e) {
      throw UserError(
          fmt::format("{}: [[variant]] '{}': {}", variant.where, variant_label(variant), e.what()));
    }
  }
}

// A member: [set]'s overrides, then the variant's, the grid point's and the trial's draws
// (`trial` < 0: no search), named <sweep>/<labels> and its config loaded, so that a typo stops
// the sweep before anything runs.
SweepMember make_member(const SweepSpec& spec, const SweepVariant& variant,
                        const Combination& combo, int64_t trial, const Combination& draws) {
  SweepMember member{"", spec.fixed};
  if (spec.search.type == SweepSearch::Type::kAsha && spec.search.max_steps > 0)
    member.overrides.push_back(fmt::format("train.steps={}", spec.search.max_steps));
  member.overrides.insert(member.overrides.end(), variant.overrides.begin(),
                          variant.overrides.end());
  std::vector<std::string> labels;
  if (!variant.overrides.empty()) labels.push_back(variant_label(variant));
  auto add = [&](const Combination& values) {
    for (const auto& [key, value] : values) {
      member.overrides.push_back(key + "=" + value);
      labels.push_back(key + "=" + label_of(value));
    }
  };
  add(combo);
  if (trial >= 0) labels.push_back(fmt::format("trial={}", trial));
  add(draws);
  member.name = spec.name + "/" + join(labels, ",");
  check_name("sweep member name", member.name);
  try {
    load_config(spec.base, member.overrides);
  } catch (const UserError& e) {
    throw UserError(fmt::format("sweep member '{}': {}", member.name, e.what()));
  }
  return member;
}

// Members by variant, then grid point, then trial; two of one name are an error.
std::vector<SweepMember> members_of(const SweepSpec& spec, int64_t first_trial,
                                    const std::vector<Combination>& draws) {
  // No variant: the members are the grid's alone.
  std::vector<SweepVariant> variants = spec.variants;
  if (variants.empty()) variants.emplace_back();
  const std::vector<Combination> combos = combinations(spec);
  std::vector<SweepMember> members;
  std::set<std::string> names;
  for (const auto& variant : variants) {
    for (const auto& combo : combos) {
      for (size_t t = 0; t < draws.size(); ++t) {
        const int64_t trial =
            spec.search.draws() ? first_trial + static_cast<int64_t>(t) : int64_t{-1};
        members.push_back(make_member(spec, variant, combo, trial, draws[t]));
        if (!names.insert(members.back().name).second) {
          throw UserError(fmt::format(
              "two members of the sweep are named '{}': give the variants (or values) distinct "
              "names",
              members.back().name));
        }
      }
    }
  }
  return members;
}

}  // namespace

std::vector<SweepMember> expand_sweep(const SweepSpec& spec) {
  // The base first: a mistake in it (a syntax error, say) is the one to report.
  load_config(spec.base, spec.fixed);
  check_name("sweep name", spec.name);
  check_shape(spec);
  check_variants(spec);
  return members_of(spec, 0, trials(spec));
}

std::vector<SweepMember> trial_members(const SweepSpec& spec, int64_t trial,
                                       const std::vector<std::string>& values) {
  Combination draws;
  for (size_t k = 0; k < spec.space.size(); ++k)
    draws.emplace_back(spec.space[k].key, values[k]);
  return members_of(spec, trial, {draws});
}

}  // namespace kiln
