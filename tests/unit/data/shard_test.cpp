#include <cstring>
#include <numeric>

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/data/batch_buffers.h"
#include "core/data/shard.h"
#include "core/data/token_loader.h"
#include "core/util/error.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::TempDir;

std::vector<uint16_t> iota_tokens(size_t n, uint16_t start = 0) {
  std::vector<uint16_t> t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

uint32_t token_at(const ShardFile& shard, int64_t at) {
  uint32_t token = 0;
  shard.read(at, 1, &token);
  return token;
}

TEST(Shard, WritesAndReadsBackTheLlmcFormat) {
  TempDir dir;
  write_shard(dir / "a.bin", iota_tokens(1000, 7));
  ShardFile shard(dir / "a.bin");
  ASSERT_EQ(shard.size(), 1000);
  EXPECT_EQ(token_at(shard, 0), 7);
  EXPECT_EQ(token_at(shard, 999), 1006);
  EXPECT_EQ(std::filesystem::file_size(dir / "a.bin"), 1024u + 2000u);
}

// 16-bit ids widen to 32 on reading, a whole window at once; 32-bit shards (llm.c's version 2,
// for vocabularies beyond 65,536 ids) read back as written.
TEST(Shard, ReadsWindowsOfEitherWidth) {
  TempDir dir;
  write_shard(dir / "narrow.bin", iota_tokens(1000, 65000));
  ShardFile narrow(dir / "narrow.bin");
  EXPECT_EQ(narrow.token_bytes(), 2);
  std::vector<uint32_t> window(600);
  narrow.read(100, 600, window.data());
  for (size_t i = 0; i < window.size(); ++i)
    ASSERT_EQ(window[i], (65100 + i) % 65536) << i;

  std::vector<uint32_t> wide(500);
  std::iota(wide.begin(), wide.end(), 128000u);
  write_shard(dir / "wide.bin", wide);
  const std::string bytes = testing::read_file(dir / "wide.bin");
  ASSERT_EQ(bytes.size(), 1024u + 2000u);
  int32_t header[3];
  std::memcpy(header, bytes.data(), sizeof header);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 2);
  EXPECT_EQ(header[2], 500);
  ShardFile shard(dir / "wide.bin");
  EXPECT_EQ(shard.token_bytes(), 4);
  ASSERT_EQ(shard.size(), 500);
  EXPECT_EQ(token_at(shard, 0), 128000u);
  EXPECT_EQ(token_at(shard, 499), 128499u);
}

TEST(BatchBuffers, AreReusedOnlyOnceNothingHoldsThem) {
  BatchBuffers buffers(2, 3, /*pinned=*/false);
  const void* first;
  {
    Batch batch = buffers.acquire();
    EXPECT_EQ(batch.inputs.sizes(), (at::IntArrayRef{2, 3}));
    EXPECT_EQ(batch.targets.scalar_type(), at::kLong);
    first = batch.inputs.data_ptr();
  }
  Batch held = buffers.acquire();
  EXPECT_EQ(held.inputs.data_ptr(), first) << "a released buffer is handed out again";
  Batch second = buffers.acquire();
  EXPECT_NE(second.inputs.data_ptr(), first) << "a held buffer is never handed out twice";

  // What autograd keeps is a view or a shallow copy, not the Batch: it must keep the buffer too.
  at::Tensor view = held.targets.reshape(-1);
  const void* held_targets = held.targets.data_ptr();
  held = Batch{};
  second = Batch{};
  Batch third = buffers.acquire();
  EXPECT_NE(third.targets.data_ptr(), held_targets);
  EXPECT_EQ(buffers.pooled(), 2u);
}

