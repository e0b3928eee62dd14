// Learning-rate schedules: a pure function of the step, so a resumed run gets the same value
// for the same step without any saved state.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

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

// Linear warmup shared by every schedule: lr x (step + 1) / warmup for the first `warmup` steps.
inline double warmup_factor(int64_t step, int64_t warmup) {
  return step < warmup ? static_cast<double>(step + 1) / static_cast<double>(warmup) : 1.0;
}

}  // namespace kiln
