#include "core/util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

namespace {

// Closes the descriptor on every path out of the constructor; the map outlives it.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

}  // namespace

MappedFile::MappedFile(const std::string& path, const MapOptions& options) {
  auto cannot_map = [&](const std::string& why) {
    return UserError(fmt::format("cannot map {} '{}': {}", options.what, path, why));
  };
  // O_NONBLOCK: a FIFO where a file was expected must not hang the open (files ignore the flag).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const std::string why = std::strerror(errno);
    throw UserError(fmt::format("cannot open {} '{}': {}{}", options.what, path, why,
                                options.fix.empty() ? "" : ": " + options.fix));
  }
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw cannot_map(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    throw cannot_map(S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file");
  }
  const auto bytes = static_cast<size_t>(st.st_size);
  if (bytes == 0) return;  // mmap refuses a length of 0: an empty file is an empty view
  void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) throw cannot_map(std::strerror(errno));
  if (options.sequential) ::madvise(map, bytes, MADV_SEQUENTIAL);
  data_ = static_cast<const char*>(map);
  size_ = bytes;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() {
  unmap();
}

void MappedFile::unmap() {
  if (data_) ::munmap(const_cast<char*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace kiln
