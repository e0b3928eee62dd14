// Steps whose update was not applied because their gradients were not finite (the Trainer skips
// them, core/train/trainer.h): what a session says of them and when they end a run. One such step
// stops the run or is stepped over, as train.on_nonfinite says; a run none of whose updates was
// applied fails; one that skipped most of them is warned about when it closes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/store/runs/lookup.h"
#include "core/train/step_telemetry.h"

namespace kiln {

// A step whose gradients were not finite (StepStats::nonfinite): with train.on_nonfinite = "skip"
// (`abort` false) the line that says its update was skipped; with "abort", a DivergedError naming
// where `kiln resume <run_name>` continues (`last_snapshot`: that snapshot's step, 0 for none).
std::string nonfinite_step_line(const StepStats& stats, bool abort, const std::string& run_name,
                                int64_t last_snapshot);

// A run whose every update was skipped trained nothing: a DivergedError, rather than end
// `completed` with the weights it started with.
void require_an_applied_update(const UpdateCount& updates);

// The closing line's note: " | k of n updates skipped", or empty when none was.
std::string skipped_updates_note(const UpdateCount& updates);

// The closing warning when most of the run's updates were skipped; nullopt otherwise.
std::optional<std::string> mostly_skipped_warning(const UpdateCount& updates,
                                                  const std::string& run_name);

}  // namespace kiln
