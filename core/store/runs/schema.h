// The run store's schema: the migrations that build it, each moving a store one version up, and
// what a command says of a store whose schema is newer than this kiln's. Separate from the writer
// (core/store/runs/writer.h, which includes this file) because the schema is a long list of SQL
// text that changes only by growing, and the read side (core/store/history/reader.h) asks only
// for its version. The schema is documented in docs/run-store.md ("The schema").
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

// The schema this kiln writes: the PRAGMA user_version of a store with all its migrations.
int64_t known_schema_version();
// "run store 'PATH' has a newer schema (version V) than this kiln understands (K)": every
// command that writes refuses such a store, those that only read warn and go on.
std::string newer_schema_line(const std::string& path, int64_t version);

}  // namespace kiln
