// A run's own row of `runs` written (core/store/runs/lookup.h reads it): a new run under an id no
// run of the store ever had, even one since removed; a resumed run made current again, its rows
// after the resume's step dropped; a run's end. Each runs inside the caller's transaction;
// RunStore (core/store/runs/writer.h) writes runs through these.
#pragma once

#include <cstdint>
#include <string>

#include "core/store/db/connection.h"
#include "core/store/runs/rows.h"

namespace kiln {

// The run's row and its config hash's; returns its id. The caller has checked that the name is
// free (run names are unique).
int64_t insert_run(Connection& db, const NewRun& run);

// What a resume changes in its run's row.
struct RunResume {
  int64_t from_step = 0;                 // rows after it are re-done, so the old ones go
  std::string changes;                   // recorded with the resume
  std::string config_toml, config_hash;  // the (possibly changed) config
  int64_t planned_steps = 0;
  int64_t world_size = 1;  // the ranks it now runs at
};
// The run running again under the resume's config, its later rows gone, the resume recorded.
void resume_run_row(Connection& db, int64_t run_id, const RunResume& resume);

// The run's status and error (empty: none) with the time it finished.
void finish_run_row(Connection& db, int64_t run_id, const std::string& status,
                    const std::string& error);

}  // namespace kiln
