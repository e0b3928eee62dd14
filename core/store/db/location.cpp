// Where a run store lives (core/store/db/location.h): the URL and connection-string checks on
// run.db and --db, and masking the password some carry. Only text is read here: no store is
// opened.
#include "core/store/db/location.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {

namespace {

// "mysql://" of "mysql://host/db": a URL's scheme, or "" for a path.
std::string url_scheme(const std::string& location) {
  const size_t end = location.find("://");
  if (end == std::string::npos || end == 0) return "";
  for (size_t i = 0; i < end; ++i) {
    const unsigned char c = location[i];
    if (!std::isalnum(c) && !std::strchr("+.-", c)) return "";
  }
  return location.substr(0, end + 3);
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

void check_store_url(const std::string& location) {
  if (is_connection_string(location)) {
    refuse_password_in_url(location);
    return;
  }
  const std::string scheme = url_scheme(location);
  if (scheme.empty()) return;
  if (!is_database_url(location)) {
    throw UserError(fmt::format(
        "run store '{}': '{}' is no store Kiln knows: run.db and --db take a file path (SQLite) "
        "or postgresql://user@host:port/dbname",
        location, scheme));
  }
  refuse_password_in_url(location);
}

bool is_database_url(const std::string& location) {
  return location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0 ||
         is_connection_string(location);
}

std::string store_location(const std::string& location) {
  check_store_url(location);
  return is_database_url(location) ? location : absolute_path(location);
}

bool store_may_exist(const std::string& location) {
  check_store_url(location);
  std::error_code ec;
  return is_database_url(location) || std::filesystem::is_regular_file(location, ec);
}

void fail_no_store(const std::string& location, const std::string& fix) {
  struct stat st {};
  if (::stat(location.c_str(), &st) != 0 && errno != ENOENT && errno != ENOTDIR) {
    throw UserError(
        fmt::format("cannot read '{}': {}: give this user access to it and the folders above it",
                    location, std::strerror(errno)));
  }
  if (::stat(location.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    throw UserError(
        fmt::format("no run store at '{}': that is a folder, not a file: {}", location, fix));
  }
  throw UserError(fmt::format("no run store at '{}': {}", location, fix));
}

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

}  // namespace kiln
