// Sweeps handed to a cluster's scheduler (`kiln sweep --launcher slurm`): the sweep and each of
// its members are recorded before any job is submitted, so that an array task on any node that
// sees the run store finds its member by its task index, and `kiln sweep status|cancel|resubmit`
// work from any shell, long after the one that submitted is gone. A member has no status column
// of its own: it is its run's (runs.status) once the run exists and `pending` before, so the two
// can never disagree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/store/runs/writer.h"

namespace kiln {

// Migration 7 of the run store (core/store/runs/writer.cpp applies it): the tables below.
extern const char* const kSweepTablesSql;

struct SweepRecord {
  std::string name;
  std::string launcher;                     // "slurm"
  std::string base;                         // the experiment every member starts from, absolute
  std::vector<std::string> settings;        // --set values every member gets after its own
  std::vector<std::string> scheduler_args;  // the job's options (sbatch's), each one argument
  int64_t max_parallel = 0;                 // members running at once; 0: no limit
  std::string folder;                       // where its job script and job logs are, absolute
  std::vector<std::string> job_ids;         // every submission, oldest first
  // A search (asha): its sweep file, absolute, which each array task reads to work on the
  // search as a worker (core/app/slurm/worker.h); "" for a sweep of listed members.
  std::string spec_file;
};

struct SweepMemberRecord {
  int64_t task = 0;  // its index in the job array
  std::string name;
  std::vector<std::string> overrides;  // its --set values, in order
};

// The sweep and its members in one transaction; a UserError when the store has a sweep of this
// name already, or a value holds a line break (one value a line is how they are kept).
void record_sweep(RunStore& store, const SweepRecord& sweep,
                  const std::vector<SweepMemberRecord>& members);
// Removes what record_sweep wrote (a submission the scheduler refused).
void forget_sweep(RunStore& store, const std::string& name);
std::optional<SweepRecord> find_sweep(RunStore& store, const std::string& name);
// find_sweep, or a UserError naming the store and how to see what it holds.
SweepRecord require_sweep(RunStore& store, const std::string& name);
// The sweep's members by task index.
std::vector<SweepMemberRecord> sweep_members(RunStore& store, const std::string& name);
void add_sweep_job(RunStore& store, const std::string& name, const std::string& job_id);

}  // namespace kiln
