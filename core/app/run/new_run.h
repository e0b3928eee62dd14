// What `kiln run` does for a new run before it trains: a default name, the way cleared for a
// name in use (or a refusal), the run's identity, and its folder's marker and row in the run
// store. Kept apart from core/app/run/run_command.cpp, which runs and resumes runs, because these
// steps concern the run store and the run's folder only, and are taken by rank 0 of a new run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct AssembledRun;
class RunPaths;
class RunStore;

// The experiment file's name and the UTC time: "kjv_char-20240501-120000".
std::string default_run_name(const std::string& experiment);

// Rank 0 of a new run: a name in use is refused unless `restart`, which removes that run as
// `kiln runs rm` does (its folder only when marked as its own). Returns what the removal left.
std::vector<std::string> make_way(RunStore& store, const std::string& name, bool restart);

// The new run's identity: the one its sweep chose (kChosenRunUuid, so that the member's
// console.log is in its folder from the first line), or a fresh one whose folder is not taken.
std::string new_identity(const std::string& out_dir, const std::string& name);

// Rank 0 of a new run: one line on stderr when its adapter trains over no model.init_from, the
// model's random initialisation, so that an export of the adapter names a base no other tool can
// load.
void warn_of_random_base(const AssembledRun& run);

// Rank 0 of a new run, holding its folder's lock: the folder's marker and the run's row.
// Returns the new run's id.
int64_t create_run_row(RunStore& store, const AssembledRun& run, const RunPaths& paths,
                       const std::string& uuid);

}  // namespace kiln
