#include "core/util/fs.h"

#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/fault.h"
#include "core/util/text.h"

namespace kiln {

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> out;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i)
      out.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

std::string absolute_path(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec) {
    throw UserError(fmt::format("cannot make '{}' an absolute path: {}: pass an absolute path",
                                path, ec.message()));
  }
  return absolute.lexically_normal().string();
}

void ensure_parent_dir(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) {
    throw UserError(fmt::format("cannot create directory '{}': {}: choose a writable location",
                                parent.string(), ec.message()));
  }
}

void fail_io(const char* what, const std::string& path, int err) {
  throw UserError(
      fmt::format("cannot {} '{}': {}: check the path, its permissions and free disk "
                  "space",
                  what, path, std::strerror(err)));
}

void write_file_synced(const std::string& path, const std::string& contents) {
  SyncedFileWriter file(path);
  file.write(contents.data(), contents.size());
  file.finish();
}

SyncedFileWriter::SyncedFileWriter(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_io("create", path_, errno);
  if (fault_due("disk.full")) {
    error_ = ENOSPC;
    failed_ = "write";
  }
}

SyncedFileWriter::~SyncedFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void SyncedFileWriter::write(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (error_ == 0 && bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error_ = errno;
      failed_ = "write";
      break;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void SyncedFileWriter::finish() {
  if (error_ == 0 && ::fsync(fd_) != 0) {
    error_ = errno;
    failed_ = "sync";
  }
  const int closed = ::close(fd_);
  fd_ = -1;
  if (error_ == 0 && closed != 0) {
    error_ = errno;
    failed_ = "close";
  }
  if (error_ != 0) fail_io(failed_, path_, error_);
}

bool is_contained_name(const std::string& name) {
  bool bad = name.empty() || name.front() == '/' || name.size() > 200;
  for (const auto& part : split(name, '/'))
    bad = bad || part.empty() || part == "." || part == "..";
  for (unsigned char c : name)
    bad = bad || c < 0x20 || c == 0x7f || c == '\\';
  return !bad;
}

void sync_dir(const std::string& path) {
  int fd = ::open(path.empty() ? "." : path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_io("open directory", path, errno);
  ::fsync(fd);  // some file systems refuse fsync on directories; the rename is still atomic
  ::close(fd);
}

namespace {

// A new, empty file beside `path`, named `path.<pid>-<n>.tmp`, that did not exist before
// (O_EXCL): an atomic write never writes into an existing file, whatever it is called (a run
// store named like the output's temporary, another process's write of the same output).
std::string create_temp_beside(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  for (;;) {
    const std::string tmp = fmt::format("{}.{}-{}.tmp", path, ::getpid(), counter++);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      return tmp;
    }
    if (errno != EEXIST) fail_io("create", tmp, errno);
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& contents) {
  ensure_parent_dir(path);
  const std::string tmp = create_temp_beside(path);
  try {
    write_file_synced(tmp, contents);
  } catch (const UserError&) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail_io("rename into place", path, err);
  }
  sync_dir(std::filesystem::path(path).parent_path().string());
}

namespace {

// The folder `dir` names: where it is a symbolic link, the folder the link points to, so that
// replacing it keeps the link.
std::filesystem::path folder_behind(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path named = fs::path(dir).lexically_normal();
  if (!fs::is_symlink(fs::symlink_status(named, ec))) return named;
  const fs::path target = fs::weakly_canonical(named, ec);
  if (ec) fail_io("follow the link", dir, ec.value());
  return target;
}

// renameat2's RENAME_EXCHANGE of `staging` and `target`; 0, or the errno of its failure.
// KILN_FAULT=folder.no_exchange refuses it as NFS and FUSE file systems do (EINVAL).
int exchange_folders(const std::string& staging, const std::string& target) {
  if (fault_due("folder.no_exchange")) return EINVAL;
  return ::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0
             ? 0
             : errno;
}

// Where a file system cannot exchange two names (EINVAL): `target` renamed aside, `staging`
// renamed into its place, the old one removed. Each rename is atomic, so a crash leaves every
// file whole: between the two renames the old folder is `aside` and the new one `staging`, both
// beside `target` (rename either back by hand), and a reader finds no folder for that moment. A
// second rename that fails puts the old folder back.
void replace_by_two_renames(const std::string& staging, const std::string& target,
                            const std::string& aside) {
  std::error_code ec;
  std::filesystem::remove_all(aside, ec);  // one a killed replacement of this pid left
  if (::rename(target.c_str(), aside.c_str()) != 0) {
    const int err = errno;
    std::filesystem::remove_all(staging, ec);
    fail_io("move aside the folder", target, err);
  }
  if (::rename(staging.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::rename(aside.c_str(), target.c_str());
    std::filesystem::remove_all(staging, ec);
    fail_io("rename into place", target, err);
  }
  std::filesystem::remove_all(aside, ec);
}

}  // namespace

void replace_folder(const std::string& dir, const std::function<bool(const std::string&)>& keep,
                    const std::function<void(const std::string&)>& fill) {
  namespace fs = std::filesystem;
  const fs::path folder = folder_behind(dir);
  const std::string target = folder.string();
  const fs::path parent = folder.has_parent_path() ? folder.parent_path() : fs::path(".");
  const fs::path name =
      folder.filename().empty() ? folder.parent_path().filename() : folder.filename();
  const auto beside = [&](const char* what) {
    return (parent / fmt::format("{}.{}.{}", name.string(), ::getpid(), what)).string();
  };
  const std::string staging = beside("staging");
  std::error_code ec;
  fs::remove_all(staging, ec);  // one a killed export of this pid left
  fs::create_directories(staging, ec);
  if (ec) fail_io("create the folder", staging, ec.value());
  try {
    if (fs::is_directory(target, ec)) {
      for (const auto& entry : fs::directory_iterator(target)) {
        if (!keep(entry.path().filename().string())) continue;
        fs::copy(entry.path(), fs::path(staging) / entry.path().filename(),
                 fs::copy_options::recursive | fs::copy_options::create_hard_links);
      }
    }
    fill(staging);
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
  if (!fs::exists(target, ec)) {
    if (::rename(staging.c_str(), target.c_str()) != 0) {
      const int err = errno;
      fs::remove_all(staging, ec);
      fail_io("rename into place", target, err);
    }
  } else if (const int err = exchange_folders(staging, target); err == EINVAL) {
    replace_by_two_renames(staging, target, beside("replaced"));
  } else if (err != 0) {
    fs::remove_all(staging, ec);
    fail_io("exchange the new folder with", target, err);
  }
  fs::remove_all(staging, ec);  // now the old folder
  sync_dir(parent.string());
}

ScratchDir::ScratchDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "kiln-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) fail_io("create a temporary directory in", pattern, errno);
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

FileLock::FileLock(const std::string& path, const std::string& busy_message) {
  ensure_parent_dir(path);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_io("create lock file", path, errno);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    fd_ = -1;
    throw UserError(busy_message);
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace kiln
