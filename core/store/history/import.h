// `kiln runs import SRC --db DST`: every run of one store copied into another, SQLite or
// PostgreSQL either way, with its metrics, evals, snapshots rows, resumes, config hashes and
// provenance, so that nodes that wrote to a local file (or a run that lost its server,
// core/store/runs/writer.h) merge into the shared store later. No LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct ImportedRun {
  std::string from, to;  // its name in the source, and in the target (--rename may change it)
  int64_t metrics = 0, evals = 0;  // the rows added
  bool merged = false;             // into the same run (its uuid), there already
  std::string warning;             // why its folder's marker could not name the target too
};

// A UserError, before anything is written, when a source run's name is taken in the target by
// another run (unless `rename`: it becomes NAME-2, NAME-3, ...). The same run (its uuid) in the
// target already is merged: only the metrics, evals and snapshots rows it lacks are added, and
// the run's end where the target has the run still running. A run whose copy fails midway is
// removed from the target again.
std::vector<ImportedRun> import_runs(const std::string& source, const std::string& target,
                                     bool rename);

}  // namespace kiln
