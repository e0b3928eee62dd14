#include "core/data/shard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {

ShardFormat parse_shard_format(const std::string& name) {
  if (name == "auto") return ShardFormat::kAuto;
  if (name == "llmc") return ShardFormat::kLlmc;
  if (name == "npy") return ShardFormat::kNpy;
  if (name == "raw") return ShardFormat::kRaw;
  throw std::logic_error("unknown shard format " + name);  // the config allows only the above
}

namespace {

struct Layout {
  int64_t offset = 0;  // bytes before the first token
  int64_t count = 0;   // tokens
  int token_bytes = 2;
};

[[noreturn]] void not_a_shard(const std::string& path, const std::string& why) {
  throw UserError(fmt::format("'{}' is not a usable token shard: {}", path, why));
}

[[noreturn]] void cannot_read(const std::string& path, int err) {
  throw UserError(fmt::format("cannot read token shard '{}': {}: check the file and its disk", path,
                              std::strerror(err)));
}

// The file's bytes [at, at + bytes), fewer where the file ends first.
std::string read_at(int fd, const std::string& path, int64_t at, size_t bytes) {
  std::string out(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::pread(fd, &out[got], bytes - got, static_cast<off_t>(at + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) cannot_read(path, errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

Layout llmc_layout(const std::string& path, int fd, int64_t bytes) {
  int32_t header[kShardHeaderInts] = {};
  if (bytes < kShardHeaderBytes) {
    not_a_shard(path, fmt::format("{} bytes, too short for the {}-byte header: the file is "
                                  "truncated or not a shard; re-run `kiln prepare`",
                                  bytes, kShardHeaderBytes));
  }
  const std::string text = read_at(fd, path, 0, kShardHeaderBytes);
  std::memcpy(header, text.data(), text.size());
  if (header[0] != kShardMagic) {
    not_a_shard(path, fmt::format("magic number {} instead of {} (llm.c format); re-create it "
                                  "with `kiln prepare`, or set data.format for .npy or raw files",
                                  header[0], kShardMagic));
  }
  if (header[1] != kShardVersion && header[1] != kShardVersion32) {
    not_a_shard(path, fmt::format("version {}, Kiln reads versions {} (uint16 tokens) and {} "
                                  "(uint32); re-create it with `kiln prepare`",
                                  header[1], kShardVersion, kShardVersion32));
  }
  return {kShardHeaderBytes, header[2], header[1] == kShardVersion32 ? 4 : 2};
}

// NumPy's format: "\x93NUMPY", major and minor version bytes, the header length (uint16 for
// version 1, uint32 after), then a Python dict literal describing the array.
Layout npy_layout(const std::string& path, int fd, int64_t bytes) {
  char prefix[12] = {};  // a version-1 header is 10 bytes: the last two stay zero
  const std::string start = read_at(fd, path, 0, sizeof prefix);
  std::memcpy(prefix, start.data(), start.size());
  if (bytes < 10 || std::memcmp(prefix, "\x93NUMPY", 6) != 0) {
    not_a_shard(path, "no .npy magic (\\x93NUMPY)");
  }
  const int major = static_cast<unsigned char>(prefix[6]);
  int64_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(prefix[8]) | static_cast<unsigned char>(prefix[9]) << 8;
    header_at = 10;
  } else {
    uint32_t len = 0;
    std::memcpy(&len, prefix + 8, 4);
    header_len = len;
    header_at = 12;
  }
  if (header_at + header_len > bytes) not_a_shard(path, "the .npy header runs past the file");
  const std::string header = read_at(fd, path, header_at, static_cast<size_t>(header_len));
  // The text after "'key':" up to the next ',' or '}' outside parentheses.
  auto value_of = [&](const std::string& key) {
    auto at = header.find("'" + key + "'");
    if (at == std::string::npos) not_a_shard(path, "the .npy header has no '" + key + "'");
    at = header.find(':', at) + 1;
    int depth = 0;
    size_t end = at;
    for (; end < header.size(); ++end) {
      const char c = header[end];
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if (depth == 0 && (c == ',' || c == '}')) break;
    }
    std::string value = header.substr(at, end - at);
    value.erase(0, value.find_first_not_of(' '));
    return value;
  };
  const std::string descr = value_of("descr");
  const bool wide = descr == "'<u4'";
  if (descr != "'<u2'" && descr != "'|u2'" && !wide) {
    not_a_shard(path, fmt::format("the .npy array has dtype {}, not uint16 ('<u2') or uint32 "
                                  "('<u4'); convert it with numpy's .astype(np.uint16)",
                                  descr));
  }
  if (value_of("fortran_order") != "False") not_a_shard(path, "the .npy array is in Fortran order");
  std::string shape = value_of("shape");  // "(12345,)" for a 1-D array
  if (shape.size() < 4 || shape.front() != '(' || shape.substr(shape.size() - 2) != ",)") {
    not_a_shard(path, fmt::format("the .npy array has shape {}, not 1-D", shape));
  }
  shape = shape.substr(1, shape.size() - 3);
  int64_t count = -1;
  size_t used = 0;
  try {
    count = std::stoll(shape, &used);
  } catch (const std::logic_error&) {
    used = 0;  // not a number, or beyond int64
  }
  if (used == 0 || shape.find_first_not_of(' ', used) != std::string::npos || count < 0) {
    not_a_shard(path, fmt::format("the .npy array has shape ({},), not a token count", shape));
  }
  return {header_at + header_len, count, wide ? 4 : 2};
}

Layout raw_layout(const std::string& path, int64_t bytes) {
  if (bytes % 2 != 0)
    not_a_shard(path, fmt::format("{} bytes is not a whole number of uint16 tokens", bytes));
  return {0, bytes / 2, 2};
}

// The shard open for reading. A directory or a FIFO where a shard was expected is a mistake in
// the data pattern; O_NONBLOCK, so that opening a FIFO does not wait for a writer.
int open_shard(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    throw UserError(
        fmt::format("cannot open token shard '{}': {}: run `kiln prepare` or fix the "
                    "data path",
                    path, std::strerror(errno)));
  }
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  const int err = errno;
  if (!stated || !S_ISREG(st.st_mode)) {
    ::close(fd);
    if (!stated) cannot_read(path, err);
    not_a_shard(path, S_ISDIR(st.st_mode) ? "it is a directory: fix the data pattern"
                                          : "it is not a regular file: fix the data pattern");
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);  // a hint: the kernel reads further ahead
  return fd;
}

int64_t file_bytes(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) cannot_read(path, errno);
  return static_cast<int64_t>(st.st_size);
}

}  // namespace

ShardFile::ShardFile(const std::string& path, ShardFormat format)
    : path_(path), fd_(open_shard(path)) {
  try {
    read_layout(format);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

void ShardFile::read_layout(ShardFormat format) {
  const int64_t bytes = file_bytes(fd_, path_);
  if (format == ShardFormat::kAuto) {
    const bool npy = path_.size() >= 4 && path_.compare(path_.size() - 4, 4, ".npy") == 0;
    format = npy ? ShardFormat::kNpy : ShardFormat::kLlmc;
  }
  const Layout layout = format == ShardFormat::kNpy   ? npy_layout(path_, fd_, bytes)
                        : format == ShardFormat::kRaw ? raw_layout(path_, bytes)
                                                      : llmc_layout(path_, fd_, bytes);
  count_ = layout.count;
  offset_ = layout.offset;
  token_bytes_ = layout.token_bytes;
  if (count_ < 0) {
    not_a_shard(path_, fmt::format("its header gives a negative token count ({}): the file is "
                                   "corrupt; re-create it",
                                   count_));
  }
  // Compared without multiplying, so that no count in a header can overflow the check.
  if (offset_ > bytes || count_ > (bytes - offset_) / token_bytes_) {
    not_a_shard(path_, fmt::format("truncated: its header promises {} tokens ({:.0f} bytes) but "
                                   "the file has {} bytes; re-create it",
                                   count_,
                                   static_cast<double>(offset_) +
                                       token_bytes_ * static_cast<double>(count_),
                                   bytes));
  }
}

ShardFile::~ShardFile() {
  if (fd_ >= 0) ::close(fd_);
}

ShardFile::ShardFile(ShardFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      offset_(other.offset_),
      count_(other.count_),
      token_bytes_(other.token_bytes_) {}

void ShardFile::read(int64_t first, int64_t count, uint32_t* out) const {
  const int64_t at = offset_ + token_bytes_ * first;
  const auto want = static_cast<size_t>(token_bytes_ * count);
  auto* bytes = reinterpret_cast<char*>(out);  // the file's little-endian ids, as the host's
  size_t got = 0;
  while (got < want) {
    const ssize_t n = ::pread(fd_, bytes + got, want - got, static_cast<off_t>(at + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) cannot_read(path_, errno);
    if (n == 0) {
      throw UserError(fmt::format(
          "token shard '{}' was truncated while this run read it: it now has {} bytes, and the "
          "tokens to read end at byte {}: restore the file (or re-run `kiln prepare` as before), "
          "then `kiln resume` the run",
          path_, file_bytes(fd_, path_), at + static_cast<int64_t>(want)));
    }
    got += static_cast<size_t>(n);
  }
  if (token_bytes_ == 2) {
    // Widened in place from the end: out[i] covers the uint16 slots 2i and 2i + 1, which are
    // never below i, so each narrow id is read before anything overwrites it.
    for (int64_t i = count - 1; i >= 0; --i) {
      uint16_t narrow = 0;
      std::memcpy(&narrow, bytes + 2 * i, sizeof narrow);
      out[i] = narrow;
    }
  }
}

namespace {

// An llm.c header for `count` tokens; a UserError when the format's int32 count cannot hold it.
std::string llmc_header(const std::string& path, uint64_t count, int32_t version) {
  if (count > static_cast<uint64_t>(INT32_MAX)) {
    throw UserError(
        fmt::format("shard '{}' would hold {} tokens, more than the format's int32 "
                    "count allows: use a smaller --shard-tokens",
                    path, count));
  }
  int32_t header[kShardHeaderInts] = {kShardMagic, version, static_cast<int32_t>(count)};
  return std::string(reinterpret_cast<const char*>(header), kShardHeaderBytes);
}

template <class Token>
void write_llmc(const std::string& path, const std::vector<Token>& tokens, int32_t version) {
  std::string bytes = llmc_header(path, tokens.size(), version);
  bytes.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(Token));
  write_file_atomic(path, bytes);
}

}  // namespace

void write_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  write_llmc(path, tokens, kShardVersion);
}

void write_shard(const std::string& path, const std::vector<uint32_t>& tokens) {
  write_llmc(path, tokens, kShardVersion32);
}

void write_shard_from(const std::string& path, bool wide, int64_t count,
                      const std::function<void(int64_t, int64_t, std::string&)>& read) {
  constexpr int64_t kBlockTokens = 1 << 20;
  SyncedFileWriter file(path);
  const std::string header =
      llmc_header(path, static_cast<uint64_t>(count), wide ? kShardVersion32 : kShardVersion);
  file.write(header.data(), header.size());
  std::string block;
  for (int64_t at = 0; at < count; at += kBlockTokens) {
    read(at, std::min(kBlockTokens, count - at), block);
    file.write(block.data(), block.size());
  }
  file.finish();
}

}  // namespace kiln
