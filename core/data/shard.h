// Token shards, read through mmap (no copy, no read() per step). Three layouts of uint16 tokens:
//   llmc  llm.c's: a header of 256 little-endian int32 (magic 20240520, version 1, token count,
//         zeros), then the tokens. What `kiln prepare` writes.
//   npy   a NumPy .npy file holding a 1-D '<u2' array (build-nanogpt's shards).
//   raw   the bare tokens, no header (nanoGPT's train.bin / val.bin).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/util/mapped_file.h"

namespace kiln {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr int64_t kShardHeaderInts = 256;
constexpr int64_t kShardHeaderBytes = kShardHeaderInts * 4;

enum class ShardFormat { kAuto, kLlmc, kNpy, kRaw };
// "auto" picks npy for a .npy file and llmc otherwise; raw files must be asked for by name,
// so that a damaged llm.c header is reported instead of being read as tokens.
ShardFormat parse_shard_format(const std::string& name);

class ShardFile {
 public:
  // Maps the file and checks its header against its size; UserError when it is not a shard.
  explicit ShardFile(const std::string& path, ShardFormat format = ShardFormat::kAuto);
  ShardFile(ShardFile&& other) noexcept;
  ShardFile& operator=(ShardFile&&) = delete;
  ShardFile(const ShardFile&) = delete;

  const uint16_t* tokens() const { return tokens_; }
  int64_t size() const { return count_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  MappedFile map_;
  const uint16_t* tokens_ = nullptr;
  int64_t count_ = 0;
};

// Writes a shard atomically (temporary name, fsync, rename).
void write_shard(const std::string& path, const std::vector<uint16_t>& tokens);

}  // namespace kiln
