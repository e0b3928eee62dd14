#include "core/run_history.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/text.h"
#include "core/where_expr.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

// A prepared statement with its parameters bound in order; rows are read with next().
class Query {
 public:
  Query(sqlite3* db, const std::string& sql, const std::vector<SqlValue>& params = {}) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) fail();
    for (size_t i = 0; i < params.size(); ++i)
      bind(static_cast<int>(i) + 1, params[i]);
  }
  ~Query() { sqlite3_finalize(stmt_); }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  bool next() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) fail();
    return false;
  }
  bool is_null(int i) const { return sqlite3_column_type(stmt_, i) == SQLITE_NULL; }
  int64_t integer(int i) const { return sqlite3_column_int64(stmt_, i); }
  // Exactly as stored (no text round trip); NaN for NULL, which is also how SQLite keeps a NaN.
  double real(int i) const { return is_null(i) ? NAN : sqlite3_column_double(stmt_, i); }
  std::optional<double> maybe_real(int i) const {
    return is_null(i) ? std::nullopt : std::optional<double>(sqlite3_column_double(stmt_, i));
  }
  std::string text(int i) const {
    auto* p = sqlite3_column_text(stmt_, i);
    return p ? reinterpret_cast<const char*>(p) : "";
  }

 private:
  void bind(int i, const SqlValue& value) {
    int rc = SQLITE_OK;
    if (auto* n = std::get_if<int64_t>(&value)) rc = sqlite3_bind_int64(stmt_, i, *n);
    if (auto* x = std::get_if<double>(&value)) rc = sqlite3_bind_double(stmt_, i, *x);
    if (auto* s = std::get_if<std::string>(&value)) {
      rc = sqlite3_bind_text(stmt_, i, s->data(), static_cast<int>(s->size()), SQLITE_TRANSIENT);
    }
    if (rc != SQLITE_OK) fail();
  }
  [[noreturn]] void fail() const {
    throw UserError(fmt::format("run store '{}': {}: is it a Kiln run store?",
                                sqlite3_db_filename(db_, "main"), sqlite3_errmsg(db_)));
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

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
    try {
      // A store edited by hand may hold text the TOML parser cannot be trusted with.
      cache->table = unsafe_toml_text(std::string(config)) ? toml::table{} : toml::parse(config);
    } catch (const toml::parse_error&) {
      cache->table = toml::table{};  // not a config Kiln wrote: it has no keys to match
    }
  }
  const auto& table = cache->table;
  set_config_result(ctx, table.at_path(reinterpret_cast<const char*>(key)));
}

std::string value_text(const toml::node& node) {
  if (node.is_string()) return node.as_string()->get();
  if (node.is_integer()) return std::to_string(node.as_integer()->get());
  if (node.is_boolean()) return node.as_boolean()->get() ? "true" : "false";
  if (node.is_floating_point()) {
    // As the canonical TOML writes it, so 1.0 stays visibly a float.
    std::string s = fmt::format("{}", node.as_floating_point()->get());
    return s.find_first_of(".eEn") == std::string::npos ? s + ".0" : s;
  }
  return "";
}

// The keys --where and --sort can name besides config keys; the SQL is the summary's column.
const KeySpace& summary_keys() {
  static const KeySpace keys{{{"id", "id"},
                              {"name", "name"},
                              {"status", "status"},
                              {"sweep", "sweep"},
                              {"created_at", "created_at"},
                              {"finished_at", "finished_at"},
                              {"experiment", "experiment"},
                              {"host", "host"},
                              {"config_hash", "config_hash"},
                              {"steps", "steps"},
                              {"planned_steps", "planned_steps"},
                              {"final_loss", "final_loss"},
                              {"best_loss", "best_loss"},
                              {"best_val", "best_val"},
                              {"tokens_per_sec", "tokens_per_sec"},
                              {"duration", "duration"}},
                             "kiln_config(config, ?)"};
  return keys;
}

