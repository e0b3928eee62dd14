// The run store's record of the files a run reads (core/store/runs/inputs.h): which keys it
// covers, written with the run and read back, what a later command reads, and what a change
// of the files looks like. File sizes come from the bytes the test wrote.
#include "core/store/runs/inputs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/store/history/reader.h"
#include "core/store/runs/sources.h"
#include "core/store/runs/writer.h"
#include "test_util.h"

namespace kiln {
namespace {

// The shard names a pattern matches, in a folder `data` of the test's directory.
class RunInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_ / "data");
    testing::write_text(dir_ / "data/t_0.bin", "12345");
    testing::write_text(dir_ / "data/t_1.bin", "abc");
    testing::write_text(dir_ / "data/v_0.bin", "xy");
  }

  // data.train as given (`train`), data.val absolute.
  ResolvedConfig config(const std::string& train) {
    return load_config_text("[model]\ntype = \"gpt\"\n[data]\ntype = \"shards\"\ntrain = \"" +
                                train + "\"\nval = \"" + dir_ / "data/v_*.bin" + "\"\n",
                            "exp.toml", {});
  }

  testing::TempDir dir_;
};

TEST_F(RunInputs, EveryKeyThatNamesFilesAndHasAValueIsRecordedWithItsFiles) {
  const auto inputs = inputs_of(config(dir_ / "data/t_*.bin"));
  ASSERT_EQ(inputs.size(), 2u);  // data.test and model.init_from are empty
  EXPECT_EQ(inputs[0].key, "data.train");
  EXPECT_EQ(inputs[0].resolved, dir_ / "data/t_*.bin");
  ASSERT_EQ(inputs[0].files.size(), 2u);
  EXPECT_EQ(inputs[0].files[0].size, 5);
  EXPECT_EQ(inputs[0].files[1].path, dir_ / "data/t_1.bin");
  // XXH3-64 of "abc", as xxhsum -H3 prints it
  EXPECT_EQ(inputs[0].files[1].checksum, "xxh3:78af5f94892f3950");
  EXPECT_EQ(inputs[1].key, "data.val");
}

TEST_F(RunInputs, ARelativePathIsRecordedAbsoluteAndALaterCommandReadsItFromAnywhere) {
  const std::string here = std::filesystem::current_path().string();
  ASSERT_EQ(::chdir(dir_.str().c_str()), 0);
  const ResolvedConfig at_start = config("data/t_*.bin");
  const auto inputs = inputs_of(at_start);
  ASSERT_EQ(::chdir(here.c_str()), 0);
  EXPECT_EQ(inputs[0].given, "data/t_*.bin");
  EXPECT_EQ(inputs[0].resolved, dir_ / "data/t_*.bin");

  const std::string db = dir_ / "kiln.db";
  const int64_t id = RunStore(db).create_run(
      NewRun{"a", "exp.toml", at_start.to_toml(), at_start.hash(), 1, 1, 3, "", "h", "", "", ""},
      RunProvenance{{}, {}, inputs});
  HistoryDb history(db);
  const auto recorded = read_inputs(history.connection(), id);
  ASSERT_EQ(recorded.size(), 2u);
  EXPECT_EQ(recorded[0].given, "data/t_*.bin");
  EXPECT_EQ(recorded[0].files.size(), 2u);
  EXPECT_EQ(recorded[0].files[1].checksum, inputs[0].files[1].checksum);

  // In this directory "data/t_*.bin" matches nothing; the recorded files are read instead, and
  // the config's text and hash stay those of the run.
  ResolvedConfig later = config("data/t_*.bin");
  use_recorded_inputs(later, recorded);
  EXPECT_EQ(later.params("data").path("train"), dir_ / "data/t_*.bin");
  EXPECT_EQ(later.params("data").text("train"), "data/t_*.bin");
  EXPECT_EQ(later.hash(), at_start.hash());
  EXPECT_TRUE(changed_inputs(recorded, inputs_of(later)).empty());
}

TEST_F(RunInputs, AChangeOfTheFilesIsOneLinePerKey) {
  ResolvedConfig c = config(dir_ / "data/t_*.bin");
  const auto recorded = inputs_of(c);
  testing::write_text(dir_ / "data/t_1.bin", "abcdefg");
  std::filesystem::remove(dir_ / "data/v_0.bin");
  const auto lines = changed_inputs(recorded, inputs_of(c));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "data.train (" + dir_ / "data/t_*.bin" + "): t_1.bin 3 -> 7 bytes");
  EXPECT_EQ(lines[1], "data.val (" + dir_ / "data/v_*.bin" + "): no file matches it now");
}

}  // namespace
}  // namespace kiln
