// `kiln prepare`'s inputs (core/data/prepare.h): globs taken in sorted order, and JSON Lines
// read a document a line from --field, checked by decoding the shards with the tokenizer the
// prepare saved and comparing with the text this test put in; a line without the field is
// refused with its file:line. The streamed input's cuts (core/data/prepare_input.h) rebuild
// each file and fall only where no token can span them, a reader started at any cut goes on as
// one from the start would, and the shards are the same at one and three threads.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/api/tokenizer.h"
#include "core/data/prepare.h"
#include "core/data/prepare_input.h"
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
  prepare_dataset(char_options(dir, {dir / "*.txt"}));
  EXPECT_EQ(train_text(dir / "out"), "first file\nsecond file\n");
  EXPECT_NE(testing::user_error_of([&] {
              prepare_dataset(char_options(dir, {dir / "*.none"}));
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
  prepare_dataset(options);
  EXPECT_EQ(train_text(dir / "out"), "In the beginning was the word.\n");

  testing::write_text(dir / "bad.jsonl", "{\"text\": \"fine\"}\n{\"body\": \"no text\"}\n");
  options.inputs = {dir / "bad.jsonl"};
  const std::string error = testing::user_error_of([&] { prepare_dataset(options); });
  EXPECT_EQ(error.find(dir / "bad.jsonl" + ":2: no string field \"text\""), 0u) << error;
}

// Lines of varied length, some indented (where no cut may fall), some blank.
std::string ragged_text(int lines) {
  std::string text;
  for (int i = 0; i < lines; ++i) {
    text += std::string(static_cast<size_t>(i % 7), ' ') + "line " + std::to_string(i) +
            std::string(static_cast<size_t>(i * 13 % 29), 'x') + (i % 5 == 0 ? "\n\n" : "\n");
  }
  return text;
}

// The units of `input` from where it stands to the end.
std::vector<EncodeUnit> units_of(PrepareInput& input) {
  std::vector<EncodeUnit> units;
  for (EncodeUnit unit; input.next(unit);)
    units.push_back(unit);
  return units;
}

TEST(Prepare, TextIsCutOnlyBeforeALineStartingWithANonSpaceAndResumesAtAnyCut) {
  testing::TempDir dir;
  const std::string a = ragged_text(300), b = ragged_text(40);
  testing::write_text(dir / "a.txt", a);
  testing::write_text(dir / "b.txt", b);
  PrepareInput input({dir / "a.txt", dir / "b.txt"}, "", {}, 100);
  EXPECT_EQ(input.bytes_total(), static_cast<int64_t>(a.size() + b.size()));
  std::vector<InputPosition> starts;  // before each unit
  std::vector<int64_t> file_of;       // each unit's file: where the reader stands after it
  std::vector<EncodeUnit> units;
  for (EncodeUnit unit;; units.push_back(unit)) {
    starts.push_back(input.position());
    if (!input.next(unit)) break;
    file_of.push_back(input.position().file);
  }
  ASSERT_GT(units.size(), 20u);
  std::string joined[2];
  for (size_t u = 0; u < units.size(); ++u) {
    ASSERT_EQ(units[u].pieces.size(), 1u);
    const std::string& piece = units[u].pieces[0];
    const auto file = static_cast<size_t>(file_of[u]);
    EXPECT_EQ(units[u].starts_document[0] != 0, joined[file].empty());
    joined[file] += piece;
    const std::string& text = file == 0 ? a : b;
    const size_t end = joined[file].size();
    EXPECT_GE(piece.size(), std::min<size_t>(100, text.size() - (end - piece.size())));
    if (end < text.size()) {  // a cut inside the file: after a newline, before a non-space
      EXPECT_EQ(text[end - 1], '\n');
      EXPECT_NE(text[end], ' ');
      EXPECT_NE(text[end], '\n');
    }
  }
  EXPECT_EQ(joined[0], a);
  EXPECT_EQ(joined[1], b);
  // A reader started where unit k began gives units k, k+1, ... again.
  for (size_t k : {size_t{1}, units.size() / 2, units.size() - 1}) {
    PrepareInput resumed({dir / "a.txt", dir / "b.txt"}, "", starts[k], 100);
    const auto rest = units_of(resumed);
    ASSERT_EQ(rest.size(), units.size() - k);
    for (size_t u = 0; u < rest.size(); ++u)
      EXPECT_EQ(rest[u].pieces, units[k + u].pieces) << "unit " << k + u;
  }
}

// One long line of words (text8's shape): past 4 x piece_bytes, pieces end before a space
// between two non-spaces, so memory stays bounded.
TEST(Prepare, ALineWithoutEndIsCutBeforeAWordPastFourPieces) {
  testing::TempDir dir;
  std::string text;
  for (int i = 0; text.size() < 5000; ++i)
    text += "word" + std::to_string(i * 7919 % 1000) + (i % 9 == 0 ? "  " : " ");
  testing::write_text(dir / "line.txt", text);
  PrepareInput input({dir / "line.txt"}, "", {}, 100);
  std::string joined;
  for (const auto& unit : units_of(input)) {
    const std::string& piece = unit.pieces[0];
    joined += piece;
    if (joined.size() == text.size()) break;
    EXPECT_GE(piece.size(), 400u);
    EXPECT_LE(piece.size(), 420u);
    const size_t end = joined.size();
    EXPECT_EQ(text[end], ' ');
    EXPECT_NE(text[end - 1], ' ');
    EXPECT_NE(text[end + 1], ' ');
  }
  EXPECT_EQ(joined, text);
}

TEST(Prepare, TheSameShardsAtOneAndThreeThreadsDecodeToTheInputs) {
  testing::TempDir dir;
  const std::string a = ragged_text(2000), b = ragged_text(500);
  testing::write_text(dir / "a.txt", a);
  testing::write_text(dir / "b.txt", b);
  PrepareOptions options = char_options(dir, {dir / "a.txt", dir / "b.txt"});
  options.piece_bytes = 333;
  options.shard_tokens = 10'000;
  options.threads = 1;
  options.out_dir = dir / "one";
  prepare_dataset(options);
  options.threads = 3;
  options.out_dir = dir / "three";
  prepare_dataset(options);
  std::string text;
  for (int shard = 0;; ++shard) {
    const std::string name = fmt::format("/train_{:06}.bin", shard);
    if (!std::filesystem::exists(dir / "one" + name)) break;
    EXPECT_EQ(testing::read_file(dir / "one" + name), testing::read_file(dir / "three" + name));
    ShardFile file(dir / "one" + name, ShardFormat::kAuto);
    std::vector<uint32_t> ids(static_cast<size_t>(file.size()));
    file.read(0, file.size(), ids.data());
    text += load_tokenizer(dir / "one")->decode(ids);
  }
  EXPECT_EQ(text, a + b);
  EXPECT_FALSE(std::filesystem::exists(dir / "three/.prepare"));
}

}  // namespace
}  // namespace kiln
