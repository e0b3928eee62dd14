// Where config values came from, as `kiln config`, `kiln runs show` and `kiln runs diff` print
// it: a loaded config's key sources and files (core/config/config.h), or a run's as the run store
// kept them (core/store/runs/sources.h). A run that kept none shows its sources as "unknown".
#pragma once

#include <cstdint>
#include <string>

#include "core/config/config.h"
#include "core/store/history/queries.h"
#include "core/util/table.h"

namespace kiln {

// `kiln config`: the resolved config as TOML that loads again to the same config, each key
// followed by a comment saying where its value came from (file:line, --set, default (plugin P),
// default), under a header naming the config hash and the files read, with their SHA-256.
std::string describe_config(const ResolvedConfig& config);

// The files a run's config was read from, in the order applied, with their SHA-256; no rows
// when the store kept none for it.
Table run_files_table(HistoryDb& db, int64_t run_id);
// The files the run reads (core/store/runs/inputs.h): each key's value as given, where the run
// reads it, and how many files of how many bytes it matched; no rows for a run made before.
Table run_inputs_table(HistoryDb& db, int64_t run_id);

// `kiln runs diff A B`: the resolved config keys whose values differ (run.name left out), with
// each run's value and where it came from.
std::string diff_report(HistoryDb& db, const RunRecord& a, const RunRecord& b);

}  // namespace kiln
