// The cooldown branch an asha sweep scores a rung by (rung_cooldown): a run paused at rung step
// S, its schedule still in its stable phase, trains N more steps with the learning rate decayed
// as a run of S + N steps decays it (the schedule's answer: core/api/schedule.h's
// ScheduleCooldown), and is evaluated there. Those N steps are what a straight run of S + N steps
// trains after its step S, bit for bit; the branch is thrown away (its trajectory is never
// snapshotted), and the run goes on from its rung snapshot un-cooled.
#pragma once

#include <cstdint>
#include <memory>

#include "core/api/schedule.h"
#include "core/config/config.h"

namespace kiln {

// The branch's schedule, from the run's config and its optimizer's lr, as the run's schedule
// answers it. A UserError naming the fix when that schedule has no stable phase, or its own decay
// has begun by step S (the branch would restart a decay already under way).
std::shared_ptr<Schedule> cooldown_schedule(const ResolvedConfig& config, double base_lr,
                                            int64_t from_step, int64_t steps);

}  // namespace kiln
