// The files a run reads, kept beside it in the run store (else a resume from another
// directory, or after re-preparing the data, trains on other data without a word). For every
// key of its config that names files (ParamSpec::names_files: data.train, model.init_from, ...)
// and has a value: the value as given, its absolute form when the run was made, and a
// fingerprint of the files (core/util/file_fingerprint.h). resume, eval and sample read the
// files where the record says, from any directory; a resume compares the fingerprints with the
// files as they are now and refuses a change unless told otherwise (--allow-data-change).
// Tables run_inputs and run_input_files (docs/run-store.md, "The schema").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/store/db/connection.h"
#include "core/util/file_fingerprint.h"

namespace kiln {

struct RunInput {
  std::string key;       // "data.train"
  std::string given;     // the value as the config has it (what the hash covers)
  std::string resolved;  // the absolute path or glob the run reads
  std::vector<FileFingerprint> files;
};

// The inputs of `config` as they are now: each names_files key with a value, as
// Params::path resolves it, its files fingerprinted.
std::vector<RunInput> inputs_of(const ResolvedConfig& config);

// Inside the caller's write transaction: the record of each key in `inputs`, replacing the
// run's earlier one of that key.
void write_inputs(Connection& db, int64_t run_id, const std::vector<RunInput>& inputs);
// What write_inputs wrote for the run, by key; empty for a run made before Kiln recorded its
// inputs (its paths stay relative to the directory a command runs in).
std::vector<RunInput> read_inputs(Connection& db, int64_t run_id);

// Points every key of `config` that `recorded` holds, and whose value is still the one given
// then, at the files recorded for it.
void use_recorded_inputs(ResolvedConfig& config, const std::vector<RunInput>& recorded);

// One line per recorded input whose files differ from the record now, with `now` the same
// inputs fingerprinted again: "data.train (/abs/train_*.bin): train_000001.bin 4096 -> 8192
// bytes". Empty when none does.
std::vector<std::string> changed_inputs(const std::vector<RunInput>& recorded,
                                        const std::vector<RunInput>& now);

}  // namespace kiln
