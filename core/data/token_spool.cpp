#include "core/data/token_spool.h"

#include <cerrno>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {

TokenSpool::TokenSpool(std::string path, bool wide, int64_t keep)
    : path_(std::move(path)), wide_(wide) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_io("create", path_, errno);
  try {
    const int64_t width = wide_ ? 4 : 2;
    struct stat info {};
    if (::fstat(fd_, &info) != 0) fail_io("stat", path_, errno);
    if (info.st_size < keep * width) {
      throw UserError("--resume: '" + path_ + "' holds fewer tokens than its state counts: it " +
                      "was changed since; run without --resume to start over");
    }
    if (::ftruncate(fd_, keep * width) != 0) fail_io("truncate", path_, errno);
    if (::lseek(fd_, 0, SEEK_END) < 0) fail_io("seek in", path_, errno);
  } catch (...) {
    ::close(fd_);  // the destructor of a throwing constructor does not run
    throw;
  }
  tokens_ = keep;
}

TokenSpool::~TokenSpool() {
  if (fd_ >= 0) ::close(fd_);
}

void TokenSpool::append(const std::vector<uint32_t>& ids) {
  std::string bytes;
  if (wide_) {
    bytes.assign(reinterpret_cast<const char*>(ids.data()), ids.size() * 4);
  } else {
    std::vector<uint16_t> narrow(ids.begin(), ids.end());  // below 65,536: the vocabulary's
    bytes.assign(reinterpret_cast<const char*>(narrow.data()), narrow.size() * 2);
  }
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_io("write", path_, errno);
    done += static_cast<size_t>(n);
  }
  tokens_ += static_cast<int64_t>(ids.size());
}

void TokenSpool::sync() {
  if (::fdatasync(fd_) != 0) fail_io("sync", path_, errno);
}

void TokenSpool::read(int64_t at, int64_t count, std::string& bytes) const {
  const int64_t width = wide_ ? 4 : 2;
  bytes.resize(static_cast<size_t>(count * width));
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::pread(fd_, bytes.data() + done, bytes.size() - done,
                              static_cast<off_t>(at * width + static_cast<int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_io("read", path_, n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
}

}  // namespace kiln
