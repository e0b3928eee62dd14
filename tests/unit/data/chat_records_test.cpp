// Fine-tuning records (core/data/chat_records.h): the three shapes of a record, which tokens the
// loss counts, and bad records named by file:line, refused or skipped and counted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "core/api/tokenizer.h"
#include "core/data/chat_records.h"
#include "core/util/text.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::user_error_of;
using testing::write_text;

// A char tokenizer over printable ASCII and the newline: one token per byte, so that a test
// can find a token's text by its offset in the templated string.
std::shared_ptr<Tokenizer> char_tokenizer() {
  std::string alphabet = "\n";
  for (char c = 0x20; c < 0x7f; ++c)
    alphabet += c;
  auto tokenizer = new_tokenizer("char");
  tokenizer->fit(alphabet);
  return tokenizer;
}

TEST(ChatRecords, ReadsPromptResponseHistoryAndMessages) {
  auto simple = parse_chat_record(R"({"prompt": "p", "response": "r"})");
  ASSERT_EQ(simple.size(), 2u);
  EXPECT_EQ(simple[0].role, Role::kUser);
  EXPECT_EQ(simple[1].role, Role::kAssistant);
  EXPECT_EQ(simple[1].text, "r");

  auto history =
      parse_chat_record(R"({"prompt": "p2", "response": "r2", "history": [["p1", "r1"]]})");
  ASSERT_EQ(history.size(), 4u);
  EXPECT_EQ(history[0].text, "p1");
  EXPECT_EQ(history[1].text, "r1");
  EXPECT_EQ(history[1].role, Role::kAssistant);
  EXPECT_EQ(history[2].text, "p2");

  auto messages = parse_chat_record(
      R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},)"
      R"( {"role": "assistant", "content": "a"}]})");
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[0].role, Role::kSystem);
  EXPECT_EQ(messages[2].text, "a");
}

TEST(ChatRecords, CountsEveryResponseWithItsEndOfTurnAndNothingElse) {
  auto tokenizer = char_tokenizer();
  const ChatTemplate plain = chat_template("plain");
  auto turns = parse_chat_record(
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content":)"
      R"( "Hi"}, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"},)"
      R"( {"role": "assistant", "content": "Go well"}]})");
  TokenizedRecord record = tokenize_record(turns, plain, *tokenizer);
  // The same record spelled out here, and its counted bytes: each response and the blank line
  // that ends it.
  const std::string context1 = "System: Be brief.\nUser: Hi\nAssistant: ";
  const std::string response1 = "Hello\n\n";
  const std::string context2 = "User: Bye\nAssistant: ";
  const std::string response2 = "Go well\n\n";
  const std::string text = context1 + response1 + context2 + response2;
  EXPECT_EQ(record.tokens, tokenizer->encode(text));
  std::vector<uint8_t> expected;
  for (const auto& [part, counted] :
       {std::pair{context1, 0}, {response1, 1}, {context2, 0}, {response2, 1}}) {
    expected.insert(expected.end(), part.size(), static_cast<uint8_t>(counted));
  }
  EXPECT_EQ(record.counted, expected);
}

TEST(ChatRecords, TheChatmlTemplateMarksEachTurn) {
  auto tokenizer = char_tokenizer();
  auto record = tokenize_record(parse_chat_record(R"({"prompt": "a", "response": "b"})"),
                                chat_template("chatml"), *tokenizer);
  EXPECT_EQ(tokenizer->decode(record.tokens),
            "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n");
  EXPECT_NE(user_error_of([] { chat_template("alpaca"); }).find("use plain or chatml"),
            std::string::npos);
}

class BadRecords : public ::testing::Test {
 protected:
  // Line 1 is good; each case puts its bad line at line 3 (line 2 is blank: not a record).
  std::string refusal(const std::string& bad_line) {
    write_text(path_, good_ + "\n\n" + bad_line + "\n" + good_ + "\n");
    return user_error_of([&] { read_chat_records({path_}, options(false)); });
  }
  ChatRecordOptions options(bool skip) const {
    return {chat_template("plain"), tokenizer_.get(), 40, skip};
  }

