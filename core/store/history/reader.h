// The read side of the run store: a connection for `kiln runs ...`, `kiln report` and the sweep
// summary (core/store/history/queries.h holds what they ask it). No LibTorch.
// It opens the store read-only, so a store on a read-only disk, or in a folder this user may not
// write, can still be listed and shown; and it reads a store of a newer schema than this kiln
// knows, with a warning. What deletes (`kiln runs rm`) asks for_writing(), which refuses both.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/store/db/connection.h"
#include "core/store/runs/lookup.h"

namespace kiln {

// A connection to an existing run store; it never creates one (a mistyped --db is an error, not a
// new empty file). It registers the SQL function kiln_config(config, 'section.key'): the typed
// value of a resolved-config key (integer, real, text, 1/0 for a bool), NULL when absent.
class HistoryDb {
 public:
  explicit HistoryDb(const std::string& path);
  ~HistoryDb();

  // Read-only.
  Connection& connection() { return db_; }
  // A second connection that may write; a UserError when the store's schema is newer than this
  // kiln's (newer_schema_line) or the store is read-only.
  Connection& for_writing();
  const std::string& path() const { return db_.path(); }
  // The columns of `runs` this store has (it is read without upgrading it: an older store lacks
  // runs.sweep and the run identities' columns, core/store/runs/lookup.h). metrics.skipped
  // arrives with runs.sweep, in the sweep runner's migration (schema version 2).
  const RunColumns& columns() const { return columns_; }
  bool has_skipped_column() const { return schema_version_ >= 2; }
  // For the command to print before its output: the store's schema is newer than this kiln's.
  // Empty when it is not.
  const std::string& warning() const { return warning_; }

 private:
  Connection db_;
  std::unique_ptr<Connection> writer_;
  RunColumns columns_;
  int64_t schema_version_ = 0;
  std::string warning_;
};

}  // namespace kiln
