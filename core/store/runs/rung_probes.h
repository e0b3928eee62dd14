// Cooldown probes of an asha sweep's rungs (table rung_probes, migration 15): when a member
// paused at a rung step S, a branch of it trained N more steps with its wsd schedule's decay
// ending there (core/train/cooldown_probe.h) and was evaluated; the branch is thrown away, and its
// validation loss is the member's score at that rung, free of short-horizon bias (a run compared
// mid-schedule, at a high learning rate, favours small learning rates). The ladder reads a probe
// where one exists and the trajectory's own value elsewhere.
#pragma once

#include <cstdint>
#include <map>

#include "core/store/db/connection.h"

namespace kiln {

struct RungProbe {
  int64_t steps = 0;  // N: the cooldown's steps, trained and thrown away
  double val_loss = 0;
};

// Replaces the probe at (run_id, step), in its own statement.
void write_rung_probe(Connection& db, int64_t run_id, int64_t step, const RungProbe& probe);
// The run's probes by rung step; none on a store older than migration 15.
std::map<int64_t, RungProbe> read_rung_probes(Connection& db, int64_t run_id);

}  // namespace kiln
