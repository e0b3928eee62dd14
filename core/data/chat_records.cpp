#include "core/data/chat_records.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {
namespace {

using nlohmann::json;

std::string text_field(const json& object, const std::string& key, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end()) throw BadRecord(fmt::format("{} has no \"{}\"", where, key));
  if (!it->is_string()) throw BadRecord(fmt::format("{}'s \"{}\" is not a string", where, key));
  return it->get<std::string>();
}

Role role_named(const std::string& name, size_t index) {
  if (name == "system") return Role::kSystem;
  if (name == "user") return Role::kUser;
  if (name == "assistant") return Role::kAssistant;
  throw BadRecord(
      fmt::format("message {} has role \"{}\": use system, user or assistant", index + 1, name));
}

std::vector<Turn> messages_turns(const json& messages) {
  if (!messages.is_array()) throw BadRecord("\"messages\" is not a list");
  std::vector<Turn> turns;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& message = messages[i];
    const std::string where = fmt::format("message {}", i + 1);
    if (!message.is_object()) throw BadRecord(where + " is not an object");
    const Role role = role_named(text_field(message, "role", where), i);
    turns.push_back({role, text_field(message, "content", where)});
  }
  return turns;
}

std::vector<Turn> prompt_response_turns(const json& record) {
  std::vector<Turn> turns;
  if (auto history = record.find("history"); history != record.end() && !history->is_null()) {
    if (!history->is_array()) throw BadRecord("\"history\" is not a list of [prompt, response]");
    for (const json& pair : *history) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string()) {
        throw BadRecord("\"history\" holds an entry that is not a [prompt, response] pair");
      }
      turns.push_back({Role::kUser, pair[0].get<std::string>()});
      turns.push_back({Role::kAssistant, pair[1].get<std::string>()});
    }
  }
  turns.push_back({Role::kUser, text_field(record, "prompt", "the record")});
  turns.push_back({Role::kAssistant, text_field(record, "response", "the record")});
  return turns;
}

// The tokenizer's own objection (a byte it has no id for) becomes this record's.
std::vector<uint32_t> encode(const Tokenizer& tokenizer, const std::string& text) {
  if (text.empty()) return {};
  try {
    return tokenizer.encode(text);
  } catch (const UserError& e) {
    throw BadRecord(e.what());
  }
}

void append(TokenizedRecord& record, const std::vector<uint32_t>& ids, bool counted) {
  record.tokens.insert(record.tokens.end(), ids.begin(), ids.end());
  record.counted.insert(record.counted.end(), ids.size(), counted ? 1 : 0);
}

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

// The checks that need the record's tokens: something to learn, and room for it in a row.
// Targets the loss counts in tokens [begin, end) of `record`: its token `begin` is never one
// (nothing before it predicts it).
int64_t counted_targets(const TokenizedRecord& record, size_t begin, size_t end) {
  int64_t counted = 0;
  for (size_t i = begin + 1; i < end; ++i)
    counted += record.counted[i];
  return counted;
}

void check_tokens(const TokenizedRecord& record, int64_t max_tokens, bool split_long) {
  const int64_t n = static_cast<int64_t>(record.tokens.size());
  if (n > max_tokens && !split_long) {
    throw BadRecord(fmt::format(
        "{} tokens once templated, over the context: a row holds train.seq_len + 1 = {} (or set "
        "data.on_long_record = \"split\")",
        n, max_tokens));
  }
  if (counted_targets(record, 0, record.tokens.size()) == 0)
    throw BadRecord("its responses are empty: no token for the loss to count");
}

// Adds `record` whole, or as the pieces ChatRecordOptions::split_long describes.
void add_record(ChatRecords& records, const TokenizedRecord& record, int64_t max_tokens) {
  const size_t n = record.tokens.size(), piece = static_cast<size_t>(max_tokens);
  if (n <= piece) {
    records.add(record);
    return;
  }
  ++records.split;
  for (size_t begin = 0; begin + 1 < n; begin += piece - 1) {
    const size_t end = std::min(n, begin + piece);
    if (counted_targets(record, begin, end) == 0) continue;
    records.add({{record.tokens.begin() + begin, record.tokens.begin() + end},
                 {record.counted.begin() + begin, record.counted.begin() + end}});
  }
}

}  // namespace

