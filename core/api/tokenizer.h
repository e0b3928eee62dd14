// Tokenizers turn text into token ids for `kiln prepare` and back into text for sampling.
// A prepared dataset directory holds tokenizer.json ({"type": NAME, ...state}) next to its
// shards, so whatever reads the data later uses the same tokenizer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/config/registry.h"

namespace kiln {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Whether it learns its vocabulary from the corpus (a character set, say); `kiln prepare`
  // then reads every input once more, through fit(), before encoding any.
  virtual bool learns_from_corpus() const { return false; }
  // Learns from a piece of the corpus; the vocabulary is what every piece so far needs. Called
  // by `kiln prepare` with the input documents in pieces, in order, on a tokenizer created with
  // empty `saved`, before any other call.
  virtual void fit(const std::string& piece) { (void)piece; }
  // `kiln prepare` encodes chunks of each document (cut at line ends) from several threads at
  // once, so encode must be safe to call concurrently; `kiln sample` encodes the prompt.
  virtual std::vector<uint32_t> encode(const std::string& text) const = 0;
  // Ids the model generated back to text, for `kiln sample`. The model's vocabulary may be
  // larger than this one: ids at or above vocab_size() must not fail (skip them).
  virtual std::string decode(const std::vector<uint32_t>& ids) const = 0;
  // Ids it can produce (all below this); asked by `kiln prepare` after fit, to check that the
  // shards can hold them and to record it in tokenizer.json.
  virtual int64_t vocab_size() const = 0;
  // The id that separates documents (GPT-2's <|endoftext|>), for tokenizers trained with one;
  // a caller joining documents puts it between them rather than encoding any marker text.
  virtual std::optional<uint32_t> end_of_text() const { return std::nullopt; }
  // The state that `create(saved)` turns back into an identical tokenizer; written to
  // tokenizer.json by `kiln prepare` after fit (Kiln's own form, not Hugging Face's).
  virtual nlohmann::json save() const = 0;
  // The tokenizer as a Hugging Face tokenizer.json, which the tokenizers library and
  // transformers' AutoTokenizer open and encode text with into this tokenizer's ids; null for one
  // without such a form. Asked by `kiln export`, which writes it beside the model.
  virtual nlohmann::json hugging_face_file() const = 0;
};

struct TokenizerKind {
  static constexpr const char* name = "tokenizer";
  using Product = Tokenizer;
  // `saved` is the object from tokenizer.json, or for a tokenizer about to be fitted empty, or
  // {"file": PATH} for one that reads a vocabulary file (new_tokenizer).
  using Factory = std::function<std::shared_ptr<Tokenizer>(const nlohmann::json& saved)>;
};
using TokenizerRegistry = Registry<TokenizerKind>;

// A tokenizer about to be fitted. `file` is the vocabulary file of a tokenizer that reads one
// (its plugin declares a "file" parameter: hf's tokenizer.json); a UserError when it is given to
// a tokenizer that takes none, or missing for one that needs it.
std::shared_ptr<Tokenizer> new_tokenizer(const std::string& name, const std::string& file = "");
std::shared_ptr<Tokenizer> load_tokenizer(const std::string& dataset_dir);
void save_tokenizer(const Tokenizer& tokenizer, const std::string& name,
                    const std::string& dataset_dir);

}  // namespace kiln
