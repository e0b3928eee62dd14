// The token loader's order of windows is one global sequence whatever the world size (core/data/
// token_loader.h): W ranks interleaved read exactly the windows one process reads, across shard
// ends and epochs, and a position saved at one world size continues at another without
// repeating or skipping a window.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <tuple>
#include <vector>

#include "core/data/token_loader.h"
#include "core/util/fs.h"

namespace kiln {
namespace {

// Two raw uint16 shards whose tokens name their place: shard a holds 0..36, shard b 100..130.
// With 4-token windows (and one target after each), a has (37 - 1) / 4 = 9 whole windows and b
// (31 - 1) / 4 = 7, so global window g of an epoch starts at token 4g in a for g < 9 and at
// 100 + 4 (g - 9) in b after.
struct TwoShards {
  ScratchDir dir;
  std::vector<std::string> files;
  TwoShards() {
    for (auto [name, first, count] : {std::tuple{"a.bin", 0, 37}, std::tuple{"b.bin", 100, 31}}) {
      files.push_back(dir / name);
      std::ofstream out(files.back(), std::ios::binary);
      for (int t = first; t < first + count; ++t) {
        const uint16_t token = static_cast<uint16_t>(t);
        out.write(reinterpret_cast<const char*>(&token), sizeof token);
      }
    }
  }
  TokenLoader loader(int rank, int world) const {
    return TokenLoader({files, 1, 4, rank, world, 0, ShardFormat::kRaw});
  }
};

int64_t first_token_of_window(int64_t global_window) {
  const int64_t g = global_window % 16;  // 9 + 7 windows an epoch
  return g < 9 ? 4 * g : 100 + 4 * (g - 9);
}

int64_t next_first_token(TokenLoader& loader) {
  int64_t inputs[4], targets[4];
  loader.next(inputs, targets);
  EXPECT_EQ(targets[3], inputs[3] + 1);  // the window's own next token, never the next shard's
  return inputs[0];
}

TEST(TokenOrder, RanksInterleaveTheOneGlobalOrderAcrossShardsAndEpochs) {
  TwoShards shards;
  for (int world : {1, 2, 3}) {
    SCOPED_TRACE(world);
    std::vector<TokenLoader> ranks;
    for (int r = 0; r < world; ++r)
      ranks.push_back(shards.loader(r, world));
    for (int64_t call = 0; call < 12; ++call) {
      for (int r = 0; r < world; ++r)
        EXPECT_EQ(next_first_token(ranks[r]), first_token_of_window(call * world + r))
            << "call " << call << ", rank " << r;
    }
  }
}

TEST(TokenOrder, APositionSavedAtOneWorldSizeContinuesAtAnother) {
  TwoShards shards;
  TokenLoader two = shards.loader(0, 2);
  for (int call = 0; call < 5; ++call)
    next_first_token(two);  // global windows 0..9 read by the two ranks
  const LoaderPosition saved = two.position();
  for (int world : {1, 3}) {
    SCOPED_TRACE(world);
    for (int r = 0; r < world; ++r) {
      TokenLoader rank = shards.loader(r, world);
      rank.seek(saved);
      for (int64_t call = 0; call < 4; ++call)
        EXPECT_EQ(next_first_token(rank), first_token_of_window(10 + call * world + r));
    }
  }
}

}  // namespace
}  // namespace kiln
