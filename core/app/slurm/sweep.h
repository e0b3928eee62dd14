// Sweeps on a Slurm cluster, fire and forget: `kiln sweep SWEEP --launcher slurm` checks every
// member as the local runner does, records the sweep and its members in the run store
// (core/store/runs/sweep_records.h), writes one sbatch script, a job array of one task per member
// (core/app/slurm/sbatch.h), submits it and exits. Each task runs `kiln sweep task`
// (core/app/slurm/task.h), which finds its member in the store. status, cancel and resubmit read
// the store and ask Slurm, so they work from any host that sees the store, whenever.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/app/slurm/sbatch.h"
#include "core/app/sweeps/spec.h"

namespace kiln {

using PrintLine = std::function<void(const std::string&)>;

// Submits the sweep; `db` empty: the base experiment's run.db. A UserError, with nothing left
// in the store, when sbatch is missing or refuses the job, or the sweep name was submitted to
// this store before.
void submit_sweep(const SweepSpec& spec, const SlurmOptions& slurm, const std::string& db,
                  const PrintLine& print);
// `kiln run EXPERIMENT --launcher slurm`: the run, its config loaded and (for one rank) assembled
// without training as `kiln check` does, submitted as a sweep of one member of its name
// (`overrides` are its --set values; its store is its run.db; no run.name: `kiln run`'s default,
// fixed now), so that `kiln sweep status|cancel|resubmit NAME` follow it. A UserError, with nothing
// left in the store, when the config does not assemble, sbatch is missing or refuses the job, or
// the store holds a run or a sweep of that name.
void submit_run(const std::string& experiment, std::vector<std::string> overrides,
                const SlurmOptions& slurm, const PrintLine& print);
// One row per member: its task, name, state in the store (pending before its run exists), its
// array task's state in Slurm, steps done and final loss.
void print_sweep_status(const std::string& db, const std::string& name, const PrintLine& print);
// scancel of the sweep's jobs that still have tasks pending or running: a running member
// snapshots and is left interrupted.
void cancel_sweep(const std::string& db, const std::string& name, const PrintLine& print);
// Submits the members that are neither completed nor still queued, as a new job array of the
// same options.
void resubmit_sweep(const std::string& db, const std::string& name, const PrintLine& print);

}  // namespace kiln
