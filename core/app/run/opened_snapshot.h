// A run's snapshot opened for one of the snapshot commands (core/app/run/from_snapshot.h):
// the store checked, the run rebuilt from its stored config with its files where it read them,
// and the chosen snapshot's weights loaded into its model. Kept apart from
// core/app/run/from_snapshot.cpp because every command opens a snapshot the same way, and
// the commands themselves read better without it.
#pragma once

#include <string>
#include <vector>

#include "core/app/run/from_snapshot.h"
#include "core/checkpoint/snapshot.h"
#include "core/store/db/connection.h"
#include "core/store/runs/inputs.h"
#include "core/store/runs/lookup.h"
#include "core/train/assemble.h"

namespace kiln {

struct OpenedSnapshot {
  RunRecord info;
  AssembledRun run;
  SnapshotRef snapshot;
  SnapshotState state;
  std::vector<RunInput> inputs;  // the record of the files the run read (core/store/runs/inputs.h)
};

// The store a snapshot command reads, checked first: opening a path that is not one would create
// an empty one.
void require_store_file(const std::string& db);

// A thread count (SnapshotRequest::threads) as the `--set` that gives it to a config: none for 0.
std::vector<std::string> threads_override(int64_t threads);

// Reads only: `db` is the store's read-only connection for sample and export, the writer's for
// eval (which records a row).
OpenedSnapshot open_snapshot(const SnapshotRequest& request, Connection& db,
                             const RunColumns& columns, Assembly mode);

// For the commands that only read the store (sample, export): a read-only connection, so a
// read-only store or one from a newer kiln (with a warning) still serves them.
OpenedSnapshot open_snapshot_read_only(const SnapshotRequest& request, Assembly mode);

// Which snapshot a command used; said once the command's own checks passed, so that a command
// that fails prints its one error line and nothing else.
void announce(const SnapshotRequest& request, const OpenedSnapshot& opened);

}  // namespace kiln
