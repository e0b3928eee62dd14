// Learning-rate schedules: a pure function of the step, so a resumed run gets the same value
// for the same step without any saved state.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/config/registry.h"

namespace kiln {

class Schedule {
 public:
  virtual ~Schedule() = default;
  // Learning rate for the update with 0-based index `step` (db step `step + 1`). Called by the
  // trainer at the start of every update, on every rank; a resumed run starts at its snapshot's
  // step, so the value may depend on `step` and the factory's arguments only.
  virtual double lr(int64_t step) const = 0;
  // Whether the lr falls after its warmup: an optimizer that averages its iterates instead
  // (core/api/optimizer.h: AveragedIterate) refuses a schedule that does.
  virtual bool decays() const { return true; }
};

struct ScheduleKind {
  static constexpr const char* name = "schedule";
  using Product = Schedule;
  // Called once per rank by assemble(), after the optimizer. base_lr: the optimizer's
  // configured lr; total_steps: train.steps as configured now (a resume may have raised it).
  using Factory =
      std::function<std::shared_ptr<Schedule>(const Params&, double base_lr, int64_t total_steps)>;
};
using ScheduleRegistry = Registry<ScheduleKind>;

// Cooling down: a run paused at step S of its schedule's stable phase (the peak lr held after the
// warmup, before the decay) trains N more steps on the schedule a run of S + N steps follows after
// its step S, and is scored there: `kiln run --until S --probe-cooldown N`
// (core/train/cooldown_probe.h) and kiln sweep's rung_cooldown (core/app/sweeps/asha.h) ask for
// it. A schedule with a stable phase registers its answers beside its factory, from its params
// alone, so that a sweep asks them of its spec before any member runs. One without (a cosine's lr
// falls from the warmup's end, so no branch of it scores what a shorter run would) registers none,
// and the asker refuses it, naming the schedules that have one (ScheduleCooldowns::names).
struct ScheduleCooldown {
  // Where the decay starts (a 0-based step) in the schedule of `params` planned over
  // `total_steps`: the lr is the peak from the warmup's end up to that step.
  std::function<int64_t(const Params& params, int64_t total_steps)> decay_start;
  // The schedule that cools down from `from_step` over `steps` steps: the one of `params` planned
  // over from_step + steps, its decay `steps` long. Asked with from_step at or before the trunk's
  // decay start; a ParamError where from_step falls in the warmup.
  std::function<std::shared_ptr<Schedule>(const Params& params, double base_lr, int64_t from_step,
                                          int64_t steps)>
      cooled;
  // The fix for a decay that starts too early to branch before, in the config's words.
  std::string later_decay;
};

class ScheduleCooldowns {
 public:
  // Called by a schedule plugin as it registers, with the name its factory has.
  static bool add(const std::string& schedule, ScheduleCooldown cooldown) {
    table()[schedule] = std::move(cooldown);
    return true;
  }
  // The answers of schedule `schedule`; null when it has no stable phase.
  static const ScheduleCooldown* find(const std::string& schedule) {
    const auto it = table().find(schedule);
    return it == table().end() ? nullptr : &it->second;
  }
  // The schedules with a stable phase, in name order: what a refusal offers instead.
  static std::vector<std::string> names() {
    std::vector<std::string> out;
    for (const auto& [name, cooldown] : table())
      out.push_back(name);
    return out;
  }
  // names() as a refusal writes them: `wsd`, or `a or b`; with `quoted` as TOML values ("wsd").
  static std::string names_text(bool quoted) {
    std::string text;
    for (const std::string& name : names()) {
      text += (text.empty() ? "" : " or ") + (quoted ? "\"" + name + "\"" : name);
    }
    return text;
  }

 private:
  static std::map<std::string, ScheduleCooldown>& table() {
    static std::map<std::string, ScheduleCooldown> cooldowns;
    return cooldowns;
  }
};

// Linear warmup shared by every schedule: lr x (step + 1) / warmup for the first `warmup` steps.
inline double warmup_factor(int64_t step, int64_t warmup) {
  return step < warmup ? static_cast<double>(step + 1) / static_cast<double>(warmup) : 1.0;
}

}  // namespace kiln
