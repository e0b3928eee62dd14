// Fingerprints of input files (core/util/file_fingerprint.h): the checksum is SHA-256 of the bytes
// the header says it samples, as sha256sum computes it over the same bytes cut out with dd; what
// it sees and what it cannot; and how a difference reads.
#include "core/util/file_fingerprint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "test_util.h"

namespace kiln {
namespace {

std::string write_bytes(const std::string& path, size_t size, char seed) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i)
    bytes[i] = static_cast<char>(seed + i * 7 + i / 251);
  testing::write_text(path, bytes);
  return path;
}

void poke(const std::string& path, int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  f.seekp(offset);
  c = static_cast<char>(c ^ 0x5a);
  f.write(&c, 1);
}

// The first 16 hex digits of sha256sum over the head and the 16 blocks, each cut out with dd.
std::string checksum_by_coreutils(const std::string& path, int64_t size) {
  std::string pieces = fmt::format("dd if='{}' bs=1 count=65536 status=none;", path);
  const int64_t rest = size - 65536;
  for (int64_t i = 0; i < 16; ++i) {
    pieces += fmt::format(" dd if='{}' bs=1 skip={} count=4096 status=none;", path,
                          65536 + rest * i / 16);
  }
  return testing::run_shell("{ " + pieces + " } | sha256sum | cut -c1-16").output;
}

TEST(FileFingerprint, ASmallFileIsTheSha256OfAllItsBytes) {
  testing::TempDir dir;
  testing::write_text(dir / "abc.bin", "abc");
  const auto prints = fingerprint_files(dir / "abc.bin");
  ASSERT_EQ(prints.size(), 1u);
  EXPECT_EQ(prints[0].size, 3);
  EXPECT_EQ(prints[0].checksum, "ba7816bf8f01cfea");  // FIPS 180-2's example "abc"
}

TEST(FileFingerprint, ALargeFileIsTheSha256OfItsHeadAndSixteenSampledBlocks) {
  testing::TempDir dir;
  const int64_t size = 3 * 1024 * 1024 + 123;
  const std::string file = write_bytes(dir / "big.bin", size, 1);
  const auto prints = fingerprint_files(file);
  ASSERT_EQ(prints.size(), 1u);
  EXPECT_EQ(prints[0].checksum + "\n", checksum_by_coreutils(file, size));
}

TEST(FileFingerprint, SeesTheHeadAndTheSampledBlocksButNotTheGapsBetweenThem) {
  testing::TempDir dir;
  const int64_t size = 1024 * 1024;
  const std::string file = write_bytes(dir / "t.bin", size, 3);
  const std::string original = fingerprint_files(file)[0].checksum;
  poke(file, 100);  // the header
  EXPECT_NE(fingerprint_files(file)[0].checksum, original);
  poke(file, 100);
  EXPECT_EQ(fingerprint_files(file)[0].checksum, original);
  poke(file, 65536 + (size - 65536) * 5 / 16 + 10);  // inside block 5
  EXPECT_NE(fingerprint_files(file)[0].checksum, original);
  poke(file, 65536 + (size - 65536) * 5 / 16 + 10);
  poke(file, 65536 + (size - 65536) * 5 / 16 + 8192);  // between blocks 5 and 6: the price
  EXPECT_EQ(fingerprint_files(file)[0].checksum, original);
}

TEST(FileFingerprint, AGlobAndADirectoryListTheirFilesInOrder) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "d/sub");
  write_bytes(dir / "d/b.bin", 10, 1);
  write_bytes(dir / "d/a.bin", 20, 2);
  write_bytes(dir / "d/sub/c.bin", 30, 3);  // not directly inside: left out
  const auto by_glob = fingerprint_files(dir / "d/*.bin");
  ASSERT_EQ(by_glob.size(), 2u);
  EXPECT_EQ(by_glob[0].path, dir / "d/a.bin");
  EXPECT_EQ(by_glob[1].size, 10);
  const auto by_dir = fingerprint_files(dir / "d");
  ASSERT_EQ(by_dir.size(), 2u);
  EXPECT_EQ(by_dir[0].checksum, by_glob[0].checksum);
  EXPECT_TRUE(fingerprint_files(dir / "none_*.bin").empty());
}

TEST(FileFingerprint, ADifferenceNamesWhatChangedRelativeToTheSharedFolder) {
  const std::vector<FileFingerprint> before = {{"/d/data/t_0.bin", 100, "aaaa"},
                                               {"/d/data/t_1.bin", 100, "bbbb"},
                                               {"/d/data/t_2.bin", 5, "c"}};
  EXPECT_EQ(fingerprint_difference(before, before), "");
  const std::vector<FileFingerprint> after = {{"/d/data/t_0.bin", 120, "xxxx"},
                                              {"/d/data/t_1.bin", 100, "dddd"},
                                              {"/d/data/t_3.bin", 5, "c"}};
  EXPECT_EQ(fingerprint_difference(before, after),
            "t_0.bin 100 -> 120 bytes; contents of t_1.bin differ; added t_3.bin; removed t_2.bin");
  std::vector<FileFingerprint> many;
  for (int i = 0; i < 5; ++i)
    many.push_back({fmt::format("/d/s_{}.bin", i), 1, "e"});
  EXPECT_EQ(fingerprint_difference({}, many), "added s_0.bin, s_1.bin, s_2.bin and 2 more");
}

}  // namespace
}  // namespace kiln