TEST(Shard, TruncatedFileIsAClearError) {
  TempDir dir;
  write_shard(dir / "a.bin", iota_tokens(1000));
  std::filesystem::resize_file(dir / "a.bin", 1024 + 1000);
  std::string e = testing::user_error_of([&] { ShardFile s(dir / "a.bin"); });
  EXPECT_NE(e.find("truncated: its header promises 1000 tokens (3024 bytes) but the file has "
                   "2024 bytes"),
            std::string::npos)
      << e;
  std::filesystem::resize_file(dir / "a.bin", 100);
  e = testing::user_error_of([&] { ShardFile s(dir / "a.bin"); });
  EXPECT_NE(e.find("too short for the 1024-byte header"), std::string::npos) << e;
}

TEST(Shard, WrongMagicIsAClearError) {
  TempDir dir;
  testing::write_text(dir / "a.bin", std::string(4096, 'x'));
  std::string e = testing::user_error_of([&] { ShardFile s(dir / "a.bin"); });
  EXPECT_NE(e.find("is not a usable token shard: magic number"), std::string::npos) << e;
  EXPECT_NE(testing::user_error_of([&] {
              ShardFile s(dir / "missing.bin");
            }).find("cannot open token shard"),
            std::string::npos);
}

// A .npy file as numpy.save writes it: magic, version 1.0, a padded dict header, the data.
void write_npy(const std::string& path, const std::vector<uint16_t>& tokens, const char* descr,
               const std::string& shape) {
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2);
  testing::write_text(path, bytes);
}

TEST(Shard, ReadsNumpyAndRawFiles) {
  TempDir dir;
  write_npy(dir / "a.npy", iota_tokens(300, 5), "<u2", "(300,)");
  ShardFile npy(dir / "a.npy");
  ASSERT_EQ(npy.size(), 300);
  EXPECT_EQ(token_at(npy, 0), 5);
  EXPECT_EQ(token_at(npy, 299), 304);
  auto raw_tokens = iota_tokens(700, 9);
  testing::write_text(dir / "train.bin",
                      std::string(reinterpret_cast<const char*>(raw_tokens.data()), 1400));
  ShardFile raw(dir / "train.bin", ShardFormat::kRaw);
  ASSERT_EQ(raw.size(), 700);
  EXPECT_EQ(token_at(raw, 699), 708);
  // Without format = raw, a headerless .bin is reported, not misread.
  EXPECT_NE(testing::user_error_of([&] { ShardFile s(dir / "train.bin"); }).find("magic number"),
            std::string::npos);
}

TEST(Shard, NumpyFilesOfTheWrongKindAreClearErrors) {
  TempDir dir;
  write_npy(dir / "f.npy", iota_tokens(10), "<f4", "(5,)");
  EXPECT_NE(
      testing::user_error_of([&] { ShardFile s(dir / "f.npy"); }).find("dtype '<f4', not uint16"),
      std::string::npos);
  write_npy(dir / "m.npy", iota_tokens(12), "<u2", "(3, 4)");
  EXPECT_NE(testing::user_error_of([&] { ShardFile s(dir / "m.npy"); }).find("not 1-D"),
            std::string::npos);
  write_npy(dir / "t.npy", iota_tokens(10), "<u2", "(500,)");
  EXPECT_NE(testing::user_error_of([&] { ShardFile s(dir / "t.npy"); }).find("truncated"),
            std::string::npos);
}