// Every run with its summary, as a query the caller extends with WHERE / ORDER BY / LIMIT.
std::string summary_select(const HistoryDb& db) {
  // The sweep expression is one of two fixed strings: runs.sweep exists only in newer stores.
  return fmt::format(R"sql(
      WITH summary AS (
        SELECT r.id AS id, r.name AS name, r.status AS status, {} AS sweep,
               r.created_at AS created_at, coalesce(r.finished_at, '') AS finished_at,
               coalesce(r.experiment, '') AS experiment, r.config AS config,
               r.config_hash AS config_hash, coalesce(r.git_commit, '') AS git_commit,
               coalesce(r.host, '') AS host, coalesce(r.error, '') AS error,
               r.steps AS planned_steps,
               coalesce((SELECT max(step) FROM metrics WHERE run_id = r.id), 0) AS steps,
               (SELECT loss FROM metrics WHERE run_id = r.id ORDER BY step DESC LIMIT 1)
                 AS final_loss,
               (SELECT min(loss) FROM metrics WHERE run_id = r.id) AS best_loss,
               (SELECT min(loss) FROM evals WHERE run_id = r.id AND split = 'val') AS best_val,
               (SELECT avg(tokens_per_sec) FROM metrics WHERE run_id = r.id AND step > 1)
                 AS tokens_per_sec,
               (julianday(r.finished_at) - julianday(r.created_at)) * 86400.0 AS duration
        FROM runs r)
      SELECT id, name, status, sweep, created_at, finished_at, experiment, config, config_hash,
             git_commit, host, error, planned_steps, steps, final_loss, best_loss, best_val,
             tokens_per_sec, duration
      FROM summary)sql",
                     db.has_sweep_column() ? "coalesce(r.sweep, '')" : "''");
}

std::vector<RunRecord> read_records(HistoryDb& db, const SqlFragment& sql) {
  Query q(db.handle(), sql.sql, sql.params);
  std::vector<RunRecord> out;
  while (q.next()) {
    RunRecord r;
    r.id = q.integer(0);
    r.name = q.text(1);
    r.status = q.text(2);
    r.sweep = q.text(3);
    r.created_at = q.text(4);
    r.finished_at = q.text(5);
    r.experiment = q.text(6);
    r.config = q.text(7);
    r.config_hash = q.text(8);
    r.git_commit = q.text(9);
    r.host = q.text(10);
    r.error = q.text(11);
    r.planned_steps = q.integer(12);
    r.steps = q.integer(13);
    r.final_loss = q.maybe_real(14);
    r.best_loss = q.maybe_real(15);
    r.best_val = q.maybe_real(16);
    r.tokens_per_sec = q.maybe_real(17);
    r.duration_s = q.maybe_real(18);
    out.push_back(std::move(r));
  }
  return out;
}

// A config key no stored run has is a typo, not a filter that happens to match nothing.
void check_config_keys(HistoryDb& db, const std::vector<KeyUse>& uses, const std::string& where) {
  if (uses.empty()) return;
  std::set<std::string> known;
  Query configs(db.handle(), "SELECT DISTINCT config FROM runs");
  while (configs.next()) {
    for (const auto& entry : config_values(configs.text(0)))
      known.insert(entry.first);
  }
  if (known.empty()) return;  // no run yet: nothing to match, nothing to check against
  for (const auto& use : uses) {
    if (known.count(use.key)) continue;
    const std::string guess = nearest(use.key, {known.begin(), known.end()});
    throw UserError(fmt::format(
        "{}: no run has the config key '{}'{}: {}`kiln runs show RUN` lists a run's config", where,
        use.key, use.column ? fmt::format(" (column {})", use.column) : "",
        guess.empty() ? "" : fmt::format("did you mean '{}'? ", guess)));
  }
}

size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    n += (c & 0xC0) != 0x80;  // count UTF-8 lead bytes, not continuation bytes
  return n;
}

std::string fixed(const std::optional<double>& v, int decimals) {
  return v && std::isfinite(*v) ? fmt::format("{:.{}f}", *v, decimals) : "-";
}

std::string or_dash(const std::string& s) {
  return s.empty() ? "-" : s;
}

// "2024-05-01T12:00:00.123Z" -> "2024-05-01 12:00:00"
std::string short_time(const std::string& iso) {
  if (iso.size() < 19) return or_dash(iso);
  std::string s = iso.substr(0, 19);
  s[10] = ' ';
  return s;
}

std::string duration_text(const std::optional<double>& seconds) {
  return seconds ? format_duration(*seconds) : "-";
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Every digit that identifies the double (shortest round trip); "" when unknown.
std::string exact(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? fmt::format("{}", *v) : "";
}

nlohmann::ordered_json json_number(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

std::string runs_csv(const std::vector<RunRecord>& runs) {
  std::string out =
      "id,name,status,sweep,created_at,finished_at,steps,planned_steps,final_loss,best_loss,"
      "best_val,tokens_per_sec,duration_s,config_hash\n";
  for (const auto& r : runs) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.id, csv_field(r.name),
                       r.status, csv_field(r.sweep), r.created_at, r.finished_at, r.steps,
                       r.planned_steps, exact(r.final_loss), exact(r.best_loss), exact(r.best_val),
                       exact(r.tokens_per_sec), exact(r.duration_s), r.config_hash);
  }
  return out;
}

