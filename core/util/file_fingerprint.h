// What identifies the files an input key names (data.train = "data/kjv_char/train_*.bin"), taken at
// every run start and resume: each file's path and size, and an XXH3-64 checksum of all of its
// bytes up to 256 MiB (xxHash reads several GB/s: a fraction of a second per file). A larger file
// is checksummed over its first 64 KiB (a shard's header and first tokens) and 16 blocks of 4 KiB
// spread evenly over the rest, and an edit between those blocks that keeps its size is not seen:
// the price of not reading gigabytes at every start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct FileFingerprint {
  std::string path;  // as matched: absolute when the pattern is
  int64_t size = 0;
  // "xxh3:" and 16 hex digits; "not-a-file" for a match that is not a regular file (a FIFO),
  // which is never read. A fingerprint stored by an older Kiln holds 16 hex digits of a sampled
  // SHA-256, which no checksum of today's equals: such a file is compared by its size alone.
  std::string checksum;
};

// The files `pattern` matches (glob_files), each fingerprinted, in sorted order; a directory
// stands for the regular files directly inside it. No match: an empty list. A file that cannot
// be read: a UserError naming it.
std::vector<FileFingerprint> fingerprint_files(const std::string& pattern);

// What differs between two fingerprints of one key, as one clause for an error line ("" when
// nothing does): "train_000001.bin 4096 -> 8192 bytes; added val_000002.bin; removed x.bin;
// contents of y.bin differ". Files are named by path relative to the folder they share.
std::string fingerprint_difference(const std::vector<FileFingerprint>& before,
                                   const std::vector<FileFingerprint>& after);

}  // namespace kiln
