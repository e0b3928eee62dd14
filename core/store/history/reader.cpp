#include "core/store/history/reader.h"

#include <sqlite3.h>

#include <chrono>
#include <string_view>

#include <fmt/format.h>

#include "core/config/toml_text.h"
#include "core/store/runs/writer.h"
#include "core/util/error.h"

namespace kiln {

namespace {

// The last config parsed. A filter on two keys, or a filter and a sort, look up the same run's
// config several times in a row, so one cached parse serves them all.
struct ConfigCache {
  std::string text;
  toml::table table;
};

void set_config_result(sqlite3_context* ctx, const toml::node_view<const toml::node>& node) {
  if (node.is_integer()) return sqlite3_result_int64(ctx, node.as_integer()->get());
  if (node.is_floating_point()) return sqlite3_result_double(ctx, node.as_floating_point()->get());
  if (node.is_boolean()) return sqlite3_result_int64(ctx, node.as_boolean()->get() ? 1 : 0);
  if (node.is_string()) {
    const std::string& s = node.as_string()->get();
    return sqlite3_result_text(ctx, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  sqlite3_result_null(ctx);
}

// kiln_config(config_text, 'section.key')
void kiln_config_function(sqlite3_context* ctx, int, sqlite3_value** argv) {
  auto* cache = static_cast<ConfigCache*>(sqlite3_user_data(ctx));
  auto* text = sqlite3_value_text(argv[0]);
  auto* key = sqlite3_value_text(argv[1]);
  if (!text || !key) return sqlite3_result_null(ctx);
  std::string_view config(reinterpret_cast<const char*>(text), sqlite3_value_bytes(argv[0]));
  if (config != cache->text) {
    cache->text = config;
    // Text Kiln did not write (a store edited by hand) has no keys to match.
    cache->table = try_parse_toml(cache->text).value_or(toml::table{});
  }
  const auto& table = cache->table;
  set_config_result(ctx, table.at_path(reinterpret_cast<const char*>(key)));
}

Connection open_existing(const std::string& path) {
  if (!store_may_exist(path)) {
    fail_no_store(path, "train a run first, or pass --db PATH");
  }
  return Connection(path, OpenMode::kReadOnly, "check its permissions");
}

}  // namespace

HistoryDb::HistoryDb(const std::string& path) : db_(open_existing(path)) {
  db_.set_failure_hint("is it a Kiln run store?");
  // A run being trained writes about once a second; readers wait for it rather than fail.
  db_.set_busy_timeout(std::chrono::seconds(30));
  schema_version_ = db_.schema_version();
  if (schema_version_ > known_schema_version()) {
    warning_ = newer_schema_line(path, schema_version_) +
               ": reading what this kiln knows of it; a newer kiln shows all of it";
  }
  Statement runs_table(db_, "SELECT count(*) FROM pragma_table_info('runs')");
  runs_table.step();
  if (runs_table.integer(0) == 0) {
    throw UserError(fmt::format(
        "'{}' is not a Kiln run store (it has no runs table): pass the run.db of your runs", path));
  }
  columns_ = run_columns(db_);
  // PostgreSQL has its own lookups of the config's jsonb copy (core/store/db/postgres_dialect.cpp).
  if (!db_.handle()) return;
  sqlite3_create_function_v2(db_.handle(), "kiln_config", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                             new ConfigCache, kiln_config_function, nullptr, nullptr,
                             [](void* cache) { delete static_cast<ConfigCache*>(cache); });
}

HistoryDb::~HistoryDb() = default;

Connection& HistoryDb::for_writing() {
  if (schema_version_ > known_schema_version()) {
    throw UserError(newer_schema_line(path(), schema_version_) +
                    ": this command writes to it, so it refuses: use a newer kiln");
  }
  if (!writer_) {
    writer_ = std::make_unique<Connection>(path(), OpenMode::kExisting, "check its permissions");
    writer_->set_failure_hint("is it a Kiln run store?");
    writer_->prepare_writer();  // foreign keys on, so that a run's rows go with it
  }
  return *writer_;
}

}  // namespace kiln