std::string runs_json(const std::vector<RunRecord>& runs) {
  auto out = nlohmann::ordered_json::array();
  for (const auto& r : runs) {
    out.push_back({{"id", r.id},
                   {"name", r.name},
                   {"status", r.status},
                   {"sweep", r.sweep},
                   {"created_at", r.created_at},
                   {"finished_at", r.finished_at.empty() ? nlohmann::ordered_json(nullptr)
                                                         : nlohmann::ordered_json(r.finished_at)},
                   {"steps", r.steps},
                   {"planned_steps", r.planned_steps},
                   {"final_loss", json_number(r.final_loss)},
                   {"best_loss", json_number(r.best_loss)},
                   {"best_val", json_number(r.best_val)},
                   {"tokens_per_sec", json_number(r.tokens_per_sec)},
                   {"duration_s", json_number(r.duration_s)},
                   {"config_hash", r.config_hash}});
  }
  return out.dump(2) + "\n";
}

// Each line two spaces in; the text's final newline does not become an extra empty line.
std::string indent(const std::string& text) {
  std::vector<std::string> lines = split(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::string out;
  for (const auto& line : lines)
    out += line.empty() ? "\n" : "  " + line + "\n";
  return out;
}

// A titled block of `kiln runs show`.
std::string block(const std::string& title, const Table& table) {
  if (table.rows.empty()) return fmt::format("\n{}: none\n", title);
  return fmt::format("\n{}\n{}", title, indent(render_text_table(table)));
}

Table evals_table(HistoryDb& db, int64_t run_id) {
  Table t{
      {"step", "split", "checkpoint", "loss", "perplexity"}, {}, {true, false, false, true, true}};
  Query q(db.handle(),
          "SELECT step, split, checkpoint, loss, perplexity FROM evals WHERE run_id = ? "
          "ORDER BY step, split, checkpoint",
          {run_id});
  while (q.next()) {
    t.rows.push_back({std::to_string(q.integer(0)), q.text(1), or_dash(q.text(2)),
                      fixed(q.maybe_real(3), 6), fixed(q.maybe_real(4), 4)});
  }
  return t;
}

Table snapshots_table(HistoryDb& db, int64_t run_id) {
  Table t{{"label", "step", "path", "created"}, {}, {false, true, false, false}};
  Query q(db.handle(),
          "SELECT label, step, path, created_at FROM snapshots WHERE run_id = ? "
          "ORDER BY step, label",
          {run_id});
  while (q.next())
    t.rows.push_back({q.text(0), std::to_string(q.integer(1)), q.text(2), short_time(q.text(3))});
  return t;
}

Table resumes_table(HistoryDb& db, int64_t run_id) {
  Table t{{"from step", "changes", "at"}, {}, {true, false, false}};
  Query q(db.handle(),
          "SELECT from_step, coalesce(changes, ''), created_at FROM resumes WHERE run_id = ? "
          "ORDER BY created_at, rowid",
          {run_id});
  while (q.next())
    t.rows.push_back({std::to_string(q.integer(0)), or_dash(q.text(1)), short_time(q.text(2))});
  return t;
}

std::string key_values(const std::vector<std::pair<std::string, std::string>>& lines) {
  std::string out;
  for (const auto& [label, value] : lines) {
    if (!value.empty()) out += fmt::format("{:<12} {}\n", label, value);
  }
  return out;
}

std::string identity_lines(const RunRecord& r) {
  return key_values({{"experiment", r.experiment},
                     {"created", short_time(r.created_at) + " UTC"},
                     {"finished", r.finished_at.empty() ? "-" : short_time(r.finished_at) + " UTC"},
                     {"duration", duration_text(r.duration_s)},
                     {"git commit", r.git_commit},
                     {"host", r.host},
                     {"config hash", r.config_hash},
                     {"sweep", r.sweep},
                     {"error", r.error}});
}

std::string last_step_line(HistoryDb& db, const RunRecord& r) {
  Query q(db.handle(),
          "SELECT step, loss, lr, grad_norm, tokens_per_sec, dt_ms, tokens_seen FROM metrics "
          "WHERE run_id = ? ORDER BY step DESC LIMIT 1",
          {r.id});
  if (!q.next()) return "none yet";
  return fmt::format(
      "step {}/{} | loss {} | lr {:.3e} | norm {:.4f} | {} tok/s | {:.1f} ms | {} tokens",
      q.integer(0), r.planned_steps, fixed(q.maybe_real(1), 6), q.real(2), q.real(3),
      fixed(q.maybe_real(4), 0), q.real(5), q.integer(6));
}

// "2.345678 at step 120", the lowest value of a loss column and where it was reached.
std::string best_line(HistoryDb& db, const std::string& sql, int64_t run_id) {
  Query q(db.handle(), sql, {run_id});
  if (!q.next()) return "-";
  return fmt::format("{} at step {} (perplexity {:.3f})", fixed(q.maybe_real(1), 6), q.integer(0),
                     std::exp(q.real(1)));
}

std::string metric_lines(HistoryDb& db, const RunRecord& r) {
  return key_values(
      {{"last", last_step_line(db, r)},
       {"best loss", best_line(db,
                               "SELECT step, loss FROM metrics WHERE run_id = ? AND loss IS NOT "
                               "NULL ORDER BY loss, step LIMIT 1",
                               r.id)},
       {"best val", best_line(db,
                              "SELECT step, loss FROM evals WHERE run_id = ? AND split = 'val' "
                              "ORDER BY loss, step LIMIT 1",
                              r.id)},
       {"tokens/s", r.tokens_per_sec ? fixed(r.tokens_per_sec, 0) + " (mean after step 1)" : ""}});
}

struct LossRow {
  int64_t step;
  std::optional<double> loss;
};

std::vector<LossRow> loss_rows(HistoryDb& db, int64_t run_id) {
  Query q(db.handle(), "SELECT step, loss FROM metrics WHERE run_id = ? ORDER BY step", {run_id});
  std::vector<LossRow> rows;
  while (q.next())
    rows.push_back({q.integer(0), q.maybe_real(1)});
  return rows;
}

std::string curve_line(const RunRecord& a, const RunRecord& b, const CurveComparison& c) {
  const std::string pair = fmt::format("{} and {} (config {})", a.name, b.name, a.config_hash);
  if (c.identical) {
    return fmt::format("{}: loss curves identical over {} steps", pair, c.common_steps);
  }
  auto loss = [](const std::optional<double>& v) { return v ? fmt::format("{}", *v) : "no row"; };
  return fmt::format("{}: loss curves first differ at step {} ({} vs {}), after {} identical steps",
                     pair, c.first_difference, loss(c.loss_a), loss(c.loss_b), c.common_steps);
}

std::string curve_lines(HistoryDb& db, const std::vector<RunRecord>& runs) {
  std::string out;
  for (size_t i = 0; i < runs.size(); ++i) {
    for (size_t j = i + 1; j < runs.size(); ++j) {
      if (runs[i].config_hash != runs[j].config_hash) continue;
      out += "  " + curve_line(runs[i], runs[j], compare_loss_curves(db, runs[i].id, runs[j].id)) +
             "\n";
    }
  }
  return out.empty() ? "  no two of these runs share a config hash\n" : out;
}

Table summary_side_by_side(const std::vector<RunRecord>& runs) {
  Table t;
  t.header.push_back("");
  for (const auto& r : runs)
    t.header.push_back(r.name);
  t.numeric.assign(t.header.size(), true);
  t.numeric[0] = false;
  auto row = [&](const std::string& label, auto cell) {
    std::vector<std::string> cells{label};
    for (const auto& r : runs)
      cells.push_back(cell(r));
    t.rows.push_back(std::move(cells));
  };
  row("status", [](const RunRecord& r) { return r.status; });
  row("steps", [](const RunRecord& r) { return fmt::format("{}/{}", r.steps, r.planned_steps); });
  row("final loss", [](const RunRecord& r) { return fixed(r.final_loss, 6); });
  row("best loss", [](const RunRecord& r) { return fixed(r.best_loss, 6); });
  row("best val", [](const RunRecord& r) { return fixed(r.best_val, 6); });
  row("tokens/s", [](const RunRecord& r) { return fixed(r.tokens_per_sec, 0); });
  row("duration", [](const RunRecord& r) { return duration_text(r.duration_s); });
  row("config hash", [](const RunRecord& r) { return r.config_hash; });
  return t;
}

std::string metrics_csv(HistoryDb& db, const RunRecord& run) {
  std::string out;
  Query q(db.handle(),
          "SELECT step, loss, lr, grad_norm, tokens_per_sec, dt_ms, tokens_seen FROM metrics "
          "WHERE run_id = ? ORDER BY step",
          {run.id});
  while (q.next()) {
    out += fmt::format("{},metric,{},{},{},{},{},{},{},,,\n", csv_field(run.name), q.integer(0),
                       exact(q.maybe_real(1)), exact(q.maybe_real(2)), exact(q.maybe_real(3)),
                       exact(q.maybe_real(4)), exact(q.maybe_real(5)),
                       q.is_null(6) ? "" : std::to_string(q.integer(6)));
  }
  return out;
}

std::string evals_csv(HistoryDb& db, const RunRecord& run) {
  std::string out;
  Query q(db.handle(),
          "SELECT step, loss, split, checkpoint, perplexity FROM evals WHERE run_id = ? "
          "ORDER BY step, split, checkpoint",
          {run.id});
  while (q.next()) {
    out += fmt::format("{},eval,{},{},,,,,,{},{},{}\n", csv_field(run.name), q.integer(0),
                       exact(q.maybe_real(1)), csv_field(q.text(2)), csv_field(q.text(3)),
                       exact(q.maybe_real(4)));
  }
  return out;
}

std::string metrics_jsonl(HistoryDb& db, const RunRecord& run) {
  std::string out;
  Query q(db.handle(),
          "SELECT step, loss, lr, grad_norm, tokens_per_sec, dt_ms, tokens_seen FROM metrics "
          "WHERE run_id = ? ORDER BY step",
          {run.id});
  while (q.next()) {
    nlohmann::ordered_json row = {
        {"kind", "metric"},
        {"run", run.name},
        {"step", q.integer(0)},
        {"loss", json_number(q.maybe_real(1))},
        {"lr", json_number(q.maybe_real(2))},
        {"grad_norm", json_number(q.maybe_real(3))},
        {"tokens_per_sec", json_number(q.maybe_real(4))},
        {"dt_ms", json_number(q.maybe_real(5))},
        {"tokens_seen",
         q.is_null(6) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(q.integer(6))}};
    out += row.dump() + "\n";
  }
  return out;
}

std::string evals_jsonl(HistoryDb& db, const RunRecord& run) {
  std::string out;
  Query q(db.handle(),
          "SELECT step, loss, split, checkpoint, perplexity FROM evals WHERE run_id = ? "
          "ORDER BY step, split, checkpoint",
          {run.id});
  while (q.next()) {
    nlohmann::ordered_json row = {{"kind", "eval"},
                                  {"run", run.name},
                                  {"step", q.integer(0)},
                                  {"loss", json_number(q.maybe_real(1))},
                                  {"split", q.text(2)},
                                  {"checkpoint", q.text(3)},
                                  {"perplexity", json_number(q.maybe_real(4))}};
    out += row.dump() + "\n";
  }
  return out;
}

}  // namespace

