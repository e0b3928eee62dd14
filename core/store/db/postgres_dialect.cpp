#include "core/store/db/postgres_dialect.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <regex>

#include "core/util/text.h"

namespace kiln {

namespace {

// strftime('%Y-%m-%dT%H:%M:%fZ', 'now'): the ISO-8601 UTC time with milliseconds.
const char* const kSqliteNow = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";
const char* const kPostgresNow =
    "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')";

std::string replace_text(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::string trimmed(const std::string& s) {
  const size_t start = s.find_first_not_of(" \t\n");
  if (start == std::string::npos) return "";
  return s.substr(start, s.find_last_not_of(" \t\n;") + 1 - start);
}

// INSERT OR REPLACE / OR IGNORE INTO t (columns) ... as INSERT ... ON CONFLICT: a row that
// clashes on the primary key is updated (REPLACE), or left as it is (IGNORE).
std::string upsert(const std::string& sql, const PrimaryKeyOf& primary_key) {
  static const std::regex head(R"(INSERT\s+OR\s+(REPLACE|IGNORE)\s+INTO\s+(\w+)\s*\(([^)]*)\))");
  std::smatch m;
  if (!std::regex_search(sql, m, head)) return sql;
  const std::string table = m[2].str();
  const std::string out = trimmed(m.prefix().str() + "INSERT INTO " + table + " (" + m[3].str() +
                                  ")" + m.suffix().str());
  if (m[1] == "IGNORE") return out + " ON CONFLICT DO NOTHING";
  const std::vector<std::string> key = primary_key(table);
  std::vector<std::string> updates;
  for (const auto& part : split(m[3].str(), ',')) {
    const std::string column = trimmed(part);
    if (std::find(key.begin(), key.end(), column) == key.end())
      updates.push_back(column + " = EXCLUDED." + column);
  }
  return out + " ON CONFLICT (" + join(key, ", ") + ")" +
         (updates.empty() ? " DO NOTHING" : " DO UPDATE SET " + join(updates, ", "));
}

// `?` -> $1, $2, ...; `?N` -> $N; `?#` (a GLOB's operand) -> $n, marked as a glob.
std::string numbered_parameters(const std::string& sql, std::vector<bool>& glob_params) {
  std::string out;
  size_t next = 0;
  char quote = 0;
  auto mark = [&](size_t n, bool glob) {
    if (glob_params.size() < n) glob_params.resize(n, false);
    glob_params[n - 1] = glob_params[n - 1] || glob;
    out += '$';
    out += std::to_string(n);
  };
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (quote || c == '\'' || c == '"') {
      quote = quote == c ? 0 : quote ? quote : c;
      out += c;
    } else if (c != '?') {
      out += c;
    } else if (i + 1 < sql.size() && std::isdigit(static_cast<unsigned char>(sql[i + 1]))) {
      size_t n = 0;
      while (i + 1 < sql.size() && std::isdigit(static_cast<unsigned char>(sql[i + 1])))
        n = n * 10 + static_cast<size_t>(sql[++i] - '0');
      mark(n, false);
    } else {
      const bool glob = i + 1 < sql.size() && sql[i + 1] == '#';
      if (glob) ++i;
      mark(++next, glob);
    }
  }
  return out;
}

}  // namespace

std::string postgres_sql(const std::string& sql, const PrimaryKeyOf& primary_key,
                         std::vector<bool>& glob_params) {
  static const std::regex not_glob(R"(\bNOT\s+GLOB\s+\?)"), glob(R"(\bGLOB\s+\?)");
  static const std::regex julianday(R"(julianday\(([^()]*)\))");
  static const std::regex table_info(R"(pragma_table_info\('(\w+)'\))");
  static const std::regex master(R"(\bsqlite_master\b)");
  std::string out = upsert(sql, primary_key);
  out = replace_text(out, kSqliteNow, kPostgresNow);
  out = std::regex_replace(out, not_glob, "!~ ?#");
  out = std::regex_replace(out, glob, "~ ?#");
  // A difference of two julianday()s is one of two epochs, in days.
  out = std::regex_replace(out, julianday, "(extract(epoch FROM ($1)::timestamptz) / 86400.0)");
  out = std::regex_replace(out, table_info,
                           "(SELECT column_name::text AS name FROM information_schema.columns "
                           "WHERE table_schema = current_schema() AND table_name = '$1') AS info");
  out = std::regex_replace(out, master,
                           "(SELECT 'table' AS type, tablename::text AS name FROM pg_tables "
                           "WHERE schemaname = current_schema()) AS sqlite_master");
  return numbered_parameters(out, glob_params);
}

std::string postgres_migration(const std::string& sqlite_sql) {
  // kiln_config(config, key) of SQLite (core/store/history/reader.cpp) reads the TOML text; here a
  // key is looked up in runs.config_json (its jsonb copy): as text for =, ~ and text values, as
  // a number for numeric comparisons and sorts (a bool is 1/0, as SQLite's lookup gives it).
  static const char* const kConfigJson = R"sql(config_json JSONB;
    CREATE FUNCTION kiln_config_text(doc JSONB, key TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE
    AS $f$ SELECT CASE jsonb_typeof(doc #> string_to_array(key, '.'))
                  WHEN 'boolean' THEN CASE WHEN doc #> string_to_array(key, '.') = 'true'::jsonb
                                      THEN '1' ELSE '0' END
                  WHEN 'object' THEN NULL WHEN 'array' THEN NULL
                  ELSE doc #>> string_to_array(key, '.') END $f$;
    CREATE FUNCTION kiln_config_number(doc JSONB, key TEXT) RETURNS DOUBLE PRECISION
    LANGUAGE sql IMMUTABLE
    AS $f$ SELECT CASE jsonb_typeof(doc #> string_to_array(key, '.'))
                  WHEN 'number' THEN (doc #>> string_to_array(key, '.'))::DOUBLE PRECISION
                  WHEN 'boolean' THEN CASE WHEN doc #> string_to_array(key, '.') = 'true'::jsonb
                                      THEN 1 ELSE 0 END END $f$;)sql";
  static const std::regex integer(R"(\bINTEGER\b)"), real(R"(\bREAL\b)");
  static const std::regex without_rowid(R"(\bWITHOUT ROWID\b)");
  // Migration 4 gives runs made before run identities a random uuid; a PostgreSQL store has none
  // such, and this is PostgreSQL's random uuid.
  static const std::regex random_uuid(R"(UPDATE runs SET uuid = [^;]*;)");
  std::string out = replace_text(sqlite_sql, kSqliteNow, kPostgresNow);
  out = std::regex_replace(out, integer, "BIGINT");
  out = std::regex_replace(out, real, "DOUBLE PRECISION");
  out = std::regex_replace(out, without_rowid, "");
  out = std::regex_replace(out, random_uuid, "UPDATE runs SET uuid = gen_random_uuid()::text;");
  return replace_text(out, "config_json TEXT;", kConfigJson);
}

std::string glob_to_regex(const std::string& glob) {
  std::string out = "^";
  for (size_t i = 0; i < glob.size(); ++i) {
    const char c = glob[i];
    const size_t close = c == '[' ? glob.find(']', i + 2) : std::string::npos;
    if (c == '*') {
      out += ".*";
    } else if (c == '?') {
      out += '.';
    } else if (close != std::string::npos) {
      // A class, as GLOB reads it: [abc], [a-z], [^abc]; `]` first is a member.
      out += '[';
      for (size_t j = i + 1; j < close; ++j)
        out += glob[j] == '\\' ? std::string("\\\\") : std::string(1, glob[j]);
      out += ']';
      i = close;
    } else {
      if (std::strchr("\\.^$|()[]{}+*?", c)) out += '\\';
      out += c;
    }
  }
  return out + "$";
}

}  // namespace kiln
