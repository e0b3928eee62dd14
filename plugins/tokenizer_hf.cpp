// tokenizer "hf": a Hugging Face tokenizer.json of the byte-level BPE kind (GPT-2, Llama 3,
// Qwen 2, SmolLM), given to `kiln prepare --tokenizer hf --tokenizer-file DIR/tokenizer.json`. It
// reads what encoding needs: the model's vocabulary and merges (each merge spelled "a b" or ["a",
// "b"]), its ignore_merges flag, an NFC normalizer (Qwen 2's), the pre-tokenizer (ByteLevel,
// alone or in a Sequence after Split patterns and Digits), and the added tokens. Added tokens are
// cut out of the text first, leftmost and longest first, as Hugging Face's encode() does by
// default: a "<|endoftext|>" in the text is that one token here, where the gpt2 tokenizer makes
// seven; the text between them is then normalized. Anything it would otherwise get wrong is
// refused with one line: another model type (WordPiece, Unigram), another normalizer (NFKC,
// Lowercase, ...), a pre-tokenizer without byte-level bytes, added tokens that strip spaces. The
// post-processor (a BOS before each sequence) is not applied: `kiln prepare` puts end_of_text()
// before each document instead. The whole tokenizer.json is kept in the prepared data's
// tokenizer.json, so the data decodes wherever it goes.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <utf8proc.h>
#include <nlohmann/json.hpp>

#include "core/api/tokenizer.h"
#include "core/data/byte_level_bpe.h"
#include "core/util/error.h"

