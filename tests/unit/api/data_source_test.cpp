// The files a data plugin's split reads (split_files, core/api/data_source.h), asked through the
// two plugins that read them so, each refusal spelled out here word for word: a split with no
// pattern, a pattern of the config or of `kiln eval --data` that matches no file.
#include "core/api/data_source.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "core/config/config.h"
#include "core/util/error.h"
#include "test_util.h"

namespace kiln {
namespace {

class DataSplitFiles : public ::testing::Test {
 protected:
  // The data source `type` opens for `split` of a config whose [data] section is `data`.
  std::shared_ptr<DataSource> open(const std::string& type, const std::string& data,
                                   const std::string& split, const std::string& files = "") {
    const ResolvedConfig config = load_config_text(
        fmt::format("[model]\ntype = \"gpt\"\n[data]\ntype = \"{}\"\n{}", type, data),
        dir_ / "exp.toml", {});
    DataRequest request;
    request.split = split;
    request.files = files;
    return DataRegistry::create(type, config.params("data"), request);
  }

  // The refusal of open(), or "" when it opened.
  std::string refusal(const std::string& type, const std::string& data, const std::string& split,
                      const std::string& files = "") {
    try {
      open(type, data, split, files);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  }

  testing::TempDir dir_;
};

TEST_F(DataSplitFiles, AnEmptySplitIsNoneButAnEmptyTrainSplitIsRefused) {
  EXPECT_EQ(open("shards", "val = \"\"\n", "val"), nullptr);
  EXPECT_EQ(open("sft", "test = \"\"\n", "test"), nullptr);
  EXPECT_EQ(refusal("shards", "train = \"\"\n", "train"),
            "data.train is empty: set it to a shard pattern such as \"data/kjv_char/train_*.bin\" "
            "(made by `kiln prepare`)");
  EXPECT_EQ(refusal("sft", "train = \"\"\n", "train"),
            "data.train is empty: set it to a JSON Lines file of records such as "
            "\"experiments/data/kjv_sft_train.jsonl\"");
}

TEST_F(DataSplitFiles, APatternThatMatchesNoFileIsNamedAsTheUserGaveIt) {
  const std::string shards = dir_ / "none_*.bin";
  EXPECT_EQ(refusal("shards", fmt::format("train = \"{}\"\n", shards), "train"),
            fmt::format("data.train = \"{}\" matches no file: run `kiln prepare` (or "
                        "tools/setup.sh for the default corpus) or fix the pattern",
                        shards));
  const std::string records = dir_ / "none.jsonl";
  EXPECT_EQ(refusal("sft", fmt::format("val = \"{}\"\n", records), "val"),
            fmt::format("data.val = \"{}\" matches no file: fix the path or pattern", records));
  EXPECT_EQ(refusal("sft", "", "val", records),
            fmt::format("--data {} matches no file: fix the path or pattern", records));
}

}  // namespace
}  // namespace kiln
