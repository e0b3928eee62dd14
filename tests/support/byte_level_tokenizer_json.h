// Hugging Face tokenizer.json files written for a test: a byte-level BPE whose 256 bytes are
// spelled as GPT-2 spells them (printable bytes as themselves, the others shifted past U+0100),
// which `tokenizers` and Kiln's hf tokenizer both read.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace kiln::testing {

// Byte b as GPT-2's byte-level BPE spells it, in UTF-8.
inline std::string gpt2_byte_spelling(int b) {
  const auto printable = [](int c) {
    return (c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || c >= 0xae;
  };
  int point = b;
  if (!printable(b)) {
    point = 256;
    for (int c = 0; c < b; ++c)
      point += printable(c) ? 0 : 1;
  }
  return point < 0x80 ? std::string(1, static_cast<char>(point))
                      : std::string{static_cast<char>(0xc0 | point >> 6),
                                    static_cast<char>(0x80 | (point & 0x3f))};
}

// A byte-level BPE tokenizer.json: byte b is id first_id + b, then `merges` ("t h") with the ids
// `merged` gives their results ({"th", 100000}).
inline void write_byte_tokenizer_json(const std::string& path, int first_id = 0,
                                      const std::vector<std::string>& merges = {},
                                      const std::vector<std::pair<std::string, int>>& merged = {}) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b)
    vocab[gpt2_byte_spelling(b)] = first_id + b;
  for (const auto& [token, id] : merged)
    vocab[token] = id;
  write_text(path,
             nlohmann::json{
                 {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json(merges)}}},
                 {"pre_tokenizer", {{"type", "ByteLevel"}}}}
                 .dump());
}

}  // namespace kiln::testing
