// Kiln's SQL, written for SQLite, in PostgreSQL's dialect: every difference between the two
// lives here (core/store/db/postgres.h runs the translated statements). Only our SQL text passes
// through here, never a value. No libpq, no LibTorch.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace kiln {

// `sql` in PostgreSQL's dialect: `?` and `?N` become `$n`, SQLite's phrases (INSERT OR
// REPLACE/IGNORE, strftime('...', 'now'), julianday, GLOB, pragma_table_info, sqlite_master)
// their PostgreSQL equivalents. No query orders by SQLite's rowid: PostgreSQL has no insertion
// order to stand for it (its ctid moves with updates, deletes and VACUUM), so every ordered
// read orders by key columns. `primary_key(table)` gives the columns INSERT OR REPLACE
// conflicts on; `glob_params` receives, per `$n`, whether its value is a glob to compile.
using PrimaryKeyOf = std::function<std::vector<std::string>(const std::string& table)>;
std::string postgres_sql(const std::string& sql, const PrimaryKeyOf& primary_key,
                         std::vector<bool>& glob_params);
// A migration's SQLite DDL in PostgreSQL's types (BIGINT, DOUBLE PRECISION, JSONB config).
std::string postgres_migration(const std::string& sqlite_sql);
// SQLite's GLOB pattern (* ? [...] [^...]) as an anchored POSIX regular expression.
std::string glob_to_regex(const std::string& glob);

}  // namespace kiln
