#include "core/store/runs/output_guard.h"

#include <filesystem>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;

// SQLite's files for a database at `db`: the database, its write-ahead log and shared-memory
// index (WAL mode, Kiln's), and its rollback journal (any other mode), with what each is.
struct StoreFile {
  std::string suffix;
  const char* what;
};
const StoreFile kStoreFiles[] = {{"", ""},
                                 {"-wal", "the write-ahead log"},
                                 {"-shm", "the shared-memory index"},
                                 {"-journal", "the rollback journal"}};

// `path` absolute, with the symlinks of the part that exists resolved and `.`/`..` gone.
fs::path resolved(const fs::path& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  if (ec) absolute = path;
  fs::path canonical = fs::weakly_canonical(absolute, ec);
  return ec ? absolute.lexically_normal() : canonical;
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    const bool same = fs::equivalent(a, b, ec);  // one inode: hard links too
    if (!ec) return same;
  }
  return resolved(a) == resolved(b);
}

}  // namespace

void refuse_output_over_store(const std::string& output, const std::string& db,
                              const std::string& option) {
  if (output.empty() || db.empty()) return;  // stdout; no store named
  // SQLite keeps the side files beside the database file itself, a symlink to it resolved (its
  // unix VFS follows links): for a store named through `link.db`, the log is `main.db-wal`, which
  // no path under the link's name reaches while it does not exist (issue 39).
  const std::vector<std::string> names = {db, resolved(db).string()};
  for (const StoreFile& file : kStoreFiles) {
    std::string store_file;
    for (const std::string& name : names) {
      if (same_file(output, name + file.suffix)) store_file = name + file.suffix;
    }
    if (store_file.empty()) continue;
    const std::string what = file.suffix.empty()
                                 ? "the run store"
                                 : fmt::format("'{}', {} of the run store", store_file, file.what);
    throw UserError(fmt::format(
        "{} {}: that is {} '{}': writing it would destroy the store's runs; choose another "
        "output file",
        option, output, what, db));
  }
}

void refuse_output_inside(const std::string& output, const std::string& folder,
                          const std::string& what, const std::string& option) {
  if (output.empty() || folder.empty()) return;
  const fs::path below = resolved(output).lexically_relative(resolved(folder));
  if (below.empty() || *below.begin() == "..") return;  // elsewhere
  throw UserError(fmt::format("{} {}: that is inside '{}', {}: choose a folder outside it", option,
                              output, folder, what));
}

}  // namespace kiln
