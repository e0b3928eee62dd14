// What a run ran with beyond its config (table run_environment, migration 14): the values its
// config left to the machine, which change its numbers while its config hash stays the same.
// "threads" (run.threads = 0 takes the usable CPUs at the start) and "precision" (what
// precision "auto" chose: "bf16"; the type's own name otherwise). Written when a run starts and
// again at each resume (the latest values win); `runs show`, `runs diff` and `runs compare`
// print them, and compare names the ones that differ between runs of one config hash.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/store/db/connection.h"

namespace kiln {

using RunEnvironment = std::map<std::string, std::string>;

// Inside the caller's transaction, or its own statement's; a key already there is replaced.
void write_run_environment(Connection& db, int64_t run_id, const RunEnvironment& environment);
// Empty for a run that recorded none, or a store older than migration 14.
RunEnvironment read_run_environment(Connection& db, int64_t run_id);
// "threads 2 vs 1, precision bf16 vs fp32": the keys whose values differ between `a` and `b`
// (a key only one has counts, as "-"); "" when none does.
std::string environment_differences(const RunEnvironment& a, const RunEnvironment& b);

}  // namespace kiln
