#include "core/store/postgres.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

namespace {

// The type oid of float8: a double is sent as one, so that it compares with an integer column.
// Integers and text go untyped (0), and PostgreSQL reads them as the statement needs.
constexpr unsigned kFloat8Oid = 701;

// libpq's message on one line: it ends with a newline and may hold a tabbed hint.
std::string one_line(const char* message) {
  std::string out;
  for (const char* p = message; p && *p; ++p) {
    const bool space = *p == '\n' || *p == '\t' || *p == '\r' || *p == ' ';
    if (!space)
      out += *p;
    else if (!out.empty() && out.back() != ' ')
      out += ' ';
  }
  while (!out.empty() && out.back() == ' ')
    out.pop_back();
  return out.empty() ? "the server gave no reason" : out;
}

// The user part of a URL: "user:password" of "postgresql://user:password@host/db".
std::string user_part(const std::string& url) {
  const size_t start = url.find("://") + 3;
  const size_t end = url.find_first_of("/?", start);
  const std::string authority = url.substr(start, end == std::string::npos ? end : end - start);
  const size_t at = authority.rfind('@');
  return at == std::string::npos ? "" : authority.substr(0, at);
}

// libpq's connection keywords (its manual, "Parameter Key Words"), as of PostgreSQL 17.
const char* const kConnectionKeywords[] = {"host",
                                           "hostaddr",
                                           "port",
                                           "dbname",
                                           "user",
                                           "password",
                                           "passfile",
                                           "require_auth",
                                           "channel_binding",
                                           "connect_timeout",
                                           "client_encoding",
                                           "options",
                                           "application_name",
                                           "fallback_application_name",
                                           "keepalives",
                                           "keepalives_idle",
                                           "keepalives_interval",
                                           "keepalives_count",
                                           "tcp_user_timeout",
                                           "replication",
                                           "gssencmode",
                                           "sslmode",
                                           "requiressl",
                                           "sslcompression",
                                           "sslcert",
                                           "sslkey",
                                           "sslpassword",
                                           "sslcertmode",
                                           "sslrootcert",
                                           "sslcrl",
                                           "sslcrldir",
                                           "sslsni",
                                           "requirepeer",
                                           "ssl_min_protocol_version",
                                           "ssl_max_protocol_version",
                                           "krbsrvname",
                                           "gsslib",
                                           "gssdelegation",
                                           "service",
                                           "target_session_attrs",
                                           "load_balance_hosts"};

// Where each "password =" of a connection string's value starts and ends (libpq: a value is a
// run of non-space characters, or single-quoted with \' and \\ escapes).
std::vector<std::pair<size_t, size_t>> password_values(const std::string& text) {
  std::vector<std::pair<size_t, size_t>> values;
  static const std::regex key(R"((^|\s)password\s*=\s*)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), key); it != std::sregex_iterator();
       ++it) {
    size_t at = static_cast<size_t>(it->position() + it->length()), end = at;
    if (end < text.size() && text[end] == '\'') {
      for (++end; end < text.size() && text[end] != '\''; ++end)
        if (text[end] == '\\') ++end;
      end = std::min(end + 1, text.size());
    } else {
      while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])))
        ++end;
    }
    values.emplace_back(at, end);
  }
  return values;
}

}  // namespace

bool is_connection_string(const std::string& text) {
  static const std::regex first(R"(^\s*([A-Za-z_]+)\s*=)");
  std::smatch match;
  if (!std::regex_search(text, match, first)) return false;
  for (const char* keyword : kConnectionKeywords) {
    if (match[1] == keyword) return true;
  }
  return false;
}

std::string masked_url(const std::string& url) {
  if (is_connection_string(url)) {
    std::string masked = url;
    const auto values = password_values(url);
    for (auto it = values.rbegin(); it != values.rend(); ++it)
      masked.replace(it->first, it->second - it->first, "***");
    return masked;
  }
  const std::string user = user_part(url);
  const size_t colon = user.find(':');
  if (colon == std::string::npos) return url;
  const size_t start = url.find("://") + 3 + colon + 1;
  return url.substr(0, start) + "***" + url.substr(start + user.size() - colon - 1);
}

void refuse_password_in_url(const std::string& url) {
  if (is_connection_string(url)) {
    if (password_values(url).empty()) return;
    throw UserError(fmt::format(
        "run store '{}' carries a password: Kiln never keeps one in a run's config or prints it: "
        "remove password= and give it to libpq with PGPASSWORD, ~/.pgpass or a service file",
        masked_url(url)));
  }
  const size_t query = url.find('?');
  const bool in_query =
      query != std::string::npos && (url.find("?password=", query) != std::string::npos ||
                                     url.find("&password=", query) != std::string::npos);
  if (user_part(url).find(':') == std::string::npos && !in_query) return;
  throw UserError(fmt::format(
      "run store '{}' carries a password: Kiln never keeps one in a run's config or prints it: "
      "remove it from the URL and give it to libpq with PGPASSWORD, ~/.pgpass or a service file",
      in_query ? url.substr(0, query) + "?..." : masked_url(url)));
}

void PgResultFree::operator()(pg_result* result) const {
  PQclear(result);
}

