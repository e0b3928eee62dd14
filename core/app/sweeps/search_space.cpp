// A sweep's [search] and [space] (core/app/sweeps/search_space.h): its metric checked, its draws.
#include "core/app/sweeps/search_space.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/app/sweeps/spec.h"
#include "core/config/canonical.h"
#include "core/config/config.h"
#include "core/config/options.h"
#include "core/data/task_file.h"
#include "core/store/runs/task_scores.h"
#include "core/util/counter_hash.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// A uniform draw in [0, 1) for (seed, trial, key): keyed by the key's name, so that adding a key
// to [space] leaves the others' draws as they were. The three go in as a chain (the seed makes a
// stream, the trial picks its output, the key that output's), not combined by a symmetric xor,
// under which trial t of seed s was trial s of seed t and sweeps of seeds 1-3 shared trials.
double draw(int64_t seed, int64_t trial, const std::string& key) {
  const uint64_t stream = splitmix64(static_cast<uint64_t>(seed));
  const uint64_t of_trial = splitmix64_output(stream, static_cast<uint64_t>(trial));
  return unit_interval(splitmix64_output(of_trial, fnv1a64(key)));
}

}  // namespace

void check_metric(const SweepSpec& spec) {
  const std::string& metric = spec.search.metric;
  if (metric.empty()) return;
  const std::string at = spec.search.metric_where;
  for (const char* logged : {"loss", "lr", "grad_norm", "tokens_per_sec"})
    if (metric == logged) return;
  const EvalOptions eval = eval_options(load_config(spec.base, spec.fixed));
  std::string task, score;
  if (metric == "val_loss") {
    if (eval.every > 0) return;
    throw UserError(
        fmt::format("{}: metric val_loss is never logged: the base experiment has "
                    "eval.every = 0: set eval.every under [set]",
                    at));
  }
  if (!split_task_metric(metric, task, score)) {
    throw UserError(
        fmt::format("{}: metric '{}' is not one the members log: use loss, lr, "
                    "grad_norm, tokens_per_sec, val_loss or a task's TASK.METRIC",
                    at, metric));
  }
  std::vector<std::string> names;
  for (const std::string& file :
       eval.tasks.empty() ? std::vector<std::string>{} : glob_files(eval.tasks)) {
    const TaskSpec t = read_task_spec(file);
    names.push_back(t.name);
    if (t.name != task) continue;
    const bool choice = t.kind == TaskKind::kChoice;
    if (choice ? score == "acc" || score == "acc_norm" || score == "acc_bytes"
               : score == "exact_match") {
      return;
    }
    throw UserError(fmt::format("{}: task '{}' scores {}, not {}", at, task,
                                choice ? "acc, acc_norm and acc_bytes" : "exact_match", score));
  }
  throw UserError(
      fmt::format("{}: metric '{}' is never logged: the base experiment's eval.tasks "
                  "has {}: add the task to eval.tasks",
                  at, metric, names.empty() ? "no task" : join(names, ", ")));
}

std::vector<std::string> declared_task_metrics(const SweepSearch& search) {
  std::string task, score;
  if (!split_task_metric(search.metric, task, score)) return {};
  return {search.metric};
}

std::string search_sort_key(const SweepSearch& search) {
  if (search.metric.empty()) return "";
  return search.maximize ? "-max(" + search.metric + ")" : "min(" + search.metric + ")";
}

std::string sample_value(const SweepDistribution& d, int64_t seed, int64_t trial) {
  const double u = draw(seed, trial, d.key);
  using Kind = SweepDistribution::Kind;
  if (d.kind == Kind::kChoice) {
    return d.choices[std::min(d.choices.size() - 1, static_cast<size_t>(u * d.choices.size()))];
  }
  if (d.kind == Kind::kIntUniform) {
    const double span = d.high - d.low + 1;
    return value_text(d, d.low + std::min(span - 1, std::floor(u * span)));
  }
  return value_text(d, d.kind == Kind::kLogUniform
                           ? std::exp(std::log(d.low) + u * (std::log(d.high) - std::log(d.low)))
                           : d.low + u * (d.high - d.low));
}

std::string value_text(const SweepDistribution& d, double x) {
  if (d.kind == SweepDistribution::Kind::kIntUniform) {
    return format_value(static_cast<int64_t>(std::clamp(std::round(x), d.low, d.high)));
  }
  // Four significant digits: names a person can read, values a config can hold exactly.
  return format_value(std::clamp(std::stod(fmt::format("{:.4g}", x)), d.low, d.high));
}

}  // namespace kiln
