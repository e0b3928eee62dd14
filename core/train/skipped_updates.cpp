#include "core/train/skipped_updates.h"

#include <cmath>

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

std::string nonfinite_step_line(const StepStats& stats, bool abort, const std::string& run_name,
                                int64_t last_snapshot) {
  const std::string what = fmt::format(
      "step {}: the gradients are not finite (norm {}, loss {}), so the update was not applied",
      stats.step, std::fabs(stats.grad_norm), std::fabs(stats.loss));  // "nan", not "-nan"
  if (!abort) return what + " (train.on_nonfinite = \"skip\")";
  const std::string from = last_snapshot > 0
                               ? fmt::format("its last snapshot (step {})", last_snapshot)
                               : std::string("step 0 (it has no snapshot)");
  throw DivergedError(fmt::format(
      "{} and the run stopped (train.on_nonfinite = \"abort\"): `kiln resume {}` continues "
      "from {}; add --set train.on_nonfinite=skip to step over such batches, or start again "
      "with a lower optimizer.lr or a train.grad_clip",
      what, run_name, from));
}

void require_an_applied_update(const UpdateCount& updates) {
  if (updates.steps == 0 || updates.skipped < updates.steps) return;
  throw DivergedError(fmt::format(
      "none of the run's {} updates was applied: every step's gradients were inf or NaN, so "
      "each update was skipped and the weights are still the initial ones: start it again "
      "(--restart) with a lower optimizer.lr or a train.grad_clip",
      updates.steps));
}

std::string skipped_updates_note(const UpdateCount& updates) {
  if (updates.skipped <= 0) return "";
  return fmt::format(" | {} of {} updates skipped", updates.skipped, updates.steps);
}

std::optional<std::string> mostly_skipped_warning(const UpdateCount& updates,
                                                  const std::string& run_name) {
  if (2 * updates.skipped <= updates.steps) return std::nullopt;
  return fmt::format(
      "warning: most of the run's updates were skipped ({} of {}: their gradients were not "
      "finite), so its weights learned from only {} batches; `kiln runs show {}` counts them",
      updates.skipped, updates.steps, updates.steps - updates.skipped, run_name);
}

}  // namespace kiln