TEST(Loader, ReadsSequentialWindowsWithTargetsShiftedByOne) {
  TempDir dir;
  write_shard(dir / "a.bin", iota_tokens(100));
  TokenLoader loader({{dir / "a.bin"}, 2, 4, 0, 1, 0, ShardFormat::kAuto});
  std::vector<int64_t> x(8), y(8);
  loader.next(x.data(), y.data());
  EXPECT_EQ(x, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(y, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  loader.next(x.data(), y.data());
  EXPECT_EQ(x[0], 8);
}

TEST(Loader, RanksTogetherReadWhatOneProcessReads) {
  TempDir dir;
  write_shard(dir / "a.bin", iota_tokens(50));
  write_shard(dir / "b.bin", iota_tokens(50, 1000));
  std::vector<std::string> files = {dir / "a.bin", dir / "b.bin"};
  TokenLoader single({files, 1, 4, 0, 1, 0, ShardFormat::kAuto});
  TokenLoader rank0({files, 1, 4, 0, 2, 0, ShardFormat::kAuto}),
      rank1({files, 1, 4, 1, 2, 0, ShardFormat::kAuto});
  std::vector<int64_t> x(4), y(4), x0(4), x1(4);
  for (int round = 0; round < 20; ++round) {  // crosses into b.bin and wraps back to a.bin
    rank0.next(x0.data(), y.data());
    rank1.next(x1.data(), y.data());
    single.next(x.data(), y.data());
    EXPECT_EQ(x, x0) << round;
    single.next(x.data(), y.data());
    EXPECT_EQ(x, x1) << round;
  }
  EXPECT_GE(single.position().epoch, 1);
}

TEST(Loader, PositionRestoresTheStream) {
  TempDir dir;
  write_shard(dir / "a.bin", iota_tokens(100));
  TokenLoader a({{dir / "a.bin"}, 2, 4, 0, 1, 0, ShardFormat::kAuto});
  std::vector<int64_t> x(8), y(8), z(8);
  a.next(x.data(), y.data());
  LoaderPosition saved = a.position();
  a.next(x.data(), y.data());
  TokenLoader b({{dir / "a.bin"}, 2, 4, 0, 1, 0, ShardFormat::kAuto});
  b.seek(saved);
  b.next(z.data(), y.data());
  EXPECT_EQ(x, z);
}

TEST(Loader, ShardSmallerThanOneWindowIsAClearError) {
  TempDir dir;
  write_shard(dir / "a.bin", iota_tokens(8));
  std::string e = testing::user_error_of([&] {
    TokenLoader l({{dir / "a.bin"}, 2, 4, 0, 1, 0, ShardFormat::kAuto});
  });
  EXPECT_NE(e.find("holds 8 tokens, fewer than one round of windows needs"), std::string::npos)
      << e;
}

// With a memory map, reading a page the file no longer has is SIGBUS: the process dies with its
// run left 'running'. Read by copy, it is an error that names the shard.
TEST(Loader, AShardTruncatedWhileItIsReadIsAClearError) {
  TempDir dir;
  write_shard(dir / "a.bin", iota_tokens(100000));
  TokenLoader loader({{dir / "a.bin"}, 2, 4, 0, 1, 0, ShardFormat::kAuto});
  std::vector<int64_t> x(8), y(8);
  loader.next(x.data(), y.data());
  std::filesystem::resize_file(dir / "a.bin", 0);
  const std::string e = testing::user_error_of([&] { loader.next(x.data(), y.data()); });
  EXPECT_NE(e.find("token shard '" + (dir / "a.bin") +
                   "' was truncated while this run read it: it now has 0 bytes, and the tokens "
                   "to read end at byte 1058"),
            std::string::npos)
      << e;
}

TEST(Loader, TokenBeyondTheVocabularyIsFoundInAnyPartOfALargeShard) {
  TempDir dir;
  std::vector<uint16_t> tokens(1500000, 7);
  tokens[1200000] = 77;
  write_shard(dir / "a.bin", tokens);
  const std::string e = testing::user_error_of([&] {
    TokenLoader l({{dir / "a.bin"}, 2, 4, 0, 1, 50, ShardFormat::kAuto});
  });
  EXPECT_NE(e.find("holds token id 77 at position 1200000"), std::string::npos) << e;
}

TEST(Loader, TokenBeyondTheVocabularyIsAClearError) {
  TempDir dir;
  write_shard(dir / "a.bin", iota_tokens(100));
  std::string e = testing::user_error_of([&] {
    TokenLoader l({{dir / "a.bin"}, 2, 4, 0, 1, 50, ShardFormat::kAuto});
  });
  EXPECT_NE(e.find("holds token id 99 at position 99, but the model's vocabulary has 50 ids"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace kiln