  testing::TempDir dir_;
  std::string path_ = dir_ / "records.jsonl";
  std::string good_ = R"({"prompt": "p", "response": "r"})";
  std::shared_ptr<Tokenizer> tokenizer_ = char_tokenizer();
};

TEST_F(BadRecords, EachIsRefusedWithItsFileAndLine) {
  const std::string at = path_ + ":3: ";
  EXPECT_EQ(refusal("{\"prompt\": ").find(at + "not JSON"), 0u);
  EXPECT_EQ(refusal("[1, 2]").find(at + "not a JSON object"), 0u);
  EXPECT_EQ(refusal(R"({"prompt": "p"})").find(at + "the record has no \"response\""), 0u);
  EXPECT_EQ(refusal(R"({"prompt": 7, "response": "r"})")
                .find(at + "the record's \"prompt\" is not a string"),
            0u);
  EXPECT_EQ(refusal(R"({"messages": [{"role": "robot", "content": "x"}]})")
                .find(at + "message 1 has role \"robot\""),
            0u);
  EXPECT_EQ(refusal(R"({"messages": [{"role": "user", "content": "x"}]})")
                .find(at + "no assistant message"),
            0u);
  EXPECT_EQ(refusal(R"({"prompt": "p", "response": "r", "history": [["only one"]]})")
                .find(at + "\"history\" holds an entry"),
            0u);
  // "User: p\nAssistant: " is 19 bytes, the response 30 and "\n\n" 2: 51 > 40.
  const std::string long_response(30, 'x');
  const std::string over = refusal(R"({"prompt": "p", "response": ")" + long_response + "\"}");
  EXPECT_EQ(over.find(at + "51 tokens once templated, over the context"), 0u) << over;
  EXPECT_NE(over.find("on_bad_record = \"skip\""), std::string::npos);
  // A byte the tokenizer has no id for (a tab) is this record's fault too.
  EXPECT_EQ(refusal("{\"prompt\": \"a\\tb\", \"response\": \"r\"}").find(at + "the char tokenizer"),
            0u);
}

// data.on_long_record = "split": pieces of max_tokens that share one token with the next, so
// that every target of the record is in exactly one piece; pieces with nothing counted go.
TEST_F(BadRecords, ALongRecordSplitsIntoPiecesThatLearnEveryTargetOnce) {
  const std::string long_response(30, 'x');  // 19 + 30 + 2 = 51 tokens
  const std::string long_prompt(40, 'y');    // 6 + 40 + 12 + 3 = 61 tokens, 58 of them context
  write_text(path_, R"({"prompt": "p", "response": ")" + long_response + "\"}\n" +
                        R"({"prompt": ")" + long_prompt + R"(", "response": "r"})" + "\n");
  ChatRecordOptions split = options(false);
  split.max_tokens = 20;
  split.split_long = true;
  ChatRecords records = read_chat_records({path_}, split);
  EXPECT_EQ(records.split, 2);
  // The first record: [0, 20), [19, 39), [38, 51). The second: only [57, 61) counts anything.
  ASSERT_EQ(records.starts, (std::vector<int64_t>{0, 20, 40, 53, 57}));
  const std::vector<uint32_t> first =
      tokenizer_->encode("User: p\nAssistant: " + long_response + "\n\n");
  std::vector<uint32_t> joined(records.tokens.begin(), records.tokens.begin() + 20);
  joined.insert(joined.end(), records.tokens.begin() + 21, records.tokens.begin() + 40);
  joined.insert(joined.end(), records.tokens.begin() + 41, records.tokens.begin() + 53);
  EXPECT_EQ(joined, first);
  EXPECT_EQ(std::vector<uint32_t>(records.tokens.begin() + 53, records.tokens.end()),
            tokenizer_->encode(" r\n\n"));  // the last context token, then the response
}