HistoryDb::HistoryDb(const std::string& path) : path_(path) {
  if (!fs::is_regular_file(path)) {
    throw UserError(
        fmt::format("no run store at '{}': train a run first, or pass --db PATH", path));
  }
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr) !=
      SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw UserError(
        fmt::format("cannot open run store '{}': {}: check its permissions", path, why));
  }
  // A run being trained writes about once a second; readers wait for it rather than fail.
  sqlite3_busy_timeout(db_, 30000);
  try {
    Query(db_, "PRAGMA foreign_keys = ON").next();
    Query columns(db_, "SELECT name FROM pragma_table_info('runs')");
    bool any = false;
    while (columns.next()) {
      any = true;
      has_sweep_ = has_sweep_ || columns.text(0) == "sweep";
    }
    if (!any) {
      throw UserError(fmt::format(
          "'{}' is not a Kiln run store (it has no runs table): pass the run.db of your runs",
          path));
    }
  } catch (...) {
    sqlite3_close(db_);
    throw;
  }
  sqlite3_create_function_v2(db_, "kiln_config", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                             new ConfigCache, kiln_config_function, nullptr, nullptr,
                             [](void* cache) { delete static_cast<ConfigCache*>(cache); });
}

HistoryDb::~HistoryDb() {
  sqlite3_close(db_);
}

