// The cooldown branch an asha sweep scores a rung by (rung_cooldown): a run paused at rung step
// S, with a wsd schedule still in its stable phase, trains N more steps with the learning rate
// decayed as a wsd run ending at S + N decays it (the same warmup, shape and floor, its decay N
// steps long), and is evaluated there. Those N steps are what a straight wsd run of S + N steps
// trains after its step S, bit for bit; the branch is thrown away (its trajectory is never
// snapshotted), and the run goes on from its rung snapshot un-cooled.
#pragma once

#include <cstdint>
#include <memory>

#include "core/api/schedule.h"
#include "core/config/config.h"

namespace kiln {

// The branch's schedule, from the run's config and its optimizer's lr: wsd over S + N steps with
// decay_fraction N / (S + N). A UserError naming the fix when the run's schedule is not wsd, or
// its own decay has begun by step S (the branch would restart a decay already under way).
std::shared_ptr<Schedule> cooldown_schedule(const ResolvedConfig& config, double base_lr,
                                            int64_t from_step, int64_t steps);

}  // namespace kiln
