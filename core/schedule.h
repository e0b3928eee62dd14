// Learning-rate schedules: a pure function of the step, so a resumed run gets the same value
// for the same step without any saved state.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "core/registry.h"

namespace kiln {

class Schedule {
 public:
  virtual ~Schedule() = default;
  // Learning rate for the update with 0-based index `step` (db step `step + 1`).
  virtual double lr(int64_t step) const = 0;
};

struct ScheduleKind {
  static constexpr const char* name = "schedule";
  using Product = Schedule;
  // base_lr: the optimizer's configured lr; total_steps: train.steps.
  using Factory =
      std::function<std::shared_ptr<Schedule>(const Params&, double base_lr, int64_t total_steps)>;
};
using ScheduleRegistry = Registry<ScheduleKind>;

// Linear warmup shared by every schedule: lr x (step + 1) / warmup for the first `warmup` steps.
inline double warmup_factor(int64_t step, int64_t warmup) {
  return step < warmup ? static_cast<double>(step + 1) / static_cast<double>(warmup) : 1.0;
}

}  // namespace kiln
