// tokenizer "char": one token per distinct byte of the corpus, ids in byte order (as nanoGPT's
// shakespeare_char). Text with a byte the corpus never had cannot be encoded.
#include <array>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/api/tokenizer.h"
#include "core/data/byte_level_bpe.h"
#include "core/util/error.h"

namespace kiln {
namespace {

class CharTokenizer : public Tokenizer {
 public:
  explicit CharTokenizer(const nlohmann::json& saved) {
    id_of_.fill(-1);
    if (saved.contains("bytes")) set_alphabet(saved["bytes"].get<std::vector<int>>());
  }

  bool learns_from_corpus() const override { return true; }

  void fit(const std::string& piece) override {
    for (unsigned char c : piece)
      seen_[c] = true;
    std::vector<int> alphabet;
    for (int b = 0; b < 256; ++b) {
      if (seen_[b]) alphabet.push_back(b);
    }
    set_alphabet(alphabet);
  }

  std::vector<uint32_t> encode(const std::string& text) const override {
    std::vector<uint32_t> ids;
    ids.reserve(text.size());
    for (unsigned char c : text) {
      if (id_of_[c] < 0) {
        throw UserError(fmt::format(
            "the char tokenizer has no id for byte 0x{:02x}{}: it only knows the "
            "bytes of the corpus it was prepared from",
            c,
            c >= 0x20 && c < 0x7f ? fmt::format(" ('{}')", static_cast<char>(c)) : std::string()));
      }
      ids.push_back(static_cast<uint32_t>(id_of_[c]));
    }
    return ids;
  }

  std::string decode(const std::vector<uint32_t>& ids) const override {
    std::string text;
    for (uint32_t id : ids) {
      if (id < bytes_.size()) text += static_cast<char>(bytes_[id]);
    }
    return text;
  }

  int64_t vocab_size() const override { return static_cast<int64_t>(bytes_.size()); }
  nlohmann::json save() const override { return {{"bytes", bytes_}}; }
  // A byte-level BPE without merges: one token per byte of the table. tokenizers drops a byte
  // outside it, where encode() refuses it.
  nlohmann::json hugging_face_file() const override {
    ByteLevelBpeSpec spec;
    for (size_t id = 0; id < bytes_.size(); ++id)
      spec.vocabulary.emplace_back(spelling_of_byte(bytes_[id]), static_cast<uint32_t>(id));
    spec.split_patterns = {kGpt2SplitPattern};
    return hugging_face_tokenizer_file(spec, std::nullopt);
  }

 private:
  void set_alphabet(const std::vector<int>& bytes) {
    bytes_ = bytes;
    id_of_.fill(-1);
    for (size_t i = 0; i < bytes_.size(); ++i)
      id_of_[bytes_[i] & 0xff] = static_cast<int>(i);
  }

  std::vector<int> bytes_;
  std::array<int, 256> id_of_{};
  std::array<bool, 256> seen_{};  // the bytes fit() has met
};

const bool registered = TokenizerRegistry::add(
    {"char", "one token per distinct byte of the corpus (character-level models)", {}},
    [](const nlohmann::json& saved) { return std::make_shared<CharTokenizer>(saved); });

}  // namespace
}  // namespace kiln
