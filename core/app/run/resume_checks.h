// What a resume checks before the run's row changes: how a new train.steps moves the learning
// rate at the resume step, and whether the files the run reads are those it trained on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/app/run/run_command.h"  // ScheduleOnResume
#include "core/config/config.h"
#include "core/store/db/connection.h"
#include "core/store/runs/inputs.h"
#include "core/store/runs/lookup.h"
#include "core/train/assemble.h"

namespace kiln {

// For a resume that changed train.steps: the line that gives the lr of the next update as the
// run planned it and as it will be ("" when train.steps is unchanged); a UserError, before the
// run's row changes, when the two differ by over 1% and `mode` is the default (else the lr can
// jump, say from 6.6e-4 to 3.9e-3, at the resume step without a word).
std::string check_schedule_change(const ResolvedConfig& stored, const AssembledRun& run,
                                  int64_t from_step, ScheduleOnResume mode);

// Points `config` at the files the run's record names (so that a resume works from any
// directory) and compares them with their fingerprints. A difference is a UserError, before
// anything is built, or with `allow_change` one more entry of `changes` (else a resume after
// re-preparing the data would train on other data without a word). Returns the inputs as
// they are now, which the resume records: a run made before Kiln recorded them gets its
// record here, from the directory it resumes in.
std::vector<RunInput> check_inputs(Connection& db, const RunRecord& record, ResolvedConfig& config,
                                   bool allow_change, std::vector<std::string>& changes);

}  // namespace kiln
