#include "core/train/console.h"

#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/train/trainer.h"
#include "core/util/text.h"

namespace kiln {

void Console::line(const std::string& text) const {
  std::fputs((text + "\n").c_str(), stdout);
  std::fflush(stdout);
}

void Console::legend(bool masked_loss) const {
  line(
      "columns: loss = mean cross-entropy of the step's tokens (nats/token) | lr = learning rate "
      "of this update | norm = global gradient L2 norm before clipping | ms = wall time of the "
      "step | tok/s = tokens per second over all ranks | % done and ETA from the recent mean "
      "step time");
  if (!masked_loss) return;
  line(
      "the loss counts only the targets the data marks (response tokens; no prediction across "
      "packed documents): loss = mean over the step's counted tokens | "
      "counted = how many (all ranks) | tok/s counts every token the model ran, padding "
      "included");
}

void Console::step(const StepStats& s, bool print) {
  // The first step pays for allocator warm-up, so it does not seed the average.
  seen_ += 1;
  if (seen_ == 2) mean_step_ms_ = s.dt_ms;
  if (seen_ > 2) mean_step_ms_ = 0.9 * mean_step_ms_ + 0.1 * s.dt_ms;
  if (!print) return;
  line(format_step(s));
  // "  pipeline: stage compute 10.1 | 9.7 ms, bubble 38%, live micro-batches 2 | 1": each stage's
  // forward and backward time in the step, the share of the stages' pass time spent waiting,
  // and the most micro-batches whose activations each stage held at once.
  if (s.bubble) {
    line(fmt::format("  pipeline: stage compute {:.1f} ms, bubble {:.0f}%, live micro-batches {}",
                     fmt::join(s.stage_compute_ms, " | "), 100 * *s.bubble,
                     fmt::join(s.stage_peak_live, " | ")));
  }
}

std::string Console::format_step(const StepStats& s) const {
  const double remaining = static_cast<double>(total_steps_ - s.step);
  const double eta_ms = (seen_ >= 2 ? mean_step_ms_ : s.dt_ms) * remaining;
  const int width = static_cast<int>(std::to_string(total_steps_).size());
  return fmt::format(
      "step {:>{}}/{} | loss {:.6f} | lr {:.3e} | norm {:.4f} | {:7.1f} ms | {:8.0f} tok/s | "
      "{:3.0f}% eta {}{}{}",
      s.step, width, total_steps_, s.loss, s.lr, s.grad_norm, s.dt_ms, s.tokens_per_sec,
      100.0 * static_cast<double>(s.step) / static_cast<double>(total_steps_),
      format_duration(eta_ms / 1000.0), s.skipped ? " | update skipped" : "",
      s.counted_tokens > 0 ? fmt::format(" | {} counted", s.counted_tokens) : "");
}

void Console::eval(int64_t step, const std::string& split, double loss, int64_t counted) const {
  line(fmt::format("eval step {} | {} loss {:.6f} | perplexity {:.3f}{}", step, split, loss,
                   std::exp(loss),
                   counted > 0 ? fmt::format(" | over {} counted tokens", counted) : ""));
}

}  // namespace kiln
