#include "core/store/history/removal.h"

#include <filesystem>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/store/db/connection.h"
#include "core/store/runs/paths.h"
#include "core/store/runs/writer.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;

// Why `kiln runs rm` left the folder of a run it removed.
std::string left_folder_warning(const RunRecord& run, const std::string& folder) {
  if (run.folder.empty()) {
    return fmt::format(
        "run '{}' was made before Kiln marked run folders, so '{}' is left as it is: delete it "
        "by hand if it holds only that run's files",
        run.name, folder);
  }
  return fmt::format(
      "'{}' does not carry run '{}''s marker (run.json naming {}), so it is left as it is: "
      "delete it by hand if it is that run's",
      folder, run.name, run.uuid);
}

}  // namespace

std::string remove_run(HistoryDb& db, const RunRecord& run,
                       const std::function<void(const std::string&)>& warn) {
  Connection& store = db.for_writing();  // refuses a read-only or newer store before anything
  // An older store is upgraded first, as every command that writes does: its run_ids table
  // then remembers this run's id, which no later run gets.
  RunStore{db.path()};
  const auto paths = paths_of(run);
  const bool exists = paths && fs::is_directory(paths->folder());
  // The row's word is not enough: only a folder whose marker names the run is the run's to
  // delete (a legacy run's folder, <out_dir>/<name>, may hold another run's files).
  const std::optional<RunMarker> marker = exists ? read_run_marker(*paths) : std::nullopt;
  const bool own = marker && !run.folder.empty() && marker->uuid == run.uuid;
  std::optional<FileLock> lock;
  if (own || (exists && fs::exists(paths->lock()))) {
    // The lock `kiln run` and `kiln resume` hold while they train.
    lock.emplace(paths->lock(),
                 fmt::format("run '{}' is being trained by a kiln process right now: stop it "
                             "before removing it",
                             run.name));
  }
  // The other stores the marker says list this run (an import, or the original of one) still
  // need its folder: they keep it, and the marker forgets this store.
  std::vector<std::string> others;
  const std::string here = store_location(db.path());
  for (const std::string& other : own ? marker->stores : std::vector<std::string>{}) {
    if (other != here) others.push_back(other);
  }
  Statement(store, "DELETE FROM runs WHERE id = ?", {run.id}).step();
  if (!own) {
    if (exists) warn(left_folder_warning(run, paths->folder()));
    return "";
  }
  if (!others.empty()) {
    set_marker_stores(*paths, others);
    warn(
        fmt::format("kept '{}': run '{}' is also in the run store{} {}, which still use{} its "
                    "snapshots; `kiln runs rm` there deletes the folder",
                    paths->folder(), run.name, others.size() == 1 ? "" : "s", join(others, ", "),
                    others.size() == 1 ? "s" : ""));
    return "";
  }
  const std::string& folder = paths->folder();
  std::error_code ec;
  fs::remove_all(folder, ec);
  if (ec) {
    throw UserError(
        fmt::format("removed run '{}' from the store but not its folder '{}': {}: "
                    "delete the folder by hand",
                    run.name, folder, ec.message()));
  }
  // A sweep member lives in <out_dir>/<sweep>/<member>@<id>: the last member out removes the
  // sweep's folder too (never out_dir itself: only the folders the name adds).
  fs::path dir = fs::path(folder).parent_path();
  for (size_t depth = split(run.name, '/').size(); depth > 1; --depth, dir = dir.parent_path()) {
    if (!fs::is_empty(dir, ec) || ec || !fs::remove(dir, ec)) break;
  }
  return folder;
}

}  // namespace kiln
