// The eval policy: when a run measures its validation loss, and whether it closes with a pass
// over the test split. The session's loop asks it; the answers follow from [eval] alone.
#pragma once

#include <cstdint>

#include "core/config/options.h"

namespace kiln {

class EvalPolicy {
 public:
  // `total_steps`: train.steps, whose step is always evaluated when eval.every > 0; so is
  // `pause_at`, the step a session pauses after (`--until`; 0: none), which a sweep ranks by.
  EvalPolicy(const EvalOptions& options, int64_t total_steps, int64_t pause_at = 0)
      : options_(options), total_steps_(total_steps), pause_at_(pause_at) {}

  // Evaluate now? After every eval.every-th step and the last one; never when it is 0.
  bool due(int64_t step) const {
    return options_.every > 0 && (step % options_.every == 0 || last(step));
  }
  // Score eval.tasks now? After every eval.task_every-th step (or when due() says so, for
  // task_every = 0) and the last one, even with eval.every = 0 (a run that names tasks wants
  // their scores); never without tasks.
  bool tasks_due(int64_t step) const {
    if (options_.tasks.empty()) return false;
    if (last(step)) return true;
    return options_.task_every == 0 ? due(step) : step % options_.task_every == 0;
  }
  // The closing test pass (eval.final_test): only after a run that completed, not one that was
  // interrupted. The data may still have no test split.
  bool final_test(bool completed) const { return completed && options_.final_test; }

 private:
  bool last(int64_t step) const { return step == total_steps_ || step == pause_at_; }

  EvalOptions options_;
  int64_t total_steps_;
  int64_t pause_at_;
};

}  // namespace kiln