PgSession::PgSession(const std::string& url, bool read_only) {
  // dbname last: what the URL says wins over these defaults.
  const char* keys[] = {"connect_timeout", "application_name", "client_encoding",
                        "options",         "dbname",           nullptr};
  const char* values[] = {"10",        "kiln",
                          "UTF8",      read_only ? "-c default_transaction_read_only=on" : "",
                          url.c_str(), nullptr};
  conn_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (PQstatus(conn_) != CONNECTION_OK) {
    const std::string why = one_line(PQerrorMessage(conn_));
    PQfinish(conn_);
    conn_ = nullptr;
    throw PgError(why);
  }
  // NOTICEs ("table exists, skipping") are not the user's business.
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
}

PgSession::~PgSession() {
  PQfinish(conn_);
}

bool PgSession::lost() const {
  return PQstatus(conn_) == CONNECTION_BAD;
}

void PgSession::reconnect() {
  PQreset(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) throw PgError(one_line(PQerrorMessage(conn_)));
}

namespace {

PgResult checked(pg_conn* conn, pg_result* raw) {
  PgResult result(raw);
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
  throw PgError(one_line(result ? PQresultErrorMessage(result.get()) : PQerrorMessage(conn)));
}

}  // namespace

void PgSession::exec(const std::string& sql) {
  checked(conn_, PQexec(conn_, sql.c_str()));
}

void PgSession::exec_quietly(const std::string& sql) noexcept {
  PQclear(PQexec(conn_, sql.c_str()));
}

PgResult PgSession::run(const std::string& sql,
                        const std::vector<std::optional<std::string>>& values,
                        const std::vector<unsigned>& types) {
  std::vector<const char*> raw;
  for (const auto& value : values)
    raw.push_back(value ? value->c_str() : nullptr);
  return checked(conn_, PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()),
                                     types.data(), raw.data(), nullptr, nullptr, 0));
}

const std::vector<std::string>& PgSession::primary_key(const std::string& table) {
  auto found = primary_keys_.find(table);
  if (found != primary_keys_.end()) return found->second;
  PgResult key =
      run("SELECT a.attname::text FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
          "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass($1) AND i.indisprimary",
          {table}, {0});
  std::vector<std::string>& columns = primary_keys_[table];
  for (int row = 0; row < PQntuples(key.get()); ++row)
    columns.push_back(PQgetvalue(key.get(), row, 0));
  return columns;
}

bool PgSession::has_table(const std::string& table) {
  PgResult found = run("SELECT to_regclass($1) IS NOT NULL", {table}, {0});
  return std::string(PQgetvalue(found.get(), 0, 0)) == "t";
}

PgStatement::PgStatement(PgSession& session, const std::string& sql) : session_(session) {
  sql_ = postgres_sql(
      sql, [&](const std::string& table) { return session_.primary_key(table); }, glob_params_);
  values_.resize(glob_params_.size());
  types_.resize(glob_params_.size(), 0);
}

void PgStatement::bind(int index, const SqlValue& value) {
  const size_t i = static_cast<size_t>(index) - 1;
  if (i >= values_.size()) throw PgError(fmt::format("no parameter {} in the statement", index));
  types_[i] = 0;
  if (const auto* real = std::get_if<double>(&value)) {
    // As SQLite keeps a NaN: NULL.
    if (std::isnan(*real)) return bind_null(index);
    types_[i] = kFloat8Oid;
    values_[i] =
        std::isinf(*real) ? (*real > 0 ? "Infinity" : "-Infinity") : fmt::format("{}", *real);
  } else if (const auto* integer = std::get_if<int64_t>(&value)) {
    values_[i] = std::to_string(*integer);
  } else {
    values_[i] = std::get<std::string>(value);
  }
  if (glob_params_[i]) {
    types_[i] = 0;
    values_[i] = glob_to_regex(*values_[i]);
  }
}

void PgStatement::bind_null(int index) {
  const size_t i = static_cast<size_t>(index) - 1;
  if (i >= values_.size()) throw PgError(fmt::format("no parameter {} in the statement", index));
  values_[i].reset();
  types_[i] = 0;
}

bool PgStatement::step() {
  if (!result_) {
    result_ = session_.run(sql_, values_, types_);
    row_ = -1;
  }
  return ++row_ < PQntuples(result_.get());
}

void PgStatement::reset() {
  result_.reset();
  row_ = -1;
  for (size_t i = 0; i < values_.size(); ++i) {
    values_[i].reset();
    types_[i] = 0;
  }
}

bool PgStatement::is_null(int column) const {
  return PQgetisnull(result_.get(), row_, column) == 1;
}

std::string PgStatement::text(int column) const {
  return PQgetvalue(result_.get(), row_, column);
}

int64_t PgStatement::integer(int column) const {
  if (is_null(column)) return 0;
  const char* value = PQgetvalue(result_.get(), row_, column);
  if (value[0] == 't' || value[0] == 'f') return value[0] == 't';  // a boolean, as SQLite's 1/0
  char* end = nullptr;
  const long long n = std::strtoll(value, &end, 10);
  // sum() and avg() of integers are numeric: "12.0" reads as SQLite's integer would.
  return *end ? static_cast<int64_t>(std::strtod(value, nullptr)) : n;
}

double PgStatement::real(int column) const {
  // strtod reads PostgreSQL's NaN, Infinity and -Infinity too.
  return std::strtod(PQgetvalue(result_.get(), row_, column), nullptr);
}

}  // namespace kiln
