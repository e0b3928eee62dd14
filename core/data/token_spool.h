// The tokens `kiln prepare` has encoded so far, in one file of bare little-endian ids (uint16,
// or uint32 when `wide`), appended a batch at a time: the total is known only at the end, and
// the validation and test splits are its last tokens, so the shards are cut from this file
// afterwards (core/data/prepare.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

class TokenSpool {
 public:
  // Opens (or creates) `path` and keeps its first `keep` tokens: what a resume's saved state
  // counts; bytes past them are a batch cut short.
  TokenSpool(std::string path, bool wide, int64_t keep);
  ~TokenSpool();
  TokenSpool(const TokenSpool&) = delete;
  TokenSpool& operator=(const TokenSpool&) = delete;

  void append(const std::vector<uint32_t>& ids);
  void sync();  // the appended tokens reach the disk before the state that counts them
  // Tokens [at, at + count) as their bytes in the file.
  void read(int64_t at, int64_t count, std::string& bytes) const;
  int64_t tokens() const { return tokens_; }
  bool wide() const { return wide_; }

 private:
  std::string path_;
  bool wide_;
  int fd_ = -1;
  int64_t tokens_ = 0;
};

}  // namespace kiln
