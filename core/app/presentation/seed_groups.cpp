#include "core/app/presentation/seed_groups.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/app/presentation/metric_points.h"
#include "core/config/canonical.h"
#include "core/util/error.h"
#include "core/util/statistics.h"
#include "core/util/table.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// The plugin a section names ("gpt" for model.type = "gpt"): the plugin's keys are declared
// there.
std::string section_type(const FlatConfig& config, const std::string& section) {
  const auto it = config.find(section + ".type");
  if (it == config.end()) return "";
  const std::string& quoted = it->second;
  return quoted.size() >= 2 && quoted.front() == '"' ? quoted.substr(1, quoted.size() - 2) : quoted;
}

// Under "auto", a key sets a group apart when it can change the run's numbers, the seed aside:
// the seed is what varies inside a group.
bool defines_group(const FlatConfig& config, const std::string& key) {
  if (key == "run.seed") return false;
  const size_t dot = key.find('.');
  const std::string section = key.substr(0, dot);
  return is_hashed_key(section, section_type(config, section), key.substr(dot + 1));
}

std::vector<std::string> grouping_keys(const std::vector<FlatConfig>& configs,
                                       const std::vector<std::string>& requested) {
  if (requested.size() == 1 && requested[0] == "auto") {
    std::set<std::string> keys;
    for (const auto& config : configs) {
      for (const auto& entry : config) {
        if (defines_group(config, entry.first)) keys.insert(entry.first);
      }
    }
    return {keys.begin(), keys.end()};
  }
  std::set<std::string> known;
  for (const auto& config : configs) {
    for (const auto& entry : config)
      known.insert(entry.first);
  }
  for (const auto& key : requested) {
    if (key == "auto") {
      throw UserError(
          fmt::format("--group-by {}: auto takes no other keys: give auto alone, or "
                      "only config keys",
                      join(requested, ",")));
    }
    if (known.count(key)) continue;
    std::string guess = nearest(key, {known.begin(), known.end()});
    for (const auto& full : known) {  // "seed" for run.seed: a key without its section
      if (guess.empty() && full.size() > key.size() + 1 &&
          full.compare(full.size() - key.size() - 1, std::string::npos, "." + key) == 0) {
        guess = full;
      }
    }
    throw UserError(fmt::format(
        "--group-by {}: none of these runs has the config key '{}': {}`kiln runs show RUN` lists "
        "a run's config",
        join(requested, ","), key, guess.empty() ? "" : fmt::format("did you mean '{}'? ", guess)));
  }
  return requested;
}

std::string value_of(const FlatConfig& config, const std::string& key) {
  const auto it = config.find(key);
  return it == config.end() ? "-" : it->second;
}

// What one group is called when there is no other to tell it from: its experiment's name.
std::string config_name(const RunRecord& run) {
  const std::string stem = std::filesystem::path(run.experiment).stem().string();
  return stem.empty() ? "all runs" : stem;
}

// "0.001" and "1e-3" name the same value.
bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  char* end_a = nullptr;
  char* end_b = nullptr;
  const double x = std::strtod(a.c_str(), &end_a);
  const double y = std::strtod(b.c_str(), &end_b);
  return !a.empty() && !b.empty() && *end_a == '\0' && *end_b == '\0' && x == y;
}

// Whether every `key=value` term of `wanted` holds in every run of the group (a key that varies
// inside the group, such as run.seed, picks no group).
bool matches_terms(const RunGroup& group, const std::string& wanted) {
  bool any = false;
  for (const auto& run : group.runs) {
    const FlatConfig config = flatten_config(run.config);
    for (const auto& term : split(wanted, ' ')) {
      if (term.empty()) continue;
      const size_t eq = term.find('=');
      if (eq == std::string::npos) return false;
      if (!same_value(value_of(config, term.substr(0, eq)), term.substr(eq + 1))) return false;
      any = true;
    }
  }
  return any;
}

}  // namespace

