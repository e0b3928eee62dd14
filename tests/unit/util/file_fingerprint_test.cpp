// Fingerprints of input files (core/util/file_fingerprint.h): the checksum is XXH3-64 of the bytes
// the header says it reads, as xxhsum computes it over the same bytes (cut out with dd for a file
// it samples); an edit anywhere is seen; and how a difference reads.
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

// XXH3-64 as xxhsum (Debian's xxhash package) computes it over what the shell command prints, in
// the fingerprint's form.
std::string xxhsum_of(const std::string& command) {
  const auto result = testing::run_shell("{ " + command + " } | xxhsum -H3 -");
  const size_t equals = result.output.find(" = ");
  if (result.exit_code != 0 || equals == std::string::npos)
    return "xxhsum failed: " + result.output;
  return "xxh3:" + result.output.substr(equals + 3, 16);
}

bool have_xxhsum() {
  return testing::run_shell("command -v xxhsum").exit_code == 0;
}

#define SKIP_WITHOUT_XXHSUM()                                                 \
  if (!have_xxhsum())                                                         \
  GTEST_SKIP() << "xxhsum is not installed (tools/setup.sh --tests installs " \
                  "it)"

TEST(FileFingerprint, AFileUpTo256MiBIsTheXxh3OfAllItsBytes) {
  SKIP_WITHOUT_XXHSUM();
  testing::TempDir dir;
  testing::write_text(dir / "abc.bin", "abc");
  const auto prints = fingerprint_files(dir / "abc.bin");
  ASSERT_EQ(prints.size(), 1u);
  EXPECT_EQ(prints[0].size, 3);
  EXPECT_EQ(prints[0].checksum, xxhsum_of("cat '" + (dir / "abc.bin") + "';"));
  const std::string file = write_bytes(dir / "mid.bin", 3 * 1024 * 1024 + 123, 1);
  EXPECT_EQ(fingerprint_files(file)[0].checksum, xxhsum_of("cat '" + file + "';"));
}

// Above 256 MiB (a sparse file, so the test writes little): the head and 16 blocks, each cut out
// with dd.
TEST(FileFingerprint, ALargerFileIsTheXxh3OfItsHeadAndSixteenSampledBlocks) {
  SKIP_WITHOUT_XXHSUM();
  testing::TempDir dir;
  const int64_t size = (int64_t{300} << 20) + 123;
  const std::string file = dir / "big.bin";
  testing::write_text(file, "");
  std::filesystem::resize_file(file, static_cast<uintmax_t>(size));
  for (int64_t at : {int64_t{7}, int64_t{70000}, (size - 65536) / 3 + 65536, size - 5})
    poke(file, at);
  std::string pieces = fmt::format("dd if='{}' bs=65536 count=1 status=none;", file);
  const int64_t rest = size - 65536;
  for (int64_t i = 0; i < 16; ++i) {
    pieces += fmt::format(" dd if='{}' bs=1 skip={} count=4096 status=none iflag=skip_bytes;", file,
                          65536 + rest * i / 16);
  }
  EXPECT_EQ(fingerprint_files(file)[0].checksum, xxhsum_of(pieces));
}

// Every byte counts up to 256 MiB: an edit anywhere is seen, the same size kept.
TEST(FileFingerprint, AnEditAnywhereInAFileIsSeen) {
  testing::TempDir dir;
  const int64_t size = 1024 * 1024;
  const std::string file = write_bytes(dir / "t.bin", size, 3);
  const std::string original = fingerprint_files(file)[0].checksum;
  for (int64_t at : {int64_t{100}, 65536 + (size - 65536) * 5 / 16 + 8192, size - 1}) {
    poke(file, at);
    EXPECT_NE(fingerprint_files(file)[0].checksum, original) << "a byte at " << at;
    poke(file, at);
    EXPECT_EQ(fingerprint_files(file)[0].checksum, original);
  }
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
  const std::vector<FileFingerprint> before = {{"/d/data/t_0.bin", 100, "xxh3:aaaa"},
                                               {"/d/data/t_1.bin", 100, "xxh3:bbbb"},
                                               {"/d/data/t_2.bin", 5, "xxh3:c"}};
  EXPECT_EQ(fingerprint_difference(before, before), "");
  const std::vector<FileFingerprint> after = {{"/d/data/t_0.bin", 120, "xxh3:xxxx"},
                                              {"/d/data/t_1.bin", 100, "xxh3:dddd"},
                                              {"/d/data/t_3.bin", 5, "xxh3:c"}};
  EXPECT_EQ(fingerprint_difference(before, after),
            "t_0.bin 100 -> 120 bytes; contents of t_1.bin differ; added t_3.bin; removed t_2.bin");
  // A fingerprint an older Kiln stored (a sampled SHA-256, no "xxh3:") is compared by size alone.
  EXPECT_EQ(fingerprint_difference({{"/d/t.bin", 100, "0123456789abcdef"}},
                                   {{"/d/t.bin", 100, "xxh3:0123456789abcdef"}}),
            "");
  std::vector<FileFingerprint> many;
  for (int i = 0; i < 5; ++i)
    many.push_back({fmt::format("/d/s_{}.bin", i), 1, "e"});
  EXPECT_EQ(fingerprint_difference({}, many), "added s_0.bin, s_1.bin, s_2.bin and 2 more");
}

}  // namespace
}  // namespace kiln
