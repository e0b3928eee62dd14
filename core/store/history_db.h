// The read side of the run store: a connection for `kiln runs ...`, `kiln report` and the sweep
// summary (core/store/run_queries.h holds what they ask it). No LibTorch.
#pragma once

#include <string>

#include "core/store/sqlite.h"

namespace kiln {

// A connection to an existing run store; it never creates one (a mistyped --db is an error, not a
// new empty file). It registers the SQL function kiln_config(config, 'section.key'): the typed
// value of a resolved-config key (integer, real, text, 1/0 for a bool), NULL when absent.
class HistoryDb {
 public:
  explicit HistoryDb(const std::string& path);

  Connection& connection() { return db_; }
  const std::string& path() const { return db_.path(); }
  // runs.sweep arrives with the sweep runner's migration; older stores show no sweep.
  bool has_sweep_column() const { return has_sweep_; }

 private:
  Connection db_;
  bool has_sweep_ = false;
};

}  // namespace kiln