// A number past double's range, even in a field Kiln does not read, is this record's fault, not
// "internal error: [json.exception.out_of_range.406]" with exit 1, which skip could not skip.
TEST_F(BadRecords, ANumberOutOfRangeIsABadRecordThatSkipSkips) {
  const std::string huge = R"({"prompt": "p", "response": "r", "score": 1e999})";
  const std::string refused = refusal(huge);
  EXPECT_EQ(refused.find(path_ + ":3: not readable JSON: number overflow"), 0u) << refused;
  EXPECT_EQ(refused.find("json.exception"), std::string::npos) << refused;
  write_text(path_, good_ + "\n" + huge + "\n" + good_ + "\n");
  ChatRecords records = read_chat_records({path_}, options(true));
  EXPECT_EQ(records.size(), 2);
  EXPECT_EQ(records.skipped, 1);
}

// Every JSON reader's refusal as "FILE:LINE:COL: why", from the JSON library's own exception.
TEST(JsonErrors, ASyntaxErrorIsFileLineColumnAndTheLibrarysCodeIsDropped) {
  try {
    const auto parsed = nlohmann::json::parse("{\n  \"a\": ,\n}");
    FAIL() << "nlohmann accepted a document with a missing value: " << parsed.dump();
  } catch (const nlohmann::json::exception& e) {
    const std::string text = json_error_text("config.json", e.what());
    EXPECT_EQ(text.rfind("config.json:2:", 0), 0u) << text << "\n" << e.what();
    EXPECT_NE(text.find(": syntax error while parsing value"), std::string::npos) << text;
    EXPECT_EQ(text.find("json.exception"), std::string::npos) << text;
  }
  try {
    const auto parsed = nlohmann::json::parse("[1e999]");
    FAIL() << "nlohmann accepted 1e999: " << parsed.dump();
  } catch (const nlohmann::json::exception& e) {
    EXPECT_EQ(json_error_text("x.json", e.what()), "x.json: number overflow parsing '1e999'")
        << e.what();
  }
}

// A template byte the tokenizer lacks is the template's fault, said before any record is read
// (not blamed on line 1 of the data). The tokenizer here has every printable
// character but '<', '>' and '|', which chatml's markers are made of.
TEST_F(BadRecords, ATemplateTheTokenizerCannotEncodeIsBlamedNotTheData) {
  write_text(path_, good_ + "\n");
  std::string alphabet = "\n";
  for (char c = 0x20; c < 0x7f; ++c) {
    if (c != '<' && c != '>' && c != '|') alphabet += c;
  }
  auto tokenizer = new_tokenizer("char");
  tokenizer->fit(alphabet);
  ChatRecordOptions chatml = options(false);
  chatml.chat = chat_template("chatml");
  chatml.tokenizer = tokenizer.get();
  const std::string error = user_error_of([&] { read_chat_records({path_}, chatml); });
  EXPECT_EQ(error.rfind("the chat template's text \"<|im_start|>system", 0), 0u) << error;
  EXPECT_EQ(error.find(path_), std::string::npos) << error;
}

TEST_F(BadRecords, SkippedOnesAreCountedAndTheFirstIsNamed) {
  write_text(path_, good_ + "\nnot json\n" + good_ + "\n{\"response\": \"r\"}\n");
  ChatRecords records = read_chat_records({path_}, options(true));
  EXPECT_EQ(records.size(), 2);
  EXPECT_EQ(records.skipped, 2);
  EXPECT_EQ(records.first_skipped.find(path_ + ":2: not JSON"), 0u) << records.first_skipped;
  EXPECT_EQ(records.starts, (std::vector<int64_t>{0, 22, 44}));  // "User: p\nAssistant: r\n\n"
}

TEST_F(BadRecords, AFileWithNoUsableRecordIsRefused) {
  write_text(path_, "\nnot json\n");
  EXPECT_NE(user_error_of([&] {
              read_chat_records({path_}, options(true));
            }).find("no usable record in " + path_ + " (1 skipped; the first: " + path_ + ":2:"),
            std::string::npos);
  EXPECT_NE(user_error_of([&] {
              read_chat_records({path_ + ".missing"}, options(true));
            }).find("cannot read the records file"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
