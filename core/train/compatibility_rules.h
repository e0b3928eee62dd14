// The rules by which plugins and settings refuse one another: a parallel strategy and the
// optimizer, the model or the precision; the data's loss mask and a pipeline or a captured CUDA
// graph; pinned batches and the device; an evaluation and the splits or the strategy. Each rule
// is a named function that returns its refusal, one line for the user (what, where as the key's
// file:line:col or `--set`, how to fix it), or nothing when the run may go on. assemble()
// (assemble.h) walks the list at each point of assembly where the parts a rule reads exist, so
// that a run is refused before its model is built and its weights and data are read where it
// can be, and every rank refuses alike.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/data/task_file.h"
#include "core/train/assemble.h"

namespace kiln {

// The point of assembly a rule is checked at: the parts it reads are built by then.
enum class AssemblyPoint {
  kPlanned,     // the parallel strategy, the step's batch and the model's plan
  kPrecision,   // and the adapter and the precision policy
  kScheduled,   // and the optimizer and the schedule (the model too, unless Assembly::kCheck)
  kTrainSplit,  // and the train split
  kSplits,      // and the validation and test splits
  kTasksRead,   // and eval.tasks read (the tasks a rule is given)
};

struct CompatibilityRule {
  std::string name;
  AssemblyPoint point;
  // The refusal of `run`, with the tasks read at kTasksRead (none before); nothing when it may go
  // on.
  std::optional<std::string> (*refusal)(const AssembledRun& run, const std::vector<Task>& tasks);
};

// Every rule, in the order assemble() checks them.
const std::vector<CompatibilityRule>& compatibility_rules();

// A UserError with the refusal of the first rule of `point` that refuses `run`.
void check_compatibility(const AssembledRun& run, AssemblyPoint point,
                         const std::vector<Task>& tasks = {});

}  // namespace kiln
