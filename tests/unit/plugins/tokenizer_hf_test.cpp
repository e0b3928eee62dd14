// The hf tokenizer (plugins/tokenizer_hf.cpp) against the gpt2 one: GPT-2's tokenizer.json is
// built here from the vocabulary tools/setup.sh fetches into data/gpt2/, in the three shapes
// Hugging Face files take, and must give exactly the gpt2 tokenizer's ids. Also: refusals of
// tokenizers it cannot apply, and 32-bit shards from `kiln prepare` for vocabularies beyond
// 65,536 ids, read back byte by byte.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/api/tokenizer.h"
#include "core/data/prepare.h"
#include "core/data/token_loader.h"
#include "test_util.h"

namespace kiln {
namespace {

using Json = nlohmann::json;
using testing::TempDir;
using testing::user_error_of;
using testing::write_text;

constexpr const char* kGpt2VocabDir = "data/gpt2";
// OpenAI's encoder.py, typed again here rather than taken from Kiln.
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class Shape { kByteLevel, kListMerges, kSplitThenByteLevel };

// GPT-2's tokenizer.json as the Hub's gpt2 repository holds it, or reshaped: merges as
// [a, b] lists (newer files), or the split pattern as a Split step before a ByteLevel step
// without its own regex (how Llama 3 and Qwen files are laid out).
Json gpt2_tokenizer_json(Shape shape) {
  std::ifstream encoder(std::string(kGpt2VocabDir) + "/encoder.json");
  std::ifstream bpe(std::string(kGpt2VocabDir) + "/vocab.bpe");
  Json merges = Json::array();
  std::string line;
  std::getline(bpe, line);  // #version
  while (std::getline(bpe, line) && !line.empty()) {
    const size_t space = line.find(' ');
    if (shape == Shape::kListMerges) {
      merges.push_back({line.substr(0, space), line.substr(space + 1)});
    } else {
      merges.push_back(line);
    }
  }
  Json byte_level = {{"type", "ByteLevel"},
                     {"add_prefix_space", false},
                     {"trim_offsets", true},
                     {"use_regex", shape != Shape::kSplitThenByteLevel}};
  Json pre = byte_level;
  if (shape == Shape::kSplitThenByteLevel) {
    const Json split = {{"type", "Split"},
                        {"pattern", {{"Regex", kGpt2Regex}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
    pre = {{"type", "Sequence"}, {"pretokenizers", Json::array({split, byte_level})}};
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"added_tokens",
           {{{"id", 50256},
             {"content", "<|endoftext|>"},
             {"single_word", false},
             {"lstrip", false},
             {"rstrip", false},
             {"normalized", true},
             {"special", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre},
          {"post_processor", byte_level},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""},
            {"fuse_unk", false},
            {"vocab", Json::parse(encoder)},
            {"merges", merges}}}};
}

// English prose, contractions, digits, punctuation, runs of spaces, tabs and newlines, accents,
// CJK, emoji (with a zero-width joiner), and the characters around them.
std::string mixed_text() {
  return "The quick brown fox jumps over the lazy dog. It's 2024, and I'm sure we'll "
         "see they've done what you'd expect -- or haven't they?\n\n"
         "Numbers: 3.14159, 1,000,000 and 12345678901234567890; phone +1 (555) 010-9999.\n"
         "   Indented line\twith\ttabs\t\tand  double   spaces    here.\n"
         "\n\n\n   \n"
         "Café, naïve, Zürich, façade, Ångström, Ελληνικά, Русский текст, עברית, العربية.\n"
         "你好，世界！日本語のテキスト。한국어 문장.\n"
         "Emoji: 👋🌍🎉 👩‍💻 ❤️ 🇺🇸 — done… “quoted” ‘single’ "
         "«guillemets».\n"
         "Code: if (x != y) { return a[i] + b->c; } // comment #tag @user $100 50% ~/path\n"
         "Mixed4digits2and3letters x86_64 C++17 e=mc^2 ALLCAPS CamelCase snake_case\n"
         "Trailing spaces   \n  and a last line without newline ...!!!???";
}

class HfTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(std::string(kGpt2VocabDir) + "/encoder.json")) {
      GTEST_SKIP() << kGpt2VocabDir << "/encoder.json is missing: run tools/setup.sh to fetch it";
    }
  }