std::vector<RunRecord> list_runs(HistoryDb& db, const ListQuery& query) {
  const KeySpace& keys = summary_keys();
  SqlFragment sql{summary_select(db), {}};
  if (query.where.find_first_not_of(" \t\n") != std::string::npos) {
    auto ast = parse_where(query.where, keys);
    check_config_keys(db, config_keys_of(*ast), fmt::format("--where \"{}\"", query.where));
    SqlFragment filter = where_sql(*ast, keys);
    sql.sql += " WHERE " + filter.sql;
    sql.params.insert(sql.params.end(), filter.params.begin(), filter.params.end());
  }
  const std::string key = sort_key(query.sort, keys);
  if (is_config_key(key)) check_config_keys(db, {{key, 0}}, fmt::format("--sort '{}'", query.sort));
  SqlFragment order = sort_sql(query.sort, keys);
  sql.sql += " ORDER BY " + order.sql + ", id";
  sql.params.insert(sql.params.end(), order.params.begin(), order.params.end());
  if (query.limit > 0) {
    sql.sql += " LIMIT ?";
    sql.params.emplace_back(query.limit);
  }
  return read_records(db, sql);
}

RunRecord find_run_record(HistoryDb& db, const std::string& name_or_id) {
  auto found = read_records(
      db,
      {summary_select(db) +
           " WHERE name = ?1 OR (?1 <> '' AND ?1 NOT GLOB '*[^0-9]*' AND id = CAST(?1 AS INTEGER))"
           " ORDER BY name = ?1 DESC LIMIT 1",
       {name_or_id}});
  if (found.empty()) {
    throw UserError(fmt::format("no run '{}' in '{}': `kiln runs list --db {}` lists them",
                                name_or_id, db.path(), db.path()));
  }
  return found[0];
}

