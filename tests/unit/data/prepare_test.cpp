// `kiln prepare`'s inputs (core/data/prepare.h): globs taken in sorted order, and JSON Lines
// read a document a line from --field, checked by decoding the shards with the tokenizer the
// prepare saved and comparing with the text this test put in; a line without the field is
// refused with its file:line.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/api/tokenizer.h"
#include "core/data/prepare.h"
#include "core/data/shard.h"
#include "test_util.h"

namespace kiln {
namespace {

// The text of the train shard `dir` holds, decoded by the tokenizer saved beside it.
std::string train_text(const std::string& dir) {
  ShardFile shard(dir + "/train_000000.bin", ShardFormat::kAuto);
  std::vector<uint32_t> ids(static_cast<size_t>(shard.size()));
  shard.read(0, shard.size(), ids.data());
  return load_tokenizer(dir)->decode(ids);
}

PrepareOptions char_options(const testing::TempDir& dir, std::vector<std::string> inputs) {
  PrepareOptions options;
  options.inputs = std::move(inputs);
  options.out_dir = dir / "out";
  options.val_fraction = 0;
  return options;
}

TEST(Prepare, AGlobReadsItsFilesInSortedOrder) {
  testing::TempDir dir;
  testing::write_text(dir / "b.txt", "second file\n");
  testing::write_text(dir / "a.txt", "first file\n");
  testing::write_text(dir / "c.md", "not matched\n");
  prepare_dataset(char_options(dir, {dir / "*.txt"}), [](const std::string&) {});
  EXPECT_EQ(train_text(dir / "out"), "first file\nsecond file\n");
  EXPECT_NE(testing::user_error_of([&] {
              prepare_dataset(char_options(dir, {dir / "*.none"}), [](const std::string&) {});
            }).find("matches no file"),
            std::string::npos);
}

TEST(Prepare, JsonLinesGiveADocumentALineFromTheField) {
  testing::TempDir dir;
  testing::write_text(dir / "docs.jsonl",
                      "{\"text\": \"In the beginning\", \"id\": 1}\n\n"
                      "{\"id\": 2, \"text\": \" was the word.\\n\"}\n");
  PrepareOptions options = char_options(dir, {dir / "docs.jsonl"});
  options.field = "text";
  prepare_dataset(options, [](const std::string&) {});
  EXPECT_EQ(train_text(dir / "out"), "In the beginning was the word.\n");

  testing::write_text(dir / "bad.jsonl", "{\"text\": \"fine\"}\n{\"body\": \"no text\"}\n");
  options.inputs = {dir / "bad.jsonl"};
  const std::string error =
      testing::user_error_of([&] { prepare_dataset(options, [](const std::string&) {}); });
  EXPECT_EQ(error.find(dir / "bad.jsonl" + ":2: no string field \"text\""), 0u) << error;
}

}  // namespace
}  // namespace kiln
