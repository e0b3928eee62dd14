// A sharded snapshot's tensors (core/checkpoint/state_shards.h): parts written by two "ranks" as
// fsdp cuts rows and as tensor parallelism cuts columns read back under another cut, equal to the
// whole tensor cut by LibTorch's narrow, reading only the rows that overlap; the files are plain
// safetensors (read by weights_io) whose byte ranges the manifest entry names.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/checkpoint/state_shards.h"
#include "core/checkpoint/weights_io.h"
#include "core/util/error.h"
#include "test_util.h"

namespace kiln {
namespace {

// Rank `rank`'s part of `whole` cut along `dim` into `ranks` pieces of `size` (the last shorter).
StateSlice part_of(const at::Tensor& whole, int64_t dim, int64_t size, int rank) {
  const int64_t first = std::min(whole.size(dim), rank * size);
  const int64_t count = std::min(size, whole.size(dim) - first);
  std::vector<int64_t> offsets(static_cast<size_t>(whole.dim()), 0);
  offsets[static_cast<size_t>(dim)] = first;
  return {"model/w", {}, whole.sizes().vec(), offsets, whole.narrow(dim, first, count), true};
}

// Every rank's file written as a snapshot would list them.
nlohmann::json write_parts(const std::string& dir, const at::Tensor& whole, int64_t dim,
                           int ranks) {
  const int64_t size = (whole.size(dim) + ranks - 1) / ranks;
  nlohmann::json files = nlohmann::json::object();
  for (int r = 0; r < ranks; ++r) {
    files[state_shard_name(r)] =
        write_state_shard(dir + "/" + state_shard_name(r), {part_of(whole, dim, size, r)}, [] {});
  }
  return files;
}

TEST(StateShards, RowBlocksOfTwoRanksReadOnThreeAreTheWholeTensorsRowsReadingOnlyThoseRows) {
  testing::TempDir dir;
  const at::Tensor whole = at::arange(7 * 5, at::kFloat).reshape({7, 5});
  const nlohmann::json files = write_parts(dir.str(), whole, 0, 2);  // rows 0-3 and 4-6
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE(rank);
    const at::Tensor held = at::zeros({3, 5});
    StateSlice part = part_of(whole, 0, 3, rank);
    const at::Tensor expected = part.local.clone();
    part.local = held.narrow(0, 0, expected.size(0));
    const int64_t read = read_state_shards(dir.str(), files, {part});
    EXPECT_TRUE(at::equal(part.local, expected));
    EXPECT_EQ(read, expected.numel() * 4);  // its rows, from one file or two
  }
}

TEST(StateShards, ColumnSlicesReadAsRowBlocksAndAsOneWholeTensor) {
  testing::TempDir dir;
  const at::Tensor whole = at::randn({4, 6}, at::kDouble);
  const nlohmann::json files = write_parts(dir.str(), whole, 1, 3);  // two columns each
  StateSlice rows = part_of(whole, 0, 2, 1);
  const at::Tensor expected_rows = rows.local.clone();
  rows.local = at::zeros_like(expected_rows);
  StateSlice all = part_of(whole, 0, 4, 0);
  all.local = at::zeros({4, 6}, at::kFloat);  // loaded into fp32: the values converted
  read_state_shards(dir.str(), files, {rows, all});
  EXPECT_TRUE(at::equal(rows.local, expected_rows));
  EXPECT_TRUE(at::equal(all.local, whole.to(at::kFloat)));
}

TEST(StateShards, TheFileIsSafetensorsAndTheManifestNamesEachPartsBytes) {
  testing::TempDir dir;
  const at::Tensor whole = at::arange(12, at::kLong).reshape({6, 2});
  const nlohmann::json files = write_parts(dir.str(), whole, 0, 2);
  const auto second = read_weights(dir.str() + "/" + state_shard_name(1));
  EXPECT_TRUE(at::equal(second.at("model/w@3,0"), whole.narrow(0, 3, 3)));
  const nlohmann::json& part = files.at(state_shard_name(1)).at("parts").at(0);
  EXPECT_EQ(part.at("end").get<int64_t>() - part.at("begin").get<int64_t>(), 3 * 2 * 8);
  EXPECT_EQ(files.at(state_shard_name(1)).at("bytes").get<int64_t>(),
            part.at("end").get<int64_t>());
}

TEST(StateShards, APartTheSnapshotDoesNotHoldOrHoldsInAnotherShapeIsNamed) {
  testing::TempDir dir;
  const nlohmann::json files = write_parts(dir.str(), at::ones({4, 2}), 0, 1);
  StateSlice other = part_of(at::ones({5, 2}), 0, 5, 0);
  StateSlice missing = other;
  missing.tensor = "model/v";
  try {
    read_state_shards(dir.str(), files, {other, missing});
    FAIL() << "loaded";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("model/w is [4, 2] in the snapshot, [5, 2] in the model"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("model/v is not in the snapshot"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace kiln
