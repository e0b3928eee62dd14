// tokenizer "gpt2": GPT-2's byte-level BPE (core/data/byte_level_bpe.h), id for id what OpenAI's
// encoder.py produces. tools/setup.sh fetches the two vocabulary files and they are pinned by
// SHA-256, so a saved tokenizer records only where they are. Special tokens are not parsed out of
// text ("<|endoftext|>" in the text is seven ordinary tokens, as in encoder.py); a caller
// separating documents uses end_of_text().
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/api/tokenizer.h"
#include "core/data/byte_level_bpe.h"
#include "core/util/error.h"
#include "core/util/sha256.h"

namespace kiln {
namespace {

constexpr uint32_t kEndOfText = 50256;
constexpr int64_t kVocabSize = 50257;
constexpr const char* kDirVariable = "KILN_GPT2_VOCAB_DIR";
constexpr const char* kDefaultDir = "data/gpt2";
constexpr const char* kEncoderSha256 =
    "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783";
constexpr const char* kMergesSha256 =
    "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5";

// A vocabulary file's contents, once it is known to be the exact file GPT-2 was trained with.
std::string read_pinned(const std::string& path, const std::string& expected_sha256) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw UserError(fmt::format(
        "GPT-2 vocabulary file '{}' is missing: run tools/setup.sh to fetch encoder.json and "
        "vocab.bpe into {}/ (or set {} to a directory that holds them)",
        path, kDefaultDir, kDirVariable));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string contents = buffer.str();
  const std::string actual = sha256_hex(contents);
  if (actual != expected_sha256) {
    throw UserError(fmt::format(
        "'{}' is not GPT-2's file (SHA-256 {}, expected {}): delete it and run tools/setup.sh "
        "to fetch it again",
        path, actual, expected_sha256));
  }
  return contents;
}

// $KILN_GPT2_VOCAB_DIR wins, so that data prepared elsewhere loads wherever the files now are
// (their hashes make any copy as good as another); then where the saved tokenizer found them;
// then data/gpt2, where tools/setup.sh puts them.
std::string vocab_dir(const nlohmann::json& saved) {
  const char* from_env = std::getenv(kDirVariable);
  if (from_env && *from_env) return from_env;
  return saved.value("vocab_dir", std::string(kDefaultDir));
}

// encoder.json and vocab.bpe as ByteLevelBpe takes them. A merge's rank is its line number after
// the "#version" header.
ByteLevelBpeSpec spec_of(const std::string& dir) {
  ByteLevelBpeSpec spec;
  const auto encoder = nlohmann::json::parse(read_pinned(dir + "/encoder.json", kEncoderSha256));
  for (const auto& [spelled, id] : encoder.items())
    spec.vocabulary.emplace_back(spelled, id.get<uint32_t>());
  std::istringstream lines(read_pinned(dir + "/vocab.bpe", kMergesSha256));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line) && !line.empty()) {
    const size_t space = line.find(' ');
    spec.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  spec.split_patterns = {kGpt2SplitPattern};
  return spec;
}

class Gpt2Tokenizer : public Tokenizer {
 public:
  explicit Gpt2Tokenizer(std::string dir) : dir_(std::move(dir)), bpe_(spec_of(dir_)) {}

  std::vector<uint32_t> encode(const std::string& text) const override {
    std::vector<uint32_t> ids;
    bpe_.encode(text, ids);
    return ids;
  }

  // Models pad the vocabulary (50257 to 50304) for speed; a sampled pad id decodes to nothing.
  std::string decode(const std::vector<uint32_t>& ids) const override {
    std::string bytes;
    for (uint32_t id : ids)
      bytes += bpe_.bytes_of(id);
    return bytes;
  }

  int64_t vocab_size() const override { return kVocabSize; }
  std::optional<uint32_t> end_of_text() const override { return kEndOfText; }
  nlohmann::json save() const override { return {{"vocab_dir", dir_}}; }
  // As GPT-2's published tokenizer.json, whose tokenizers encode gives these ids (but for the
  // text "<|endoftext|>", its special token there).
  nlohmann::json hugging_face_file() const override {
    return hugging_face_tokenizer_file(spec_of(dir_), SpecialToken{kEndOfText, "<|endoftext|>"});
  }

 private:
  std::string dir_;
  ByteLevelBpe bpe_;
};

const bool registered = TokenizerRegistry::add(
    {"gpt2", "GPT-2's byte-level BPE, 50257 ids (vocabulary files fetched by tools/setup.sh)", {}},
    [](const nlohmann::json& saved) { return std::make_shared<Gpt2Tokenizer>(vocab_dir(saved)); });

}  // namespace
}  // namespace kiln
