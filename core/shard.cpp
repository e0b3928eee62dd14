#include "core/shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"

namespace kiln {

ShardFile::ShardFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw UserError(
        fmt::format("cannot open token shard '{}': {}: run `kiln prepare` or fix "
                    "the data path",
                    path, std::strerror(errno)));
  }
  struct stat st {};
  ::fstat(fd, &st);
  const auto bytes = static_cast<int64_t>(st.st_size);
  int32_t header[kShardHeaderInts] = {};
  if (bytes < kShardHeaderBytes ||
      ::pread(fd, header, kShardHeaderBytes, 0) != static_cast<ssize_t>(kShardHeaderBytes)) {
    ::close(fd);
    throw UserError(
        fmt::format("token shard '{}' is {} bytes, too short for the {}-byte header: "
                    "the file is truncated or not a shard; re-run `kiln prepare`",
                    path, bytes, kShardHeaderBytes));
  }
  if (header[0] != kShardMagic) {
    ::close(fd);
    throw UserError(
        fmt::format("'{}' is not a token shard: magic number {} instead of {} "
                    "(llm.c format); re-create it with `kiln prepare`",
                    path, header[0], kShardMagic));
  }
  if (header[1] != kShardVersion) {
    ::close(fd);
    throw UserError(
        fmt::format("token shard '{}' has version {}, Kiln reads version {} "
                    "(uint16 tokens); re-create it with `kiln prepare`",
                    path, header[1], kShardVersion));
  }
  count_ = header[2];
  const int64_t expected = kShardHeaderBytes + 2 * count_;
  if (count_ < 0 || bytes < expected) {
    ::close(fd);
    throw UserError(
        fmt::format("token shard '{}' is truncated: its header promises {} tokens "
                    "({} bytes) but the file has {} bytes; re-create it",
                    path, count_, expected, bytes));
  }
  map_bytes_ = static_cast<size_t>(expected);
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw UserError(fmt::format("cannot map token shard '{}': {}", path, std::strerror(errno)));
  }
  ::madvise(map_, map_bytes_, MADV_SEQUENTIAL);
  tokens_ = reinterpret_cast<const uint16_t*>(static_cast<const char*>(map_) + kShardHeaderBytes);
}

ShardFile::ShardFile(ShardFile&& other) noexcept
    : path_(std::move(other.path_)),
      map_(other.map_),
      map_bytes_(other.map_bytes_),
      tokens_(other.tokens_),
      count_(other.count_) {
  other.map_ = nullptr;
  other.tokens_ = nullptr;
}

ShardFile::~ShardFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

void write_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    throw UserError(
        fmt::format("shard '{}' would hold {} tokens, more than the format's int32 "
                    "count allows: use a smaller --shard-tokens",
                    path, tokens.size()));
  }
  int32_t header[kShardHeaderInts] = {kShardMagic, kShardVersion,
                                      static_cast<int32_t>(tokens.size())};
  std::string bytes(reinterpret_cast<const char*>(header), kShardHeaderBytes);
  bytes.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(uint16_t));
  write_file_atomic(path, bytes);
}

}  // namespace kiln
