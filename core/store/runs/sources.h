// Where a run's config came from, kept beside it in the run store: the files its experiment was
// read from (the experiment file and those it extends, with their SHA-256, in the order applied),
// where each resolved key's value came from (a file's line, a --set, a default), and the files
// its config names (core/store/runs/inputs.h). RunStore writes them with the run (tables run_files,
// run_key_sources, run_inputs); `kiln runs show` and `kiln runs diff` read them back. A run made
// before them, or a store not upgraded yet, has none.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/store/db/connection.h"
#include "core/store/runs/inputs.h"

namespace kiln {

struct RunProvenance {
  std::vector<ConfigFile> files;                   // in the order applied
  std::map<std::string, std::string> key_sources;  // "train.steps" -> KeySource::str()
  std::vector<RunInput> inputs;
};

// "section.key" -> KeySource::str() for the keys of `config`: all of them, or (`all` false) only
// those a --set or a default gave their value, which is what a resume may change (its other keys
// keep the sources of the run's start).
std::map<std::string, std::string> key_source_lines(const ResolvedConfig& config, bool all);
// All of it, the inputs fingerprinted now (inputs_of).
RunProvenance provenance_of(const ResolvedConfig& config);

// Inside the caller's write transaction: the files (replacing those at the same positions), the
// keys' sources and the inputs (replacing those of the same keys).
void write_provenance(Connection& db, int64_t run_id, const RunProvenance& provenance);

// What write_provenance wrote for the run; empty when nothing was (see above).
std::vector<ConfigFile> read_run_files(Connection& db, int64_t run_id);
std::map<std::string, std::string> read_key_sources(Connection& db, int64_t run_id);

}  // namespace kiln
