#include "core/util/file_fingerprint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

namespace {

constexpr int64_t kWholeFileBytes = int64_t{256} << 20;  // checksummed whole up to this size
constexpr int64_t kReadBytes = int64_t{1} << 20;         // a whole file is read in these
constexpr const char* kChecksumPrefix = "xxh3:";
constexpr int64_t kHeadBytes = 64 * 1024;
constexpr int64_t kBlockBytes = 4 * 1024;
constexpr int64_t kSampledBlocks = 16;
constexpr const char* kNotAFile = "not-a-file";  // a FIFO, a device: nothing read

// Appends up to `length` bytes of `fd` from `offset` to `out`.
void read_at(int fd, int64_t offset, int64_t length, const std::string& path, std::string& out) {
  std::string block(static_cast<size_t>(length), '\0');
  int64_t done = 0;
  while (done < length) {
    const ssize_t got = ::pread(fd, block.data() + done, static_cast<size_t>(length - done),
                                static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw UserError(
          fmt::format("cannot read '{}': {}: check its permissions", path, std::strerror(errno)));
    }
    if (got == 0) break;  // shorter than its size said a moment ago: the checksum shows it
    done += got;
  }
  out.append(block.data(), static_cast<size_t>(done));
}

FileFingerprint fingerprint_file(const std::string& path) {
  // Non-blocking: a FIFO named like a shard must not hang the command that looks at it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    throw UserError(
        fmt::format("cannot open '{}': {}: check its permissions", path, std::strerror(errno)));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return {path, 0, kNotAFile};  // what reads it says why it cannot
  }
  FileFingerprint print{path, static_cast<int64_t>(info.st_size), ""};
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::string bytes;
  auto add = [&](int64_t offset, int64_t length) {
    bytes.clear();
    read_at(fd, offset, length, path, bytes);
    XXH3_64bits_update(state, bytes.data(), bytes.size());
  };
  try {
    if (print.size <= kWholeFileBytes) {
      for (int64_t offset = 0; offset < print.size; offset += kReadBytes)
        add(offset, std::min(kReadBytes, print.size - offset));
    } else {
      add(0, kHeadBytes);
      const int64_t rest = print.size - kHeadBytes;
      for (int64_t i = 0; i < kSampledBlocks; ++i) {
        const int64_t offset = kHeadBytes + rest * i / kSampledBlocks;
        add(offset, std::min(kBlockBytes, print.size - offset));
      }
    }
  } catch (...) {
    XXH3_freeState(state);
    ::close(fd);
    throw;
  }
  ::close(fd);
  print.checksum = fmt::format("{}{:016x}", kChecksumPrefix, XXH3_64bits_digest(state));
  XXH3_freeState(state);
  return print;
}

// The regular files directly inside `dir`, sorted.
std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec)) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The longest folder prefix ("/a/b/") all `paths` share.
std::string shared_folder(const std::vector<std::string>& paths) {
  if (paths.empty()) return "";
  std::string prefix = paths.front().substr(0, paths.front().rfind('/') + 1);
  for (const auto& path : paths) {
    while (!prefix.empty() && path.compare(0, prefix.size(), prefix) != 0)
      prefix = prefix.substr(0, prefix.rfind('/', prefix.size() - 2) + 1);
  }
  return prefix;
}

}  // namespace

std::vector<FileFingerprint> fingerprint_files(const std::string& pattern) {
  std::vector<FileFingerprint> prints;
  for (const auto& match : glob_files(pattern)) {
    std::error_code ec;
    if (std::filesystem::is_directory(match, ec)) {
      for (const auto& file : files_in(match))
        prints.push_back(fingerprint_file(file));
    } else {
      prints.push_back(fingerprint_file(match));
    }
  }
  return prints;
}

std::string fingerprint_difference(const std::vector<FileFingerprint>& before,
                                   const std::vector<FileFingerprint>& after) {
  std::map<std::string, const FileFingerprint*> old_files, new_files;
  std::vector<std::string> paths;
  for (const auto& f : before) {
    old_files[f.path] = &f;
    paths.push_back(f.path);
  }
  for (const auto& f : after) {
    new_files[f.path] = &f;
    if (!old_files.count(f.path)) paths.push_back(f.path);
  }
  const std::string folder = shared_folder(paths);
  std::vector<std::string> resized, added, removed, rewritten;
  for (const auto& path : paths) {
    const std::string name = path.substr(folder.size());
    const auto was = old_files.find(path), is = new_files.find(path);
    if (is == new_files.end()) {
      removed.push_back(name);
    } else if (was == old_files.end()) {
      added.push_back(name);
    } else if (was->second->size != is->second->size) {
      resized.push_back(
          fmt::format("{} {} -> {} bytes", name, was->second->size, is->second->size));
    } else if (was->second->checksum != is->second->checksum &&
               was->second->checksum.rfind(kChecksumPrefix, 0) == 0) {
      rewritten.push_back(name);
    }
  }
  // At most a few names of each kind: a re-prepared corpus can change hundreds of shards.
  auto some = [](const std::vector<std::string>& names) {
    const size_t shown = std::min<size_t>(names.size(), 3);
    std::string text = join(std::vector<std::string>(names.begin(), names.begin() + shown), ", ");
    if (names.size() > shown) text += fmt::format(" and {} more", names.size() - shown);
    return text;
  };
  std::vector<std::string> clauses;
  if (!resized.empty()) clauses.push_back(some(resized));
  if (!rewritten.empty()) clauses.push_back("contents of " + some(rewritten) + " differ");
  if (!added.empty()) clauses.push_back("added " + some(added));
  if (!removed.empty()) clauses.push_back("removed " + some(removed));
  return join(clauses, "; ");
}

}  // namespace kiln