ChatTemplate chat_template(const std::string& name) {
  if (name == "plain") {
    return {"System: ", "\n", "User: ", "\n", "Assistant: ", "\n\n"};
  }
  if (name == "chatml") {
    return {"<|im_start|>system\n",    "<|im_end|>\n", "<|im_start|>user\n", "<|im_end|>\n",
            "<|im_start|>assistant\n", "<|im_end|>\n"};
  }
  throw UserError(fmt::format("no chat template named '{}': use plain or chatml", name));
}

const std::vector<std::string>& chat_template_names() {
  static const std::vector<std::string> names{"plain", "chatml"};
  return names;
}

std::vector<Turn> parse_chat_record(const std::string& line) {
  json record;
  try {
    record = json::parse(line);
  } catch (const json::parse_error& e) {
    throw BadRecord(json_line_problem(line, e.byte));
  } catch (const json::exception& e) {  // a number out of double's range: 1e999 anywhere
    throw BadRecord("not readable JSON: " + json_reason(e.what()));
  }
  if (!record.is_object()) throw BadRecord("not a JSON object");
  std::vector<Turn> turns;
  try {
    turns = record.contains("messages") ? messages_turns(record["messages"])
                                        : prompt_response_turns(record);
  } catch (const json::exception& e) {
    throw BadRecord("a field of an unexpected type: " + json_reason(e.what()));
  }
  bool answered = false;
  for (const Turn& turn : turns)
    answered = answered || turn.role == Role::kAssistant;
  if (!answered) throw BadRecord("no assistant message: nothing for the loss to count");
  return turns;
}

TokenizedRecord tokenize_record(const std::vector<Turn>& turns, const ChatTemplate& chat,
                                const Tokenizer& tokenizer) {
  TokenizedRecord record;
  for (const Turn& turn : turns) {
    const bool response = turn.role == Role::kAssistant;
    const std::string& prefix = response                   ? chat.assistant_prefix
                                : turn.role == Role::kUser ? chat.user_prefix
                                                           : chat.system_prefix;
    const std::string& suffix = response                   ? chat.assistant_suffix
                                : turn.role == Role::kUser ? chat.user_suffix
                                                           : chat.system_suffix;
    append(record, encode(tokenizer, prefix), false);
    append(record, encode(tokenizer, turn.text), response);
    append(record, encode(tokenizer, suffix), response);
  }
  return record;
}

void ChatRecords::add(const TokenizedRecord& record) {
  tokens.insert(tokens.end(), record.tokens.begin(), record.tokens.end());
  counted.insert(counted.end(), record.counted.begin(), record.counted.end());
  starts.push_back(static_cast<int64_t>(tokens.size()));
}

void check_template_encodes(const ChatTemplate& chat, const Tokenizer& tokenizer) {
  for (const std::string* piece :
       {&chat.system_prefix, &chat.system_suffix, &chat.user_prefix, &chat.user_suffix,
        &chat.assistant_prefix, &chat.assistant_suffix}) {
    if (piece->empty()) continue;
    try {
      tokenizer.encode(*piece);
    } catch (const UserError& e) {
      throw UserError(fmt::format(
          "the chat template's text \"{}\" does not encode: {}: choose data.template that this "
          "tokenizer covers, or prepare the data with a tokenizer that has those bytes",
          *piece, e.what()));
    }
  }
}

ChatRecords read_chat_records(const std::vector<std::string>& files,
                              const ChatRecordOptions& options) {
  check_template_encodes(options.chat, *options.tokenizer);
  ChatRecords records;
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw UserError(fmt::format("cannot read the records file '{}'", file));
    std::string line;
    for (int64_t number = 1; std::getline(in, line); ++number) {
      if (blank(line)) continue;
      try {
        TokenizedRecord record =
            tokenize_record(parse_chat_record(line), options.chat, *options.tokenizer);
        check_tokens(record, options.max_tokens, options.split_long);
        add_record(records, record, options.max_tokens);
      } catch (const BadRecord& e) {
        const std::string where = fmt::format("{}:{}: {}", file, number, e.what());
        if (!options.skip_bad) {
          throw UserError(where + " (fix the record, or set data.on_bad_record = \"skip\")");
        }
        if (records.skipped++ == 0) records.first_skipped = where;
      }
    }
  }
  if (records.size() == 0) {
    throw UserError(fmt::format(
        "no usable record in {}{}", join(files, ", "),
        records.skipped
            ? fmt::format(" ({} skipped; the first: {})", records.skipped, records.first_skipped)
            : std::string()));
  }
  return records;
}

}  // namespace kiln
