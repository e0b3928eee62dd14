// Where a run store lives: a file path (SQLite) or a PostgreSQL URL or libpq connection string,
// and the checks every location passes before anything opens it: a scheme Kiln knows, and no
// password in the text. Separate from core/store/db/connection.h because the commands ask these
// of run.db and --db without opening a store, and from core/store/db/postgres.h because no libpq
// is needed to read a URL. Credentials come only from libpq (PGPASSWORD, ~/.pgpass, a service
// file): a URL that carries a password is refused, so none is ever stored in a run's config or
// printed.
#pragma once

#include <string>

namespace kiln {

// True for a postgresql:// (or postgres://) URL or a libpq key/value connection string
// ("host=db1 dbname=runs"), a PostgreSQL store; anything else is a path.
bool is_database_url(const std::string& location);
// How run.db and --db are kept: a URL as given, a path made absolute. A UserError for a URL of
// another scheme, or one that carries a password (libpq's PGPASSWORD, ~/.pgpass or a service
// file give it: a run's stored config and its console never hold one).
std::string store_location(const std::string& location);
// Whether a command that must not create a store may open `location`: an existing file, or a URL
// (the server answers for it).
bool store_may_exist(const std::string& location);
// The UserError for a store that store_may_exist() did not find: "no run store at 'PATH': FIX",
// or, when the path cannot be looked at, "cannot read 'PATH': permission denied: ..." (a store
// there may well exist).
[[noreturn]] void fail_no_store(const std::string& location, const std::string& fix);

// A UserError for a URL (or libpq connection string) Kiln cannot use.
void check_store_url(const std::string& location);

// True for libpq's key/value connection string, "host=db1 port=5432 dbname=runs user=kiln": its
// first word is one of libpq's connection keywords followed by '='. libpq takes it where it takes
// a URL, so it names a PostgreSQL store as a postgresql:// URL does (not a SQLite file name).
bool is_connection_string(const std::string& text);

// `url` (a URL or a key/value connection string) with any password replaced by "***".
std::string masked_url(const std::string& url);
// A UserError when `url` carries a password (in a URL's user part or as ?password=, or as a
// connection string's password=), its text masked.
void refuse_password_in_url(const std::string& url);

}  // namespace kiln