std::vector<RunRecord> match_runs(HistoryDb& db, const std::vector<std::string>& patterns) {
  std::vector<RunRecord> out;
  std::set<int64_t> seen;
  for (const auto& pattern : patterns) {
    std::vector<RunRecord> found =
        read_records(db, {summary_select(db) + " WHERE name = ?1 OR (?1 <> '' AND ?1 NOT GLOB "
                                               "'*[^0-9]*' AND id = CAST(?1 AS INTEGER))"
                                               " ORDER BY name = ?1 DESC LIMIT 1",
                          {pattern}});
    if (found.empty()) {
      found = read_records(
          db, {summary_select(db) + " WHERE sweep = ?1 OR name GLOB ?1 ORDER BY id", {pattern}});
    }
    if (found.empty()) {
      throw UserError(
          fmt::format("'{}' is no run name, id, sweep or glob of names in '{}': `kiln runs list "
                      "--db {}` lists the runs",
                      pattern, db.path(), db.path()));
    }
    for (auto& r : found) {
      if (seen.insert(r.id).second) out.push_back(std::move(r));
    }
  }
  return out;
}

std::string render_text_table(const Table& table) {
  std::vector<size_t> widths(table.header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i)
      widths[i] = std::max(widths[i], display_width(row[i]));
  };
  measure(table.header);
  for (const auto& row : table.rows)
    measure(row);
  auto line = [&](const std::vector<std::string>& row) {
    std::string out;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(widths[i] - display_width(row[i]), ' ');
      out += (i ? "  " : "") + (table.numeric[i] ? pad + row[i] : row[i] + pad);
    }
    return out.erase(out.find_last_not_of(' ') + 1) + "\n";
  };
  std::string out = line(table.header);
  for (const auto& row : table.rows)
    out += line(row);
  return out;
}

Table run_list_table(const std::vector<RunRecord>& runs) {
  Table t{{"id", "name", "status", "sweep", "created", "steps", "final_loss", "best_loss",
           "best_val", "tok/s", "duration"},
          {},
          {true, false, false, false, false, true, true, true, true, true, true}};
  for (const auto& r : runs) {
    t.rows.push_back({std::to_string(r.id), r.name, r.status, or_dash(r.sweep),
                      short_time(r.created_at), fmt::format("{}/{}", r.steps, r.planned_steps),
                      fixed(r.final_loss, 4), fixed(r.best_loss, 4), fixed(r.best_val, 4),
                      fixed(r.tokens_per_sec, 0), duration_text(r.duration_s)});
  }
  return t;
}

