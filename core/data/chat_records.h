// Fine-tuning records: JSON Lines of prompt/response conversations, laid out by a chat template
// and tokenized, each token marked with whether the loss counts it (the `sft` data plugin).
//
// A record is one JSON object a line (blank lines are ignored), in one of two shapes:
//   {"prompt": "...", "response": "...", "history": [["earlier prompt", "its response"], ...]}
//       ("history" is optional: the turns before this one, oldest first)
//   {"messages": [{"role": "system" | "user" | "assistant", "content": "..."}, ...]}
// Every assistant turn is a response: in multi-turn records (history, several assistant
// messages) the loss counts all of them, not only the last one, so each record is learned once.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/api/tokenizer.h"

namespace kiln {

// The text put around each turn before tokenizing. A response's tokens and its assistant_suffix
// (the end-of-turn marker, so that the model learns to stop) are counted; everything else is
// context: the prefixes, the system and user turns with their suffixes.
struct ChatTemplate {
  std::string system_prefix, system_suffix;
  std::string user_prefix, user_suffix;
  std::string assistant_prefix, assistant_suffix;
};

// The templates an experiment names (data.template):
//   plain   "System: {text}\n"  "User: {text}\n"  "Assistant: {text}\n\n"
//           (only characters a plain-text corpus has, so that a char tokenizer can encode it)
//   chatml  "<|im_start|>system\n{text}<|im_end|>\n", the same for user and assistant (Qwen's and
//           SmolLM's markers; a tokenizer without them as special tokens spells them in pieces)
ChatTemplate chat_template(const std::string& name);
// A UserError naming the template's text and how to fix it when some of its markers do not
// encode with `tokenizer`: checked before any record or task item is blamed for them.
void check_template_encodes(const ChatTemplate& chat, const Tokenizer& tokenizer);
const std::vector<std::string>& chat_template_names();

enum class Role { kSystem, kUser, kAssistant };

struct Turn {
  Role role = Role::kUser;
  std::string text;
};

// Why one line is not a usable record; the reader adds file:line.
class BadRecord : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One line's turns, in order. BadRecord: not JSON, not an object, a missing or mistyped field,
// an unknown role, no assistant turn.
std::vector<Turn> parse_chat_record(const std::string& line);

// A record laid out by the template and tokenized one piece at a time (so that a piece's tokens
// never merge with its neighbours' and the counted ones are known exactly).
struct TokenizedRecord {
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> counted;  // 1 for response tokens, per token
};
TokenizedRecord tokenize_record(const std::vector<Turn>& turns, const ChatTemplate& chat,
                                const Tokenizer& tokenizer);

struct ChatRecordOptions {
  ChatTemplate chat;
  const Tokenizer* tokenizer = nullptr;
  // The most tokens a record may have: one row of the batch holds seq_len inputs and their
  // targets, the inputs shifted by one, so seq_len + 1 tokens.
  int64_t max_tokens = 0;
  bool skip_bad = false;  // skip bad records and count them, rather than refuse the file
  // A record over max_tokens: a bad record (false), or cut into pieces of max_tokens that
  // overlap by one token, the last input of one piece being the first of the next, so that every
  // target is learned once; each piece is a record of its own (data.on_long_record = "split").
  // Pieces whose targets count nothing are left out.
  bool split_long = false;
};

// All the usable records of some files, back to back.
struct ChatRecords {
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> counted;
  std::vector<int64_t> starts{0};  // record i is [starts[i], starts[i + 1])
  int64_t skipped = 0;
  std::string first_skipped;  // "FILE:LINE: why" of the first record skipped
  int64_t split = 0;          // records cut into pieces (ChatRecordOptions::split_long)

  int64_t size() const { return static_cast<int64_t>(starts.size()) - 1; }
  void add(const TokenizedRecord& record);
};

// Reads `files` in order. A bad record is a UserError "FILE:LINE: why ..." unless
// options.skip_bad; a file that cannot be read, or files with no usable record, always are.
ChatRecords read_chat_records(const std::vector<std::string>& files,
                              const ChatRecordOptions& options);

}  // namespace kiln
