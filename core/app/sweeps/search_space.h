// The [search] and [space] of a sweep file (the format is in core/app/sweeps/spec_file.h): what a
// search is judged by, and the distribution of each key a random or TPE search varies, from which
// every random trial draws its value as a pure function of the sweep's seed, the trial and the
// key.
// Kept apart from core/app/sweeps/spec.cpp, which expands the members, because drawing values
// and checking the search's metric against what the members log are tasks of their own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct SweepSpec;

// One key of [space]: the distribution its trials draw from.
struct SweepDistribution {
  enum class Kind { kLogUniform, kUniform, kIntUniform, kChoice };
  std::string key;  // section.key
  Kind kind = Kind::kUniform;
  double low = 0, high = 0;          // the numeric kinds' bounds, inclusive
  std::vector<std::string> choices;  // kChoice: TOML text of each value
  std::string where;                 // file:line:col of the key, for errors
};

struct SweepSearch {
  // grid: the members the file lists; random: `trials` draws from [space]; tpe: the first
  // `startup` trials drawn as random's, the others proposed by TPE from the finished ones
  // (core/app/sweeps/tpe.h) while the sweep runs; asha: the trials `sampler` proposes, run
  // rung by rung by asynchronous successive halving (core/app/sweeps/asha.h).
  enum class Type { kGrid, kRandom, kTpe, kAsha };
  Type type = Type::kGrid;
  bool draws() const { return type != Type::kGrid; }  // its trials come from [space]
  // Its later trials are proposed by TPE: type tpe, or asha with sampler = "tpe".
  bool tpe() const { return type == Type::kTpe || (type == Type::kAsha && tpe_sampler); }
  int64_t trials = 0;
  int64_t seed = 0;
  int64_t startup = 10;      // tpe, and asha with sampler = "tpe"
  bool tpe_sampler = false;  // asha: sampler = "tpe" (false: "random")
  // asha: the rungs are at min_steps * reduction_factor^k below max_steps (0: the base's
  // train.steps, which every member trains to), less those below `grace`; and max_steps.
  int64_t min_steps = 0;
  int64_t max_steps = 0;
  int64_t reduction_factor = 3;
  int64_t grace = 0;
  // asha: each rung below the last is scored by a cooldown branch of rung_cooldown x the rung's
  // steps (core/app/sweeps/asha.h: check_rung_cooldown); 0: by the trajectory's own value.
  double rung_cooldown = 0;
  std::string rung_cooldown_where;  // file:line:col, for errors
  // What the search is judged by: a metric the members log (loss, lr, grad_norm,
  // tokens_per_sec, val_loss, or a task's TASK.METRIC) and whether lower or higher is better;
  // the members' summary is sorted by its best value. "" = none.
  std::string metric;
  bool maximize = false;  // mode = "max"; false: "min"
  std::string where;      // file:line:col of [search], for errors
  std::string metric_where;
  std::string min_steps_where;  // file:line:col of asha's min_steps, for errors
};

// The `kiln runs list --sort` key of a search's metric: min(M), or -max(M) for mode = "max";
// "" without a metric.
std::string search_sort_key(const SweepSearch& search);
// The search's metric when it is a task's (TASK.METRIC, checked by check_metric against the base's
// eval.tasks), for a ListQuery's declared_task_metrics; empty otherwise.
std::vector<std::string> declared_task_metrics(const SweepSearch& search);

// The value `distribution` gives trial `trial` of a sweep seeded `seed`, as TOML text: a number
// drawn from splitmix64 of (seed, trial, key) rounded to 4 significant digits (and kept in its
// bounds), an integer, or one of the choices.
std::string sample_value(const SweepDistribution& distribution, int64_t seed, int64_t trial);
// A numeric distribution's value `x` as TOML text, in its bounds: int_uniform's rounded to the
// nearest integer, the others' to 4 significant digits.
std::string value_text(const SweepDistribution& distribution, double x);

// The search's metric is one the members log: a per-step metric, val_loss with evaluations on,
// or a metric of a task in the base's eval.tasks (its [set] applied); a UserError otherwise.
void check_metric(const SweepSpec& spec);

}  // namespace kiln
