// The gpt2 tokenizer against GPT-2's reference encoder. It needs the vocabulary that
// tools/setup.sh fetches into data/gpt2/; without it every test here is skipped.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/api/tokenizer.h"
#include "core/util/error.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::TempDir;

constexpr const char* kVocabDir = "data/gpt2";

struct Case {
  std::string text;
  std::vector<uint32_t> ids;
};

// Every expected list is the output of the npm package gpt-3-encoder@1.1.4 (Encoder.js, whose
// pattern has the \p{L} and \p{N} classes under the /u flag, so accented, CJK and emoji text
// splits as in GPT-2) run with node 20, and was checked to be identical to a Python rewrite of
// OpenAI's encoder.py on the `regex` module. "Hello world" = [15496, 995] is also the value
// every GPT-2 tutorial quotes.
const std::vector<Case>& reference_cases() {
  static const std::vector<Case> cases = {
      {"Hello world", {15496, 995}},
      // Contractions split off: "I" "'m" " don" "'t" " they" "'ll" " we" "'ve".
      {"I'm don't they'll we've", {40, 1101, 836, 470, 484, 1183, 356, 1053}},
      // A run of digits is one word, cut only by the merges: "20" "24" " is" " 123" "45" "678".
      {"2024 is 12345678", {1238, 1731, 318, 17031, 2231, 30924}},
      // A space run leaves its last space to the next word; "\n\n" is one token, " \n" two.
      {"a  b   c\n\n\nd \n", {64, 220, 275, 220, 220, 269, 628, 198, 67, 220, 198}},
      {"café naïve Zürich", {66, 1878, 2634, 41492, 1168, 9116, 7527}},
      // Each CJK character is three UTF-8 bytes, merged into two tokens apiece.
      {"你好世界", {19526, 254, 25001, 121, 10310, 244, 45911, 234}},
      {"hello 👋🌍", {31373, 50169, 233, 8582, 234, 235}},
      // encoder.py parses no special tokens out of text: the marker is seven ordinary tokens.
      {"<|endoftext|>", {27, 91, 437, 1659, 5239, 91, 29}},
      {"", {}},
  };
  return cases;
}

// Points the tokenizer at another vocabulary directory for the life of one test.
class VocabDirOverride {
 public:
  explicit VocabDirOverride(const std::string& dir) {
    if (const char* old = std::getenv(kVariable)) old_ = old;
    ::setenv(kVariable, dir.c_str(), 1);
  }
  ~VocabDirOverride() {
    if (old_) {
      ::setenv(kVariable, old_->c_str(), 1);
    } else {
      ::unsetenv(kVariable);
    }
  }

 private:
  static constexpr const char* kVariable = "KILN_GPT2_VOCAB_DIR";
  std::optional<std::string> old_;
};

class Gpt2TokenizerTest : public ::testing::Test {
 protected:
  // Loaded once: reading and hashing the vocabulary costs more than all the encoding here.
  static void SetUpTestSuite() {
    if (vocab_present()) tokenizer_ = new_tokenizer("gpt2");
  }
  static void TearDownTestSuite() { tokenizer_.reset(); }

  void SetUp() override {
    if (!vocab_present()) {
      GTEST_SKIP() << kVocabDir << "/encoder.json is missing: run tools/setup.sh to fetch it";
    }
  }

  static bool vocab_present() {
    return std::filesystem::exists(std::string(kVocabDir) + "/encoder.json");
  }

  static std::shared_ptr<Tokenizer> tokenizer_;
};

std::shared_ptr<Tokenizer> Gpt2TokenizerTest::tokenizer_;

TEST_F(Gpt2TokenizerTest, EncodesAsTheReferenceEncoderDoes) {
  for (const auto& [text, ids] : reference_cases()) {
    EXPECT_EQ(tokenizer_->encode(text), ids) << text;
    EXPECT_EQ(tokenizer_->decode(ids), text);
  }
}

TEST_F(Gpt2TokenizerTest, EndOfTextIsTheLastId) {
  EXPECT_EQ(tokenizer_->vocab_size(), 50257);
  EXPECT_EQ(tokenizer_->end_of_text(), std::optional<uint32_t>(50256));
  EXPECT_EQ(tokenizer_->decode({50256}), "<|endoftext|>");
}

TEST_F(Gpt2TokenizerTest, DecodeSkipsIdsOfAPaddedVocabulary) {
  EXPECT_EQ(tokenizer_->decode({15496, 50257, 50303, 995}), "Hello world");
}

TEST_F(Gpt2TokenizerTest, SavedTokenizerLoadsBackIdentical) {
  TempDir dir;
  save_tokenizer(*tokenizer_, "gpt2", dir.str());
  auto loaded = load_tokenizer(dir.str());
  for (const auto& c : reference_cases())
    EXPECT_EQ(loaded->encode(c.text), c.ids) << c.text;
  EXPECT_EQ(loaded->save(), tokenizer_->save());
}

TEST_F(Gpt2TokenizerTest, ThreadsEncodingAtOnceGetTheSerialResult) {
  std::string text;
  for (const auto& c : reference_cases())
    text += c.text + " ";
  const std::vector<uint32_t> expected = tokenizer_->encode(text);
  std::vector<std::vector<uint32_t>> results(4);
  std::vector<std::thread> threads;
  for (auto& result : results) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i)
        result = tokenizer_->encode(text);
    });
  }
  for (auto& thread : threads)
    thread.join();
  for (const auto& result : results)
    EXPECT_EQ(result, expected);
}

// Words this long would take quadratic time in a merge loop that rescans the word; a space run
// this long is where a backtracking regex engine could run out of stack.
TEST_F(Gpt2TokenizerTest, HandlesVeryLongWordsAndSpaceRuns) {
  const std::string word(200000, 'a');
  EXPECT_EQ(tokenizer_->decode(tokenizer_->encode(word)), word);

  const std::string spaces = std::string(200000, ' ') + "x";
  std::vector<uint32_t> expected(199999, 220);  // " " alone, then " x" (2124) as one word
  expected.push_back(2124);
  EXPECT_EQ(tokenizer_->encode(spaces), expected);
}

TEST_F(Gpt2TokenizerTest, TextThatIsNotUtf8IsAUserError) {
  EXPECT_NE(
      testing::user_error_of([&] { tokenizer_->encode("ok \xff"); }).find("not UTF-8 at byte 3"),
      std::string::npos);
}

TEST_F(Gpt2TokenizerTest, MissingVocabularySaysToRunSetup) {
  TempDir empty;
  VocabDirOverride override(empty.str());
  const std::string error = testing::user_error_of([] { new_tokenizer("gpt2"); });
  EXPECT_NE(error.find(empty / "encoder.json"), std::string::npos) << error;
  EXPECT_NE(error.find("tools/setup.sh"), std::string::npos) << error;
}

TEST_F(Gpt2TokenizerTest, AlteredVocabularyFailsItsChecksum) {
  TempDir altered;
  std::filesystem::copy(std::string(kVocabDir) + "/encoder.json", altered / "encoder.json");
  std::filesystem::copy(std::string(kVocabDir) + "/vocab.bpe", altered / "vocab.bpe");
  std::ofstream(altered / "vocab.bpe", std::ios::app) << "a b\n";
  VocabDirOverride override(altered.str());
  const std::string error = testing::user_error_of([] { new_tokenizer("gpt2"); });
  EXPECT_NE(error.find("is not GPT-2's file"), std::string::npos) << error;
  EXPECT_NE(error.find("1ce1664773c50f3e"), std::string::npos) << error;
}

}  // namespace
}  // namespace kiln