std::string format_run_list(const std::vector<RunRecord>& runs, const std::string& format) {
  if (format == "csv") return runs_csv(runs);
  if (format == "json") return runs_json(runs);
  if (format != "table") {
    throw UserError(
        fmt::format("--format {} is not a list format: use table, csv or json", format));
  }
  return runs.empty() ? "no runs\n" : render_text_table(run_list_table(runs));
}

std::string describe_run(HistoryDb& db, const RunRecord& run) {
  std::string out = fmt::format("run {} (id {}): {}\n", run.name, run.id, run.status);
  out += identity_lines(run) + metric_lines(db, run);
  out += block("evals", evals_table(db, run.id));
  out += block("snapshots", snapshots_table(db, run.id));
  out += block("resumes", resumes_table(db, run.id));
  return out + "\nconfig\n" + indent(run.config);
}

std::map<std::string, std::string> config_values(const std::string& config_toml) {
  std::map<std::string, std::string> out;
  toml::table root;
  try {
    if (unsafe_toml_text(config_toml)) return out;  // a store edited by hand: not Kiln's TOML
    root = toml::parse(config_toml);
  } catch (const toml::parse_error&) {
    return out;  // not a config Kiln wrote: it has no keys to show or compare
  }
  for (const auto& [section, node] : root) {
    if (!node.is_table()) continue;
    for (const auto& [key, value] : *node.as_table())
      out[std::string(section.str()) + "." + std::string(key.str())] = value_text(value);
  }
  return out;
}

std::vector<std::pair<std::string, std::vector<std::string>>> differing_config(
    const std::vector<RunRecord>& runs) {
  std::vector<std::map<std::string, std::string>> configs;
  std::set<std::string> keys;
  for (const auto& r : runs) {
    configs.push_back(config_values(r.config));
    for (const auto& entry : configs.back())
      keys.insert(entry.first);
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto& key : keys) {
    if (key == "run.name") continue;
    std::vector<std::string> values;
    for (const auto& c : configs)
      values.push_back(!c.count(key) ? "-" : c.at(key).empty() ? "\"\"" : c.at(key));
    if (std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) != values.end()) {
      out.emplace_back(key, std::move(values));
    }
  }
  return out;
}

Table differing_config_table(const std::vector<RunRecord>& runs) {
  Table t;
  t.header.push_back("key");
  for (const auto& r : runs)
    t.header.push_back(r.name);
  t.numeric.assign(t.header.size(), true);
  t.numeric[0] = false;
  for (const auto& [key, values] : differing_config(runs)) {
    t.rows.push_back({key});
    t.rows.back().insert(t.rows.back().end(), values.begin(), values.end());
  }
  return t;
}

CurveComparison compare_loss_curves(HistoryDb& db, int64_t run_a, int64_t run_b) {
  const std::vector<LossRow> a = loss_rows(db, run_a), b = loss_rows(db, run_b);
  CurveComparison c;
  size_t i = 0, j = 0;
  for (; i < a.size() && j < b.size(); ++i, ++j) {
    if (a[i].step != b[j].step || a[i].loss != b[j].loss) break;
    ++c.common_steps;
  }
  if (i == a.size() && j == b.size()) {
    c.identical = true;
    return c;
  }
  // The first step where they part: a differing loss, or a step only one of them has.
  constexpr int64_t kNoStep = std::numeric_limits<int64_t>::max();
  const int64_t step_a = i < a.size() ? a[i].step : kNoStep;
  const int64_t step_b = j < b.size() ? b[j].step : kNoStep;
  c.first_difference = std::min(step_a, step_b);
  if (step_a == c.first_difference) c.loss_a = a[i].loss.value_or(NAN);
  if (step_b == c.first_difference) c.loss_b = b[j].loss.value_or(NAN);
  return c;
}

std::string compare_report(HistoryDb& db, const std::vector<RunRecord>& runs) {
  Table config = differing_config_table(runs);
  std::string out = config.rows.empty()
                        ? "config keys that differ: none besides run.name\n"
                        : "config keys that differ\n" + indent(render_text_table(config));
  out += "\nresults\n" + indent(render_text_table(summary_side_by_side(runs)));
  return out + "\nloss curves of runs sharing a config hash\n" + curve_lines(db, runs);
}

