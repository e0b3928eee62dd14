#include "core/store/db/postgres.h"

#include <libpq-fe.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "core/store/db/postgres_dialect.h"

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

}  // namespace

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