  std::shared_ptr<Tokenizer> hf(Shape shape) {
    const std::string path = dir_ / "tokenizer.json";
    write_text(path, gpt2_tokenizer_json(shape).dump());
    return new_tokenizer("hf", path);
  }

  TempDir dir_;
};

TEST_F(HfTokenizerTest, GivesTheGpt2TokenizersIdsInEveryShapeOfFile) {
  auto gpt2 = new_tokenizer("gpt2");
  const std::string text = mixed_text();
  const std::vector<uint32_t> expected = gpt2->encode(text);
  ASSERT_GT(expected.size(), 300u);
  for (Shape shape : {Shape::kByteLevel, Shape::kListMerges, Shape::kSplitThenByteLevel}) {
    auto tokenizer = hf(shape);
    EXPECT_EQ(tokenizer->encode(text), expected) << "shape " << static_cast<int>(shape);
    EXPECT_EQ(tokenizer->decode(expected), text);
    EXPECT_EQ(tokenizer->vocab_size(), 50257);
    EXPECT_EQ(tokenizer->end_of_text(), std::optional<uint32_t>(50256));
  }
}

TEST_F(HfTokenizerTest, AddedTokensAreCutOutOfTheTextAsHuggingFaceDoes) {
  auto tokenizer = hf(Shape::kByteLevel);
  auto gpt2 = new_tokenizer("gpt2");
  std::vector<uint32_t> expected = gpt2->encode("Hello");
  expected.push_back(50256);
  for (uint32_t id : gpt2->encode(" world"))
    expected.push_back(id);
  EXPECT_EQ(tokenizer->encode("Hello<|endoftext|> world"), expected);
  EXPECT_EQ(tokenizer->decode(expected), "Hello<|endoftext|> world");
}

// Qwen 2's normalizer: a decomposed "e" + U+0301 is the precomposed "é" (U+00E9) once normalized,
// and GPT-2's tokens for the precomposed text are the reference; the added token stays whole.
TEST_F(HfTokenizerTest, AnNfcNormalizerComposesTheTextBetweenAddedTokens) {
  Json file = gpt2_tokenizer_json(Shape::kByteLevel);
  file["normalizer"] = {{"type", "Sequence"}, {"normalizers", Json::array({{{"type", "NFC"}}})}};
  write_text(dir_ / "nfc.json", file.dump());
  auto nfc = new_tokenizer("hf", dir_ / "nfc.json");
  auto plain = hf(Shape::kByteLevel);
  const std::string decomposed = "Cafe\u0301 and re\u0301sume\u0301<|endoftext|>e\u0301";
  const std::string composed = "Caf\u00e9 and r\u00e9sum\u00e9<|endoftext|>\u00e9";
  EXPECT_EQ(nfc->encode(decomposed), plain->encode(composed));
  EXPECT_NE(plain->encode(decomposed), plain->encode(composed));
  EXPECT_EQ(nfc->decode(nfc->encode(decomposed)), composed);
  // Bytes that are not UTF-8 reach the BPE as they are, which refuses them as without one.
  EXPECT_NE(user_error_of([&] {
              nfc->encode(
                  "a\xff\xfe"
                  "b");
            }).find("not UTF-8 at byte 1"),
            std::string::npos);
}

// DeepSeek-V3's tokenizer.json has {"type": "Sequence", "normalizers": []}: no step, the identity.
// It encodes as with no normalizer at all; a Sequence holding a step Kiln lacks is refused.
TEST_F(HfTokenizerTest, AnEmptySequenceOfNormalizersIsNoneAndAnUnknownStepIsRefused) {
  Json file = gpt2_tokenizer_json(Shape::kByteLevel);
  file["normalizer"] = {{"type", "Sequence"}, {"normalizers", Json::array()}};
  write_text(dir_ / "empty.json", file.dump());
  auto empty = new_tokenizer("hf", dir_ / "empty.json");
  const std::string decomposed = "Cafe\u0301<|endoftext|>";
  EXPECT_EQ(empty->encode(decomposed), hf(Shape::kByteLevel)->encode(decomposed));
  file["normalizer"] = {{"type", "Sequence"},
                        {"normalizers", Json::array({{{"type", "NFC"}}, {{"type", "NFKC"}}})}};
  write_text(dir_ / "nfkc.json", file.dump());
  EXPECT_NE(user_error_of([&] {
              new_tokenizer("hf", dir_ / "nfkc.json");
            }).find("its normalizer is NFKC, and Kiln applies only NFC"),
            std::string::npos);
}

TEST_F(HfTokenizerTest, SavedInADatasetItLoadsBackIdentical) {
  auto tokenizer = hf(Shape::kListMerges);
  TempDir data;
  save_tokenizer(*tokenizer, "hf", data.str());
  std::filesystem::remove(dir_ / "tokenizer.json");  // the dataset keeps its own copy
  auto loaded = load_tokenizer(data.str());
  EXPECT_EQ(loaded->encode(mixed_text()), tokenizer->encode(mixed_text()));
}

TEST(HfTokenizer, RefusesWhatItCannotApplyWithOneLine) {
  TempDir dir;
  const Json byte_level = {{"type", "ByteLevel"}};
  const Json tiny_bpe = {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", Json::array()}};
  auto error_of = [&](const std::string& contents) {
    write_text(dir / "t.json", contents);
    const std::string error = user_error_of([&] { new_tokenizer("hf", dir / "t.json"); });
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    return error;
  };
  auto has = [](const std::string& error, const std::string& part) {
    EXPECT_NE(error.find(part), std::string::npos) << error;
  };
  has(error_of(Json{{"model", {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}}},
                    {"pre_tokenizer", {{"type", "BertPreTokenizer"}}}}
                   .dump()),
      "its model is WordPiece, not byte-level BPE");
  has(error_of(Json{{"model", {{"type", "Unigram"}}}, {"pre_tokenizer", byte_level}}.dump()),
      "Unigram");
  has(error_of(Json{{"model", tiny_bpe}, {"pre_tokenizer", {{"type", "Metaspace"}}}}.dump()),
      "pre-tokenizer Metaspace is not one Kiln applies");
  has(error_of(Json{{"model", tiny_bpe}, {"pre_tokenizer", nullptr}}.dump()), "no ByteLevel");
  has(error_of(Json{
          {"model", tiny_bpe}, {"normalizer", {{"type", "NFKC"}}}, {"pre_tokenizer", byte_level}}
                   .dump()),
      "its normalizer is NFKC, and Kiln applies only NFC");
  // Byte-level, but without a token for every byte.
  has(error_of(Json{{"model", tiny_bpe}, {"pre_tokenizer", byte_level}}.dump()),
      "no token for byte 0x00");
  has(error_of("{\"model\": {\"type\": \"BPE\", \"vocab\": "), "not a usable Hugging Face");
  has(error_of("[1, 2, 3]"), "not a JSON object");
  has(user_error_of([] { new_tokenizer("hf"); }), "--tokenizer-file");
  has(user_error_of([&] { new_tokenizer("char", dir / "t.json"); }), "reads no file");
}

// The byte -> code point table of GPT-2's encoder.py (bytes_to_unicode), as UTF-8.
std::string spelling(int byte) {
  const bool printable =
      (byte >= '!' && byte <= '~') || (byte >= 0xa1 && byte <= 0xac) || byte >= 0xae;
  int point = byte;
  if (!printable) {
    point = 256;
    for (int b = 0; b < byte; ++b) {
      if (!((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae)) ++point;
    }
  }
  if (point < 0x80) return std::string(1, static_cast<char>(point));
  return {static_cast<char>(0xc0 | point >> 6), static_cast<char>(0x80 | (point & 0x3f))};
}

// SmolLM's Digits step (each digit its own word) and Llama 3's ignore_merges (a word that is a
// token is that token), on a vocabulary of the 256 bytes at their own values plus four tokens.
TEST(HfTokenizer, AppliesDigitsAndIgnoreMerges) {
  TempDir dir;
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b)
    vocab[spelling(b)] = b;
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  vocab["20"] = 258;
  vocab["Ġab"] = 259;
  auto tokenizer = [&](bool digits, bool ignore_merges) {
    Json pre = {{"type", "ByteLevel"}};
    if (digits) {
      pre = {
          {"type", "Sequence"},
          {"pretokenizers", Json::array({{{"type", "Digits"}, {"individual_digits", true}}, pre})}};
    }
    write_text(dir / "t.json", Json{{"model",
                                     {{"type", "BPE"},
                                      {"vocab", vocab},
                                      {"merges", Json::array({"a b", "2 0", "Ġ ab"})},
                                      {"ignore_merges", ignore_merges}}},
                                    {"pre_tokenizer", pre}}
                                   .dump());
    return new_tokenizer("hf", dir / "t.json");
  };
  // "abc 2024": the words "abc" and " 2024" (GPT-2's split); "2 0" merges once in " 2024".
  EXPECT_EQ(tokenizer(false, false)->encode("abc 2024"),
            (std::vector<uint32_t>{256, 'c', ' ', 258, '2', '4'}));
  EXPECT_EQ(tokenizer(false, true)->encode("abc 2024"),
            (std::vector<uint32_t>{257, ' ', 258, '2', '4'}));
  // Digits first: " ", "2", "0", "2", "4" are words of their own, so "2 0" never merges.
  EXPECT_EQ(tokenizer(true, false)->encode("abc 2024"),
            (std::vector<uint32_t>{256, 'c', ' ', '2', '0', '2', '4'}));
  EXPECT_EQ(tokenizer(true, false)->encode(" ab"), (std::vector<uint32_t>{259}));
}

TEST(HfTokenizer, VocabulariesBeyond65536IdsPrepareThirtyTwoBitShards) {
  TempDir dir;
  // Every byte at 70000 + byte, and one merge: "h" "e" -> 100000.
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b)
    vocab[spelling(b)] = 70000 + b;
  vocab["he"] = 100000;
  write_text(dir / "tokenizer.json",
             Json{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", Json::array({"h e"})}}},
                  {"pre_tokenizer", {{"type", "ByteLevel"}}}}
                 .dump());
  write_text(dir / "corpus.txt", "hello there");
  PrepareOptions options;
  options.inputs = {dir / "corpus.txt"};
  options.tokenizer = "hf";
  options.tokenizer_file = dir / "tokenizer.json";
  options.out_dir = dir / "data";
  options.val_fraction = 0;
  const PrepareSummary summary = prepare_dataset(options);
  EXPECT_EQ(summary.vocab_size, 100001);
  // "hello" " there": h+e merge in both words; the space is its own byte.
  auto byte = [](char c) { return 70000u + static_cast<unsigned char>(c); };
  const std::vector<uint32_t> expected = {100000,    byte('l'), byte('l'), byte('o'), byte(' '),
                                          byte('t'), 100000,    byte('r'), byte('e')};
  const std::string file = testing::read_file(dir / "data/train_000000.bin");
  ASSERT_EQ(file.size(), 1024 + 4 * expected.size());
  int32_t header[3];
  std::memcpy(header, file.data(), sizeof header);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 2);  // llm.c's version of uint32 tokens
  EXPECT_EQ(header[2], static_cast<int32_t>(expected.size()));
  std::vector<uint32_t> stored(expected.size());
  std::memcpy(stored.data(), file.data() + 1024, 4 * expected.size());
  EXPECT_EQ(stored, expected);

  TokenLoaderOptions loader_options;
  loader_options.files = {dir / "data/train_000000.bin"};
  loader_options.seq_len = 8;
  loader_options.vocab_limit = 100001;
  TokenLoader loader(loader_options);
  std::vector<int64_t> inputs(8), targets(8);
  loader.next(inputs.data(), targets.data());
  EXPECT_EQ(inputs, std::vector<int64_t>(expected.begin(), expected.end() - 1));
  EXPECT_EQ(targets, std::vector<int64_t>(expected.begin() + 1, expected.end()));
}

}  // namespace
}  // namespace kiln
