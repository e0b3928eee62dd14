#include "core/store/runs/output_guard.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "core/store/runs/paths.h"
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

// Whether `path` is a SQLite database: its header's first 16 bytes (sqlite.org/fileformat.html).
bool is_sqlite_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char header[16] = {};
  return in.read(header, sizeof header) &&
         std::string(header, sizeof header) == std::string("SQLite format 3\0", 16);
}

// Any SQLite database, or a side file beside one: another run store, a browser's history.
void refuse_database(const std::string& output, const std::string& option) {
  std::error_code ec;
  if (fs::is_regular_file(output, ec) && is_sqlite_file(output)) {
    throw UserError(fmt::format(
        "{} {}: that is a SQLite database (another run store?): writing it would destroy it; "
        "choose another output file",
        option, output));
  }
  for (const StoreFile& file : kStoreFiles) {
    const size_t cut = output.size() - std::min(output.size(), file.suffix.size());
    if (file.suffix.empty() || output.compare(cut, std::string::npos, file.suffix) != 0) continue;
    const std::string database = output.substr(0, cut);
    if (!fs::is_regular_file(database, ec) || !is_sqlite_file(database)) continue;
    throw UserError(fmt::format(
        "{} {}: that is {} of the SQLite database '{}': writing it would corrupt the database; "
        "choose another output file",
        option, output, file.what, database));
  }
}

void refuse_read_file(const std::string& output, const fs::path& read, const std::string& what,
                      const std::string& option) {
  if (!same_file(output, read)) return;
  throw UserError(fmt::format(
      "{} {}: that is {} '{}', which this command reads: writing it would destroy it; choose "
      "another output file",
      option, output, what, read.string()));
}

// `output` may be none of the command's inputs, nor lie in a folder it reads (by any path, the
// files a folder links to included: a Hub cache's snapshot links to its blobs); an output folder
// may hold none of them, as what the command writes there could replace one.
void refuse_inputs(const std::string& output, const std::vector<CommandInput>& reads,
                   const std::string& option, OutputKind kind) {
  std::error_code ec;
  for (const CommandInput& in : reads) {
    if (in.path.empty()) continue;
    if (fs::is_directory(in.path, ec)) {
      refuse_output_inside(output, in.path, in.what + ", which this command reads", option);
      for (const auto& entry : fs::directory_iterator(in.path, ec))
        refuse_read_file(output, entry.path(), "a file of " + in.what, option);
    } else {
      refuse_read_file(output, in.path, in.what, option);
    }
    if (kind != OutputKind::kFolder) continue;
    const fs::path below = resolved(in.path).lexically_relative(resolved(output));
    if (below.empty() || *below.begin() == "..") continue;
    throw UserError(
        fmt::format("{} {}: that folder holds {} '{}', which this command reads: choose a folder "
                    "of its own",
                    option, output, in.what, in.path));
  }
}

void refuse_run_folder(const std::string& output, const std::string& option) {
  const std::optional<std::string> folder = run_folder_holding(output);
  if (!folder) return;
  throw UserError(fmt::format(
      "{} {}: that is inside the run folder '{}', whose snapshots and marker Kiln keeps: writing "
      "there could replace them; choose a path outside every run's folder",
      option, output, *folder));
}

void refuse_shared_inode(const std::string& output, const std::string& option) {
  struct stat st {};
  if (::lstat(output.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink < 2) return;
  throw UserError(fmt::format(
      "{} {}: that file has {} hard links, and another of its names may be a run's snapshot or "
      "store: remove it first or choose another name",
      option, output, st.st_nlink));
}

// A folder an export or a prepare fills must not hold a store or a run: `-o runs` would mix
// model files among them.
void refuse_kiln_files_in(const std::string& folder, const std::string& option) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const fs::path path = entry.path();
    const char* what = nullptr;
    if (entry.is_regular_file(ec) && is_sqlite_file(path)) what = "a run store";
    if (entry.is_directory(ec) && is_run_folder(path.string())) what = "a run's folder";
    if (!what) continue;
    throw UserError(fmt::format("{} {}: that folder holds '{}', {}: choose a folder of its own",
                                option, folder, path.string(), what));
  }
}

}  // namespace

void check_output_path(const std::string& output, const std::string& db, const std::string& option,
                       OutputKind kind, const std::vector<CommandInput>& reads) {
  if (output.empty()) return;
  refuse_output_over_store(output, db, option);
  refuse_database(output, option);
  refuse_run_folder(output, option);
  refuse_inputs(output, reads, option, kind);
  refuse_shared_inode(output, option);
  if (kind == OutputKind::kFolder) refuse_kiln_files_in(output, option);
}

void refuse_output_over_store(const std::string& output, const std::string& db,
                              const std::string& option) {
  if (output.empty() || db.empty()) return;  // stdout; no store named
  // SQLite keeps the side files beside the database file itself, a symlink to it resolved (its
  // unix VFS follows links): for a store named through `link.db`, the log is `main.db-wal`, which
  // no path under the link's name reaches while it does not exist.
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
