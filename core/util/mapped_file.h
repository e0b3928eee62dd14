// The one memory map: a whole file, read-only, unmapped when the object goes. Safetensors
// weights and snapshot checksums read through it, so a multi-gigabyte file costs neither a copy
// nor a read() per access. Failures are UserErrors naming the file. (Token shards are read by
// copy instead: a run reads them for hours, and core/data/shard.h says why a map is no good
// then.)
//
// MAP_SHARED, not MAP_PRIVATE: with PROT_READ the two read the same bytes (nothing is ever
// written, so nothing is ever copied on write); MAP_SHARED says what the pages are, the page
// cache's own, the same physical pages for every process that maps the file (each rank of a
// `kiln launch` reading one shard).
#pragma once

#include <cstddef>
#include <string>

namespace kiln {

struct MapOptions {
  std::string what = "file";  // the file's kind in error messages: "token shard", "weights"
  std::string fix;            // appended to the error when the file cannot be opened
  bool sequential = false;    // read front to back: the kernel reads further ahead
};

class MappedFile {
 public:
  // Maps all of `path`; an empty file maps to data() == nullptr, size() == 0. A UserError when
  // it cannot be opened ("cannot open <what> '<path>': <why>: <fix>"), is not a regular file (a
  // directory, a FIFO: never blocks on one) or cannot be mapped.
  explicit MappedFile(const std::string& path, const MapOptions& options = {});
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void unmap();

  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln
