// File-system helpers: globbing, directories, and writes that survive a crash at any moment.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace kiln {

// Expands `*` and `?` in the file-name part of a path pattern; sorted; no match -> empty.
std::vector<std::string> glob_files(const std::string& pattern);
// `path` made absolute against the current directory, lexically (no symlink resolved, `*` kept);
// "" stays "". How run.out_dir, run.db and the files a config names are kept once a run is made,
// so that every later command finds the same files whatever directory it runs in.
std::string absolute_path(const std::string& path);
// Creates a file's parent directories; a UserError naming the path when that fails.
void ensure_parent_dir(const std::string& path);
// Whether `name` can be a folder path under another folder without climbing out of it: relative,
// no empty, "." or ".." part, no backslash or control character, at most 200 characters. (What a
// new run may be named is stricter: check_run_name, core/store/runs/paths.h; this is what keeps
// the names of runs made before that rule inside their run.out_dir.)
bool is_contained_name(const std::string& name);

// The UserError of a failed system call on a file: "cannot WHAT 'PATH': strerror(err): check
// the path, its permissions and free disk space".
[[noreturn]] void fail_io(const char* what, const std::string& path, int err);

// A file written to a new temporary beside `path` (`path.<pid>-<n>.tmp`), flushed, fsync'ed and
// renamed over `path`: readers see the old file or the new one, never half of one, and no
// existing file but `path` itself is ever replaced.
void write_file_atomic(const std::string& path, const std::string& contents);

// Writes `contents` to a new file at `path` and fsyncs it (no rename: for files inside a
// directory that is itself renamed into place).
void write_file_synced(const std::string& path, const std::string& contents);
// A new file at `path` written piece by piece from a producer that must not see errors (LibTorch's
// archive writer aborts the process when its sink fails inside a destructor): write() takes
// every piece and remembers the first failure; finish() fsyncs, closes, and throws that failure
// as a UserError naming the file.
class SyncedFileWriter {
 public:
  explicit SyncedFileWriter(std::string path);
  ~SyncedFileWriter();
  SyncedFileWriter(const SyncedFileWriter&) = delete;
  SyncedFileWriter& operator=(const SyncedFileWriter&) = delete;

  void write(const void* data, size_t bytes);
  void finish();

 private:
  std::string path_;
  int fd_ = -1;
  int error_ = 0;                 // errno of the first failure
  const char* failed_ = nullptr;  // what failed: write, sync, close
};

// Replaces the folder `dir` as one step: a staging folder beside it (`dir.<pid>.staging`) gets
// the entries of the old `dir` that `keep` accepts (files hard-linked, folders copied that way),
// then `fill` writes the rest, then the two are exchanged (renameat2's RENAME_EXCHANGE; a rename
// when `dir` is new) and the old one removed. A reader sees the old folder or the new one, never a
// mix; a failure in `fill` leaves `dir` as it was. Where the file system cannot exchange (NFS,
// FUSE: EINVAL), the old folder is renamed aside first and the new one into its place: a reader
// may then find no folder for a moment, and nothing is lost (fs.cpp). A `dir` that is a symbolic
// link stays one: the folder it points to is replaced.
void replace_folder(const std::string& dir, const std::function<bool(const std::string&)>& keep,
                    const std::function<void(const std::string&)>& fill);

// fsync of a directory, so that a rename or a new entry in it survives a power loss.
void sync_dir(const std::string& path);

// A fresh directory under the system's temp dir, removed with its contents when destroyed.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string str() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// An exclusive advisory lock (flock) on `path`, held for the object's lifetime. The kernel drops
// it when the process dies, however it dies, so a lock is never left stale.
class FileLock {
 public:
  // A UserError with `busy_message` when another process holds the lock.
  FileLock(const std::string& path, const std::string& busy_message);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace kiln
