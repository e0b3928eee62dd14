// Token shards. Three layouts of little-endian token ids:
//   llmc  llm.c's: a header of 256 little-endian int32 (magic 20240520, version, token count,
//         zeros), then the tokens: uint16 in version 1 (GPT-2's), uint32 in version 2 (llm.c's
//         Llama 3 shards, for vocabularies beyond 65,536 ids). What `kiln prepare` writes.
//   npy   a NumPy .npy file holding a 1-D '<u2' or '<u4' array (build-nanogpt's shards).
//   raw   bare uint16 tokens, no header (nanoGPT's train.bin / val.bin).
//
// Read by copy (pread of each window), not through a memory map: a map turns a file truncated
// while a run reads it (a re-run `kiln prepare`, a full disk, a user's `truncate`) into SIGBUS,
// which kills the process with the run left 'running'; a read that comes back short is an error
// like any other, and the run ends 'failed' with a line saying what happened. (A SIGBUS handler
// around the map would keep it, but a process-wide handler that siglongjmps out of a copy on any
// thread, beside LibTorch's handlers, is a larger risk than the copy.) The copy costs little: a
// window is copied once anyway, into the int64 batch, and the page cache serves the read.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;    // uint16 tokens
constexpr int32_t kShardVersion32 = 2;  // uint32 tokens
constexpr int64_t kShardHeaderInts = 256;
constexpr int64_t kShardHeaderBytes = kShardHeaderInts * 4;

enum class ShardFormat { kAuto, kLlmc, kNpy, kRaw };
// "auto" picks npy for a .npy file and llmc otherwise; raw files must be asked for by name,
// so that a damaged llm.c header is reported instead of being read as tokens.
ShardFormat parse_shard_format(const std::string& name);

class ShardFile {
 public:
  // Opens the file and checks its header against its size; UserError when it is not a shard.
  explicit ShardFile(const std::string& path, ShardFormat format = ShardFormat::kAuto);
  ~ShardFile();
  ShardFile(ShardFile&& other) noexcept;
  ShardFile& operator=(ShardFile&&) = delete;
  ShardFile(const ShardFile&) = delete;

  // Copies tokens [first, first + count) to `out`, whatever their width in the file. A UserError
  // when the file no longer holds them (truncated since it was opened) or cannot be read.
  void read(int64_t first, int64_t count, uint32_t* out) const;
  int64_t size() const { return count_; }
  int token_bytes() const { return token_bytes_; }  // 2 or 4
  const std::string& path() const { return path_; }

 private:
  void read_layout(ShardFormat format);  // offset_ and count_, checked against the file

  std::string path_;
  int fd_ = -1;
  int64_t offset_ = 0;  // bytes before the first token
  int64_t count_ = 0;
  int token_bytes_ = 2;
};

// Writes an llm.c shard atomically (temporary name, fsync, rename): version 1 for uint16
// tokens, version 2 for uint32.
void write_shard(const std::string& path, const std::vector<uint16_t>& tokens);
void write_shard(const std::string& path, const std::vector<uint32_t>& tokens);
// Writes an llm.c shard of `count` tokens (uint32 when `wide`) at `path` and fsyncs it, with no
// rename: for a folder whose finished files are moved into place (`kiln prepare`). `read(from,
// n, bytes)` gives tokens [from, from + n) as their little-endian bytes, a block at a time.
void write_shard_from(const std::string& path, bool wide, int64_t count,
                      const std::function<void(int64_t, int64_t, std::string&)>& read);

}  // namespace kiln