std::vector<RunGroup> group_runs(const std::vector<RunRecord>& runs,
                                 const std::vector<std::string>& keys) {
  std::vector<FlatConfig> configs;
  for (const auto& run : runs)
    configs.push_back(flatten_config(run.config));
  const std::vector<std::string> by = grouping_keys(configs, keys);

  std::vector<RunGroup> groups;
  std::vector<std::vector<std::string>> group_values;  // each group's values of `by`
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::string> values;
    for (const auto& key : by)
      values.push_back(value_of(configs[i], key));
    size_t g = 0;
    while (g < groups.size() && group_values[g] != values)
      ++g;
    if (g == groups.size()) {
      groups.emplace_back();
      group_values.push_back(values);
    }
    groups[g].runs.push_back(runs[i]);
  }
  if (groups.size() == 1) groups[0].label = config_name(groups[0].runs[0]);
  if (groups.size() < 2) return groups;
  // A label names the keys on which groups differ; the keys they share say nothing.
  for (size_t k = 0; k < by.size(); ++k) {
    bool differs = false;
    for (const auto& values : group_values)
      differs = differs || values[k] != group_values[0][k];
    if (!differs) continue;
    for (size_t g = 0; g < groups.size(); ++g) {
      groups[g].label += (groups[g].label.empty() ? "" : " ") + by[k] + "=" + group_values[g][k];
    }
  }
  return groups;
}

bool has_seeds(const std::vector<RunGroup>& groups) {
  for (const auto& group : groups) {
    if (group.runs.size() > 1) return true;
  }
  return false;
}

namespace {

size_t find_baseline(const std::vector<RunGroup>& groups, const std::string& wanted) {
  if (wanted.empty()) return 0;
  std::vector<size_t> found;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].label == wanted) return g;
    if (matches_terms(groups[g], wanted)) found.push_back(g);
  }
  if (found.size() == 1) return found[0];
  std::vector<std::string> labels;
  for (const auto& group : groups)
    labels.push_back("'" + group.label + "'");
  throw UserError(fmt::format(
      "--baseline {}: {} of the groups: give a group's label or key=value terms that pick one "
      "of {}",
      wanted, found.empty() ? "matches none" : fmt::format("matches {}", found.size()),
      join(labels, ", ")));
}

// One thing measured on every run of every group.
struct Quantity {
  std::string title;
  // Per group: one value per distinct (config, seed) that has it, the first run's.
  std::vector<std::vector<double>> samples;
  std::vector<std::string> reruns;  // per group: "2 reruns of seed 2 counted once; ...", or ""
};

// A sample is a distinct (config hash, run.seed) pair: runs that share both are reruns of one
// seed, which replay the same numbers (Kiln's runs are deterministic) and would count one
// measurement as several (one seed run twice gave n = 2, sd 0, p = 0). The first run
// of each pair counts; the others are named.
Quantity quantity(const std::string& title, const std::vector<RunGroup>& groups,
                  const std::function<std::optional<double>(const RunRecord&)>& value) {
  Quantity q{title, {}, {}};
  for (const auto& group : groups) {
    q.samples.emplace_back();
    std::map<std::string, std::pair<std::string, int>> seen;  // hash -> seed, runs with a value
    std::vector<std::string> order;
    for (const auto& run : group.runs) {
      const auto v = value(run);
      if (!v) continue;
      const std::string seed = value_of(flatten_config(run.config), "run.seed");
      const std::string sample = run.config_hash.empty()
                                     ? fmt::format("#{}", run.id)
                                     : fmt::format("{} seed {}", run.config_hash, seed);
      auto [it, first] = seen.try_emplace(sample, seed, 0);
      if (first) {
        q.samples.back().push_back(*v);
        order.push_back(sample);
      }
      ++it->second.second;
    }
    std::vector<std::string> reruns;
    for (const auto& sample : order) {
      const auto& [seed, runs] = seen[sample];
      if (runs > 1) reruns.push_back(fmt::format("{} runs of seed {} counted once", runs, seed));
    }
    q.reruns.push_back(join(reruns, "; "));
  }
  return q;
}

// The table two spaces in.
std::string indented(const Table& table) {
  std::string out;
  for (const auto& line : split(render_text_table(table), '\n')) {
    if (!line.empty()) out += "  " + line + "\n";
  }
  return out;
}

std::string number(double v) {
  return fmt::format("{:.6f}", v);
}

std::string p_value_text(double p) {
  return p >= 1e-4 ? fmt::format("{:.4f}", p) : fmt::format("{:.1e}", p);
}

// A spread at the level of rounding (or none): runs that agree to 12 digits.
bool no_spread(const stats::Summary& s) {
  return s.sd <= 1e-12 * std::fabs(s.mean);
}

// Why a group has no test against the baseline, or "" when it has one. Two groups without spread
// have nothing a t-test could weigh a difference against (and its power search would chase a
// noncentrality in the billions).
std::string no_test_reason(const stats::Summary& group, const stats::Summary& baseline) {
  if (group.n >= 2 && baseline.n >= 2) {
    if (no_spread(group) && no_spread(baseline)) {
      return "identical runs: no spread to test (each group's runs agree to 12 digits)";
    }
    return "";
  }
  const auto seeds = [](size_t k) { return k == 0 ? "no value" : fmt::format("{} seed", k); };
  return fmt::format(
      "no test: Welch's t-test needs 2 seeds or more in each group; {}",
      group.n < 2 ? "this group has " + seeds(group.n) : "the baseline has " + seeds(baseline.n));
}

