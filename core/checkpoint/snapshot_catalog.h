// Which snapshots in a run's snapshots folder are the run's own, which of them a command loads,
// and which pruning deletes. A snapshot's manifest.json names the run (its uuid) and the config
// hash it was taken with (core/checkpoint/snapshot.h). One that names another run, or a hash the
// run never had, or no run at all (except the snapshots the run store lists for a run made
// before run identities) is never loaded and never deleted: it is named once, and passed over.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/checkpoint/snapshot.h"

namespace kiln {

// What makes a snapshot a run's own.
struct SnapshotOwner {
  std::string run_uuid;
  std::vector<std::string> config_hashes;  // every config hash the run has had
  // A run made before run identities: its older snapshots name no run, and those among them
  // that the run store lists (`recorded`) are its own.
  bool legacy = false;
  std::vector<std::string> recorded;  // labels of the run's snapshots rows
};

struct RunSnapshots {
  // The owner's, oldest first, and those whose manifest cannot be read: verify_snapshot reports
  // such a one as damaged, so it is never loaded either.
  std::vector<SnapshotRef> own;
  // One line for each of the others: "snapshot 'PATH' ...: skipped".
  std::vector<std::string> foreign;
};
RunSnapshots owned_snapshots(const std::string& dir, const SnapshotOwner& owner);

// Picks one of `snapshots.own` by "latest", "best" or a step number; for "latest", damaged
// snapshots are skipped, and a run with best snapshots only gets its newest best one (said
// through `warn`). What was skipped (foreign, damaged) is said through `warn` once one is
// picked, or in the UserError when none qualifies.
SnapshotRef select_snapshot(const RunSnapshots& snapshots, const std::string& dir,
                            const std::string& which,
                            const std::function<void(const std::string&)>& warn);

// Deletes all but the newest `keep` regular snapshots of the owner's and all but the newest best
// one; returns those it deleted.
std::vector<SnapshotRef> prune_snapshots(const std::string& dir, int64_t keep,
                                         const SnapshotOwner& owner);

}  // namespace kiln
