// `--until` and `--probe-cooldown`, as `kiln run` and `kiln resume` take them: where a run may
// pause (Session::pause_after), the cooldown branch scored there (Session::probe_cooldown), and
// the probe taken alone by a run stopped during it. Kept apart from
// core/app/run/run_command.cpp, which creates and reopens runs, because both commands check and
// end a pause the same way.
#pragma once

#include <cstdint>

#include "core/train/session_outcome.h"

namespace kiln {

struct AssembledRun;
struct RunRecord;
class RunStore;
class Session;

// --until `step` lies after the step the run starts from and before train.steps: where a
// session can pause (Session::pause_after).
void check_pause_step(int64_t step, int64_t start_step, int64_t total_steps);

// --probe-cooldown: only where a run pauses, and only of a schedule it can branch there.
void check_probe(const AssembledRun& run, int64_t until, int64_t probe_steps);

// train(), then, paused with a probe asked for, the cooldown branch.
SessionOutcome train_then_probe(Session& session, int64_t probe_steps);

// --until at the snapshot's own step, with a probe (a run stopped during it): the probe alone,
// then the row is interrupted there again, as its pause left it; failed by an error.
SessionOutcome probe_alone(Session& session, RunStore* store, const RunRecord& run, int64_t step,
                           int64_t probe_steps);

}  // namespace kiln
