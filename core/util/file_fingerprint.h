// What identifies the files an input key names (data.train = "data/kjv_char/train_*.bin"), cheaply
// enough to take at every run start and resume: each file's path and size, and a checksum of its
// first 64 KiB (a shard's header and first tokens) and of 16 blocks of 4 KiB spread evenly over
// the rest. A file rewritten with other tokens almost always changes one of those; one that keeps
// its size and changes only bytes between the blocks is not seen, which is the price of reading
// 128 KiB of a file, not all of it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct FileFingerprint {
  std::string path;  // as matched: absolute when the pattern is
  int64_t size = 0;
  std::string checksum;  // 16 hex digits (the first 64 bits of a SHA-256); "not-a-file" for a
                         // match that is not a regular file (a FIFO), which is never read
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
