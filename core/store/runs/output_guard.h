// The checks every output option of every command goes through before anything is computed
// (`kiln eval --details/--logits`, `kiln export -o`, `kiln runs export/plot -o`, `kiln report
// -o`, `kiln prepare --out`, tensorboard folders): what Kiln writes must not replace what Kiln
// keeps. A run store and SQLite's files beside it (`-wal`, `-shm`, `-journal`), and every file of
// a run's folder (its snapshots, marker, lock, log), by any path: `./x.db`, `..`, a symlink, a
// hard link. Writing there would replace a store's runs with a CSV, or a snapshot with JSON.
//
// Nor may it replace what the command itself reads (a task's items, an `--hf` folder's weights)
// or any other SQLite database, known by its header whatever its name: `--details scratch.db`
// would leave "file is not a database".
#pragma once

#include <string>
#include <vector>

namespace kiln {

// What an output option names: one file, or a folder the command fills.
enum class OutputKind { kFile, kFolder };

// A file or folder the command reads, as its errors name it ("the items file of task 'mc'").
struct CommandInput {
  std::string path;
  std::string what;
};

// A UserError "OPTION OUTPUT: ... : choose ..." when `output` is, or (for a folder) holds, one of
// Kiln's own files: the run store at `db` ("" when the command has none) or one of its side
// files; any SQLite database or its side file; anything inside a run's folder
// (core/store/runs/paths.h: run_folder_holding); one of `reads`, a file inside one of them that
// is a folder, or (for a folder) a folder holding one of them; a file with other hard links,
// which may be a run's; for a folder, a run store or a run's folder in it. Nothing for ""
// (stdout) or a path clear of them.
void check_output_path(const std::string& output, const std::string& db, const std::string& option,
                       OutputKind kind = OutputKind::kFile,
                       const std::vector<CommandInput>& reads = {});

// A UserError "OPTION OUTPUT: that is the run store 'DB': ..." (or "that is 'DB-wal', the
// write-ahead log of the run store 'DB'", ...) when `output` and the store at `db` (or one of its
// side files) are the same file; nothing otherwise. Same file: the same inode when both exist, else
// the same absolute path with symlinks in its existing part resolved and `.`/`..` removed.
void refuse_output_over_store(const std::string& output, const std::string& db,
                              const std::string& option = "-o");
// A UserError "OPTION OUTPUT: that is inside FOLDER, WHAT: ..." when `output` is `folder` or lies
// under it (paths resolved as above); nothing otherwise.
void refuse_output_inside(const std::string& output, const std::string& folder,
                          const std::string& what, const std::string& option = "-o");

}  // namespace kiln
