// What a run prints: a header that says what every number means, one line per step (or every
// train.log_every steps) with progress and ETA, eval lines and a closing summary.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

struct StepStats;

class Console {
 public:
  explicit Console(int64_t total_steps) : total_steps_(total_steps) {}

  void line(const std::string& text) const;
  // masked_loss: the data's loss counts only some tokens (fine-tuning on responses).
  void legend(bool masked_loss) const;
  // Counts the step for the ETA; prints its line (and a pipeline's stage line) when `print`.
  void step(const StepStats& stats, bool print);
  std::string format_step(const StepStats& stats) const;
  // counted: with masked data, the targets the loss averaged (said on the line); else 0.
  void eval(int64_t step, const std::string& split, double loss, int64_t counted) const;

 private:
  int64_t total_steps_;
  double mean_step_ms_ = 0;  // exponential moving average, for the ETA
  int64_t seen_ = 0;
};

}  // namespace kiln