namespace kiln {
namespace {

using Json = nlohmann::json;

// The special tokens that mark a document's end, most specific first.
const char* const kEndMarkers[] = {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"};

struct AddedToken {
  std::string content;
  uint32_t id;
  bool special;
};

// Whether the file's normalizer is NFC (Qwen 2's: {"type": "NFC"}); false for none. A Sequence
// is its steps in order, each NFC or itself such a Sequence: NFC twice is NFC once, and an empty
// Sequence (DeepSeek-V3's) is none. Any other step is refused: Kiln applies NFC only.
bool normalizes_nfc(const Json& normalizer) {
  if (normalizer.is_null()) return false;
  const std::string type =
      normalizer.is_object() ? normalizer.value("type", std::string("?")) : normalizer.dump();
  if (type == "NFC") return true;
  if (type == "Sequence" && normalizer.value("normalizers", Json()).is_array()) {
    bool nfc = false;
    for (const Json& step : normalizer.at("normalizers"))
      nfc = normalizes_nfc(step) || nfc;
    return nfc;
  }
  throw UserError(fmt::format(
      "its normalizer is {}, and Kiln applies only NFC (or none), alone or in a Sequence: use a "
      "tokenizer.json whose normalizer is NFC or null",
      type));
}

// `text` in Unicode normalization form C (utf8proc). Text that is not UTF-8 is passed on as it
// is, for the byte-level BPE's own one-line refusal of it.
std::string nfc(std::string_view text) {
  utf8proc_uint8_t* composed = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &composed,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (length < 0) return std::string(text);
  std::string out(reinterpret_cast<const char*>(composed), static_cast<size_t>(length));
  std::free(composed);
  return out;
}

// `text` as a PCRE2 pattern that matches it literally.
std::string literal_pattern(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}-/#").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string read_tokenizer_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw UserError(
        fmt::format("cannot read the Hugging Face tokenizer file '{}': give "
                    "--tokenizer-file the path of a tokenizer.json",
                    path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool unset_or(const Json& value, const Json& allowed) {
  return value.is_null() || value == allowed;
}

// One pre-tokenizer of the pipeline, appended to `spec`; true for the ByteLevel one.
bool add_pre_tokenizer(const Json& step, ByteLevelBpeSpec& spec) {
  const std::string type = step.at("type").get<std::string>();
  if (type == "ByteLevel") {
    if (step.value("add_prefix_space", false)) {
      throw UserError(
          "its ByteLevel pre-tokenizer sets add_prefix_space, which Kiln does not "
          "apply: use a tokenizer.json without it");
    }
    if (step.value("use_regex", true)) spec.split_patterns.push_back(kGpt2SplitPattern);
    return true;
  }
  if (type == "Split") {
    const Json& pattern = step.at("pattern");
    if (step.at("behavior") != "Isolated" || step.value("invert", false)) {
      throw UserError(
          fmt::format("its Split pre-tokenizer has behavior {} and invert {}; Kiln "
                      "applies only \"Isolated\" without invert",
                      step.at("behavior").dump(), step.value("invert", false)));
    }
    spec.split_patterns.push_back(pattern.contains("Regex")
                                      ? pattern.at("Regex").get<std::string>()
                                      : literal_pattern(pattern.at("String").get<std::string>()));
    return false;
  }
  if (type == "Digits") {
    spec.split_patterns.push_back(step.value("individual_digits", false) ? R"(\p{N})"
                                                                         : R"(\p{N}+)");
    return false;
  }
  throw UserError(
      fmt::format("its pre-tokenizer {} is not one Kiln applies (ByteLevel, Split, "
                  "Digits): only byte-level BPE tokenizers can be used",
                  type));
}

ByteLevelBpeSpec spec_of(const Json& file) {
  const Json& model = file.at("model");
  const std::string type = model.value("type", model.contains("merges") ? "BPE" : "");
  if (type != "BPE") {
    throw UserError(
        fmt::format("its model is {}, not byte-level BPE: Kiln reads the tokenizers "
                    "of GPT-2, Llama 3 and SmolLM",
                    type.empty() ? "of no type" : type));
  }
  if (!unset_or(model.value("dropout", Json()), Json()) ||
      !unset_or(model.value("continuing_subword_prefix", Json()), "") ||
      !unset_or(model.value("end_of_word_suffix", Json()), "")) {
    throw UserError(
        "its BPE model sets dropout, continuing_subword_prefix or end_of_word_suffix, "
        "which byte-level BPE does not use");
  }
  normalizes_nfc(file.value("normalizer", Json()));  // another is refused before the vocabulary
  ByteLevelBpeSpec spec;
  const Json& pre = file.value("pre_tokenizer", Json());
  bool byte_level = false;
  if (pre.is_object() && pre.value("type", "") == "Sequence") {
    for (const auto& step : pre.at("pretokenizers"))
      byte_level = add_pre_tokenizer(step, spec) || byte_level;
  } else if (pre.is_object()) {
    byte_level = add_pre_tokenizer(pre, spec);
  }
  if (!byte_level) {
    throw UserError(
        "its pre-tokenizer has no ByteLevel step: only byte-level BPE tokenizers "
        "(GPT-2, Llama 3, SmolLM) can be used");
  }
  for (const auto& [spelled, id] : model.at("vocab").items())
    spec.vocabulary.emplace_back(spelled, id.get<uint32_t>());
  for (const auto& merge : model.at("merges")) {
    if (merge.is_array() && merge.size() == 2) {
      spec.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      continue;
    }
    const std::string line = merge.get<std::string>();
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
      throw UserError(fmt::format("its merge \"{}\" is not two tokens", line));
    spec.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  spec.ignore_merges = model.value("ignore_merges", false);
  return spec;
}

std::vector<AddedToken> added_tokens_of(const Json& file) {
  std::vector<AddedToken> out;
  for (const auto& token : file.value("added_tokens", Json::array())) {
    AddedToken added{token.at("content").get<std::string>(), token.at("id").get<uint32_t>(),
                     token.value("special", false)};
    if (token.value("single_word", false) || token.value("lstrip", false) ||
        token.value("rstrip", false)) {
      throw UserError(
          fmt::format("its added token \"{}\" sets single_word, lstrip or rstrip, "
                      "which Kiln does not apply",
                      added.content));
    }
    if (added.content.empty()) throw UserError("it has an added token with empty content");
    out.push_back(std::move(added));
  }
  // Longest first, so that of two tokens starting at one place the longer wins.
  std::stable_sort(out.begin(), out.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  return out;
}

class HfTokenizer : public Tokenizer {
 public:
  HfTokenizer(Json file, std::string source)
      : file_(std::move(file)),
        source_(std::move(source)),
        bpe_(spec_of(file_)),
        nfc_(normalizes_nfc(file_.value("normalizer", Json()))),
        added_(added_tokens_of(file_)) {
    for (const auto& token : added_) {
      added_content_[token.id] = token.content;
      vocab_size_ = std::max<int64_t>(vocab_size_, int64_t{token.id} + 1);
    }
    for (const char* marker : kEndMarkers) {
      auto it = std::find_if(added_.begin(), added_.end(),
                             [&](const AddedToken& t) { return t.special && t.content == marker; });
      if (it != added_.end() && !end_of_text_) end_of_text_ = it->id;
    }
  }

  std::vector<uint32_t> encode(const std::string& text) const override {
    std::vector<uint32_t> ids;
    // Where each added token next occurs; searched again only once the text before it is done.
    std::vector<size_t> next;
    for (const auto& token : added_)
      next.push_back(text.find(token.content));
    size_t done = 0;
    while (done < text.size()) {
      // The added token that starts first (the longest there: added_ is sorted longest first).
      size_t first = std::string::npos;
      const AddedToken* found = nullptr;
      for (size_t i = 0; i < added_.size(); ++i) {
        if (next[i] < done) next[i] = text.find(added_[i].content, done);
        if (next[i] < first) first = next[i], found = &added_[i];
      }
      const std::string_view piece = std::string_view(text).substr(done, first - done);
      bpe_.encode(nfc_ ? std::string_view(nfc(piece)) : piece, ids);
      if (!found) break;
      ids.push_back(found->id);
      done = first + found->content.size();
    }
    return ids;
  }

  std::string decode(const std::vector<uint32_t>& ids) const override {
    std::string bytes;
    for (uint32_t id : ids) {
      auto added = added_content_.find(id);
      bytes += added != added_content_.end() ? std::string_view(added->second) : bpe_.bytes_of(id);
    }
    return bytes;
  }

  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<uint32_t> end_of_text() const override { return end_of_text_; }
  nlohmann::json save() const override { return {{"tokenizer", file_}, {"source", source_}}; }
  nlohmann::json hugging_face_file() const override { return file_; }

 private:
  Json file_;
  std::string source_;  // the tokenizer.json it came from, for messages
  ByteLevelBpe bpe_;
  bool nfc_;  // the text between added tokens is normalized to NFC first (normalizes_nfc)
  std::vector<AddedToken> added_;
  std::map<uint32_t, std::string> added_content_;
  int64_t vocab_size_ = bpe_.vocab_size();
  std::optional<uint32_t> end_of_text_;
};

// `saved` is {"file": PATH} from `kiln prepare`, or what save() wrote, from a prepared dataset.
std::shared_ptr<Tokenizer> create(const Json& saved) {
  const bool from_file = saved.contains("file");
  const std::string source =
      from_file ? saved.at("file").get<std::string>() : saved.value("source", "tokenizer.json");
  const std::string text = from_file ? read_tokenizer_file(source) : std::string();
  try {
    Json file = from_file ? Json::parse(text) : saved.at("tokenizer");
    if (!file.is_object()) throw UserError("it is not a JSON object");
    return std::make_shared<HfTokenizer>(std::move(file), source);
  } catch (const Json::exception& e) {
    throw UserError(
        fmt::format("'{}' is not a usable Hugging Face tokenizer.json: {}", source, e.what()));
  } catch (const UserError& e) {
    throw UserError(fmt::format("'{}' cannot be used: {}", source, e.what()));
  }
}

const bool registered = TokenizerRegistry::add(
    {"hf",
     "a Hugging Face tokenizer.json of byte-level BPE (GPT-2, Llama 3, SmolLM)",
     {ParamSpec::text("file", "", "the tokenizer.json (kiln prepare --tokenizer-file)")}},
    create);

}  // namespace
}  // namespace kiln