std::string export_run(HistoryDb& db, const RunRecord& run, const std::string& format) {
  if (format == "csv") {
    return "run,kind,step,loss,lr,grad_norm,tokens_per_sec,dt_ms,tokens_seen,split,checkpoint,"
           "perplexity\n" +
           metrics_csv(db, run) + evals_csv(db, run);
  }
  if (format == "jsonl") return metrics_jsonl(db, run) + evals_jsonl(db, run);
  throw UserError(fmt::format("--format {} is not an export format: use csv or jsonl", format));
}

std::string out_dir_of(const RunRecord& run) {
  auto values = config_values(run.config);
  return values.count("run.out_dir") ? values.at("run.out_dir") : "runs";
}

std::string run_folder(const RunRecord& run) {
  // `kiln run` accepts only such names (a sweep member's has a '/'); a store edited by hand
  // could hold another, and rm must never reach outside out_dir.
  bool unsafe = run.name.empty() || run.name.front() == '/';
  for (const auto& part : split(run.name, '/'))
    unsafe = unsafe || part.empty() || part == "." || part == "..";
  return unsafe ? "" : (fs::path(out_dir_of(run)) / run.name).string();
}

std::string remove_run(HistoryDb& db, const RunRecord& run) {
  const std::string folder = run_folder(run);
  std::optional<FileLock> lock;
  if (!folder.empty() && fs::is_directory(folder)) {
    // The lock `kiln run` and `kiln resume` hold while they train.
    lock.emplace((fs::path(folder) / "lock").string(),
                 fmt::format("run '{}' is being trained by a kiln process right now: stop it "
                             "before removing it",
                             run.name));
  }
  Query(db.handle(), "DELETE FROM runs WHERE id = ?", {run.id}).next();
  if (!lock) return "";
  std::error_code ec;
  fs::remove_all(folder, ec);
  if (ec) {
    throw UserError(
        fmt::format("removed run '{}' from the store but not its folder '{}': {}: "
                    "delete the folder by hand",
                    run.name, folder, ec.message()));
  }
  // A sweep member lives in <out_dir>/<sweep>/<member>: the last member out removes the sweep's
  // folder too (never out_dir itself: only the folders the name adds).
  fs::path dir = fs::path(folder).parent_path();
  for (size_t depth = split(run.name, '/').size(); depth > 1; --depth, dir = dir.parent_path()) {
    if (!fs::is_empty(dir, ec) || ec || !fs::remove(dir, ec)) break;
  }
  return folder;
}

Curve load_curve(HistoryDb& db, const RunRecord& run, const std::string& metric,
                 const std::string& x_axis) {
  static const std::map<std::string, std::string> columns = {{"loss", "loss"},
                                                             {"val_loss", "NULL"},
                                                             {"lr", "lr"},
                                                             {"grad_norm", "grad_norm"},
                                                             {"tokens_per_sec", "tokens_per_sec"}};
  if (!columns.count(metric)) {
    throw UserError(fmt::format(
        "--metric {} is not a metric: use loss, val_loss, lr, grad_norm or tokens_per_sec",
        metric));
  }
  if (x_axis != "step" && x_axis != "tokens" && x_axis != "time") {
    throw UserError(fmt::format("--x {} is not an axis: use step, tokens or time", x_axis));
  }
  Query q(db.handle(),
          "SELECT step, tokens_seen, dt_ms, " + columns.at(metric) +
              " FROM metrics WHERE run_id = ? ORDER BY step",
          {run.id});
  Curve curve;
  std::map<int64_t, double> x_at;  // step -> x, for the evals
  double seconds = 0;
  while (q.next()) {
    seconds += q.is_null(2) ? 0.0 : q.real(2) / 1000.0;
    const double x = x_axis == "step"     ? static_cast<double>(q.integer(0))
                     : x_axis == "tokens" ? q.real(1)
                                          : seconds;
    x_at[q.integer(0)] = x;
    if (metric == "val_loss") continue;
    curve.x.push_back(x);
    curve.y.push_back(q.real(3));
  }
  if (metric != "val_loss") return curve;
  Query evals(db.handle(),
              "SELECT step, loss FROM evals WHERE run_id = ? AND split = 'val' AND checkpoint = '' "
              "ORDER BY step",
              {run.id});
  while (evals.next()) {
    const int64_t step = evals.integer(0);
    if (!x_at.count(step) && x_axis != "step") continue;
    curve.x.push_back(x_at.count(step) ? x_at[step] : static_cast<double>(step));
    curve.y.push_back(evals.real(1));
  }
  return curve;
}

}  // namespace kiln
