// Byte-level BPE, the scheme of GPT-2 and of the Hugging Face tokenizer.json files of Llama 3,
// SmolLM and Qwen: regular expressions cut the text into words, each word starts as one token per
// UTF-8 byte, and the merges apply lowest rank first until none applies. Vocabulary files spell
// each byte as one printable code point (GPT-2's bytes_to_unicode: bytes printable in Latin-1
// keep their value, the other 68 take 256, 257, ... in byte order), so that no token holds a
// space or a control byte. Shared by the gpt2 and hf tokenizer plugins. Everything encode()
// touches is immutable after construction: threads may encode at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kiln {

// GPT-2's word split (OpenAI's encoder.py), also what a Hugging Face ByteLevel pre-tokenizer
// with use_regex applies.
extern const char* const kGpt2SplitPattern;

struct ByteLevelBpeSpec {
  std::vector<std::pair<std::string, uint32_t>> vocabulary;  // spelled token -> id
  // In rank order, each pair spelled. A pair listed twice keeps its last rank, as encoder.py's
  // dict and Hugging Face's merge map do.
  std::vector<std::pair<std::string, std::string>> merges;
  // Applied in turn: each cuts every piece into its matches and the text between them.
  std::vector<std::string> split_patterns;
  // A word that is a token of the vocabulary as a whole is that token, merges untried (Hugging
  // Face's ignore_merges, set by Llama 3's tokenizer.json).
  bool ignore_merges = false;
};

// The raw bytes of a token as vocabulary files spell it; nullopt for a spelling with a code
// point that stands for no byte.
std::optional<std::string> byte_level_bytes(std::string_view spelled);

// How vocabulary files spell `byte` (0 to 255): one code point, as UTF-8.
std::string spelling_of_byte(int byte);

// A token added beside the vocabulary, such as GPT-2's end of text.
struct SpecialToken {
  uint32_t id;
  std::string text;
};

// `spec` as a Hugging Face tokenizer.json (a BPE model under ByteLevel pre-tokenizer and
// decoder) that the tokenizers library encodes text with into the ids ByteLevelBpe gives, with
// `special` as a special added token: what `kiln export` writes beside a model. Its split
// patterns must be GPT-2's alone, the one ByteLevel applies.
nlohmann::json hugging_face_tokenizer_file(const ByteLevelBpeSpec& spec,
                                           std::optional<SpecialToken> special);

class ByteLevelBpe {
 public:
  // A UserError naming what does not fit: a byte without a token, a merge of unknown tokens, a
  // pattern PCRE2 rejects.
  explicit ByteLevelBpe(const ByteLevelBpeSpec& spec);
  ~ByteLevelBpe();
  ByteLevelBpe(const ByteLevelBpe&) = delete;
  ByteLevelBpe& operator=(const ByteLevelBpe&) = delete;

  // Appends the ids of `text`; a UserError when it is not UTF-8.
  void encode(std::string_view text, std::vector<uint32_t>& ids) const;
  // The raw bytes of `id`; empty for an id the vocabulary lacks or spells in no bytes.
  std::string_view bytes_of(uint32_t id) const;
  // The highest id of the vocabulary, plus one.
  int64_t vocab_size() const { return static_cast<int64_t>(bytes_of_.size()); }

 private:
  struct Merge {
    uint32_t rank;
    uint32_t merged;  // the id of the two tokens joined
  };
  class Splitter;  // the compiled patterns (PCRE2 stays out of this header)

  void split(std::string_view text, size_t stage, bool check_utf8,
             std::vector<uint32_t>& ids) const;
  void append_word(std::string_view word, std::vector<uint32_t>& ids) const;
  const Merge* find_merge(uint32_t left, uint32_t right) const;

  std::unique_ptr<Splitter> splitter_;
  std::vector<std::string> bytes_of_;                  // id -> raw bytes
  std::vector<uint32_t> byte_id_;                      // byte -> the id of that one byte
  std::unordered_map<uint64_t, Merge> merges_;         // (left << 32 | right) -> its merge
  std::unordered_map<std::string, uint32_t> word_id_;  // raw bytes -> id, for ignore_merges
};

}  // namespace kiln
