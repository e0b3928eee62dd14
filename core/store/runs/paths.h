// A run's identity, its folder, and every path inside that folder, made here and nowhere else
// (as leveldb's db/filename.h names every file of a database):
//
//   <run.out_dir>/<run name>@<first 8 hex digits of the run's uuid>/
//                    run.json        the marker: the run's uuid and name, and the run stores that
//                                    list it (`kiln runs rm` deletes only a folder whose marker
//                                    names the run and no other store)
//                    lock            flock'ed by the kiln process training the run
//                    console.log     what a sweep member printed
//                    snapshots/      one folder per snapshot (core/checkpoint/snapshot.h)
//                       <label>/
//                    unstored-rows.db  a SQLite run store with the rows a server that went away
//                                    never took (core/store/runs/writer.h), for `kiln runs import`
//
// The folder is made from the run's identity, not its name alone: two runs (of one name in two
// run stores, or `a` and `a/b`) never share one, and no name can reach into another run's folder
// ('@' is not allowed in names). It is absolute, and stored in runs.folder when the run is made:
// every command reads it from there. A run made before runs had identities (runs.folder NULL)
// keeps its legacy folder `<run.out_dir>/<name>`.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct RunRecord;

// The rule for a new run's name, and the one place it is spelled: 1 to 200 characters from ASCII
// letters, digits and . _ - = , + : in parts separated by single '/' (no empty, '.' or '..' part,
// no leading or trailing '/'). A sweep member's name, <sweep>/<key=value,...>, follows it too.
bool is_run_name(const std::string& name);
// A UserError "run name 'NAME' cannot be used: <the rule>: <fix>" when `name` breaks the rule.
void check_run_name(const std::string& name, const std::string& fix = "pick another --name");

// The environment variable through which `kiln sweep` hands a new member's `kiln run` the
// identity it chose for it (so that the member's console.log is in its folder from the start).
constexpr const char* kChosenRunUuid = "KILN_RUN_UUID";

// A fresh run identity: a random (version 4) UUID, 36 characters, from the system's entropy.
std::string new_run_uuid();
// Whether `text` has the form new_run_uuid() gives (lowercase hex in 8-4-4-4-12 groups).
bool is_run_uuid(const std::string& text);

class RunPaths {
 public:
  // A new run's folder: <out_dir, made absolute>/<name>@<first 8 hex digits of `uuid`>. A
  // UserError when the name breaks the rule (check_run_name).
  static RunPaths for_new_run(const std::string& out_dir, const std::string& name,
                              const std::string& uuid);
  // The folder a run's row names (runs.folder), as stored.
  static RunPaths in_folder(std::string folder, std::string name);
  // A run made before run identities: <out_dir>/<name>, relative to the current directory when
  // out_dir is; none for a name that could reach outside out_dir (a store edited by hand).
  static std::optional<RunPaths> legacy(const std::string& out_dir, const std::string& name);

  const std::string& name() const { return name_; }
  const std::string& folder() const { return folder_; }
  std::string marker() const;
  std::string lock() const;
  std::string console_log() const;
  std::string snapshots() const;
  std::string snapshot(const std::string& label) const;
  std::string unstored_rows() const;

 private:
  RunPaths(std::string folder, std::string name);

  std::string folder_;
  std::string name_;
};

// Whether the folder `path` is a run's: it carries a run's marker, or a snapshots folder (a run
// made before markers).
bool is_run_folder(const std::string& path);
// The run folder `path` lies in or is (is_run_folder of it or an ancestor, symlinks resolved);
// none otherwise. For the commands that write files: no option may reach into a run's files.
std::optional<std::string> run_folder_holding(const std::string& path);

// Where a run's files are: the folder its row names (runs.folder), or for a run made before run
// identities its legacy folder from the stored run.out_dir; none for a legacy name that could
// reach outside run.out_dir (never one `kiln run` accepts, but a store edited by hand could hold
// one).
std::optional<RunPaths> paths_of(const RunRecord& run);
// paths_of, or a UserError for such a name: for the commands that train or load the run.
RunPaths require_paths(const RunRecord& run);

// The folder's marker (run.json): the run's uuid, and the run stores that list the run, the one
// it was made in and each it was imported into, so that `kiln runs rm` deletes the folder only
// when no other store still lists the run (else removing an imported copy would delete the
// original's snapshots). A marker without stores is older: the run's one store was its owner.
struct RunMarker {
  std::string uuid;
  std::vector<std::string> stores;  // as store_location() keeps them: absolute paths or URLs
};
// Writes the folder's marker (creating the folder): the run's uuid and name, and `store`.
void write_run_marker(const RunPaths& paths, const std::string& uuid, const std::string& store);
// The folder's marker; none without a readable one.
std::optional<RunMarker> read_run_marker(const RunPaths& paths);
// Rewrites the marker with `stores` (atomically). False when it cannot be written.
bool set_marker_stores(const RunPaths& paths, const std::vector<std::string>& stores);

}  // namespace kiln