std::string quantity_block(const Quantity& q, const std::vector<RunGroup>& groups, size_t base) {
  if (std::all_of(q.samples.begin(), q.samples.end(), [](const auto& xs) { return xs.empty(); }))
    return q.title + ": no run has a value\n";
  Table t{{"group", "n", "mean", "sd", "95% CI", "vs baseline", "p", "seeds needed"},
          {},
          {false, true, true, true, false, true, true, true}};
  std::string notes;
  const stats::Summary b = stats::summarize(q.samples[base]);
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<double>& xs = q.samples[g];
    const stats::Summary s = stats::summarize(xs);
    std::vector<std::string> row{groups[g].label, std::to_string(s.n), s.n ? number(s.mean) : "-",
                                 s.n >= 2 ? number(s.sd) : "-"};
    row.push_back(s.n >= 2   ? fmt::format("[{}, {}]", number(s.ci_low), number(s.ci_high))
                  : s.n == 1 ? "1 seed: no interval"
                             : "no value");
    if (g == base) {
      row.insert(row.end(), {"baseline", "", ""});
    } else if (const std::string reason = no_test_reason(s, b); !reason.empty()) {
      row.insert(row.end(), {s.n && b.n ? fmt::format("{:+.6f}", s.mean - b.mean) : "-", "-", "-"});
      notes += fmt::format("  {}: {}\n", groups[g].label, reason);
    } else {
      const stats::Welch w = stats::welch_test(q.samples[base], xs);
      // No seed count shows a difference of exactly zero.
      const size_t needed =
          std::isfinite(w.difference) && std::isfinite(s.sd) && std::isfinite(b.sd)
              ? stats::seeds_needed(w.difference, b.sd, s.sd)
              : 0;
      row.insert(row.end(), {fmt::format("{:+.6f}", w.difference), p_value_text(w.p_value),
                             needed ? std::to_string(needed) : "-"});
      if (!needed)
        notes += fmt::format("  {}: no seed count shows a difference of {}\n", groups[g].label,
                             w.difference);
    }
    t.rows.push_back(std::move(row));
    if (!q.reruns[g].empty()) {
      notes += fmt::format("  {}: {} (a sample is a distinct config and seed)\n", groups[g].label,
                           q.reruns[g]);
    }
  }
  return q.title + "\n" + indented(t) + notes;
}

}  // namespace

std::string grouped_report(HistoryDb& db, const std::vector<RunGroup>& groups,
                           const GroupReportOptions& options) {
  if (groups.empty()) return "no runs\n";
  const size_t base = find_baseline(groups, options.baseline);
  std::vector<Quantity> quantities = {
      quantity("final loss (each run's last step)", groups,
               [](const RunRecord& r) { return r.final_loss; }),
      quantity("best val (each run's lowest validation loss)", groups,
               [](const RunRecord& r) { return r.best_val; })};
  for (const auto& text : options.metrics) {
    const MetricPoint p = parse_metric_point(db, text, "--metric");
    quantities.push_back(quantity(
        fmt::format("{} (the last {} at or before {})", p.text, p.evaluation ? "eval" : "value",
                    point_text(p.key.at_tokens ? "tokens" : "step", {point_of(p)})),
        groups, [&](const RunRecord& r) { return std::optional<double>(value_at(db, r, p)); }));
  }
  Table members{{"group", "runs", "run.seed"}, {}, {false, true, false}};
  for (const auto& group : groups) {
    std::vector<std::string> seeds;
    for (const auto& run : group.runs)
      seeds.push_back(value_of(flatten_config(run.config), "run.seed"));
    members.rows.push_back({group.label, std::to_string(group.runs.size()), join(seeds, ", ")});
  }
  std::string out = fmt::format("{} groups, baseline '{}'\n{}", groups.size(), groups[base].label,
                                indented(members));
  out +=
      "\nn: runs (seeds) with a value; 95% CI of the mean from Student's t; p: Welch's t-test "
      "against\nthe baseline; seeds needed: per group, for the observed difference to reach "
      "p < 0.05 at 80% power\n";
  for (const auto& q : quantities) {
    out += '\n';
    out += quantity_block(q, groups, base);
  }
  return out;
}

}  // namespace kiln
