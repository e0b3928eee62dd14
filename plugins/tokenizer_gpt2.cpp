// tokenizer "gpt2": GPT-2's byte-level BPE, id for id what OpenAI's encoder.py produces. GPT-2's
// regex splits the text into words; each word starts as one token per UTF-8 byte and the merges
// of vocab.bpe are applied lowest rank first until none applies. tools/setup.sh fetches the two
// vocabulary files and they are pinned by SHA-256, so a saved tokenizer records only where they
// are. Everything encode() touches is immutable after construction: callers may encode in
// parallel threads. Special tokens are not parsed out of text ("<|endoftext|>" in the text is
// seven ordinary tokens, as in encoder.py); a caller separating documents uses end_of_text().
#define PCRE2_CODE_UNIT_WIDTH 8

#include <pcre2.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <queue>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/api/tokenizer.h"
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
constexpr const char* kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct CodeFree {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct MatchDataFree {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
using Pattern = std::unique_ptr<pcre2_code, CodeFree>;
using MatchData = std::unique_ptr<pcre2_match_data, MatchDataFree>;

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> message{};
  pcre2_get_error_message(code, message.data(), message.size());
  return reinterpret_cast<const char*>(message.data());
}

Pattern compile_pattern() {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!code) {
    throw std::runtime_error(fmt::format("PCRE2 rejected GPT-2's pattern at offset {}: {}", offset,
                                         pcre2_message(error)));
  }
  // JIT only makes splitting faster: where PCRE2 has none, the interpreter finds the same words.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return Pattern(code);
}

[[noreturn]] void throw_match_error(int rc, pcre2_match_data* match) {
  if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21) {
    throw UserError(fmt::format(
        "the gpt2 tokenizer was given text that is not UTF-8 at byte {} ({}): convert the "
        "input to UTF-8",
        pcre2_get_startchar(match), pcre2_message(rc)));
  }
  throw std::runtime_error("splitting text into GPT-2 words failed: " + pcre2_message(rc));
}

// GPT-2's files spell each byte as one printable code point, so that no token holds a space or
// a control byte: bytes printable in Latin-1 keep their value, the other 68 take 256, 257, ...
// in byte order. This is the byte behind each such code point (-1 for none).
std::array<int, 256 + 68> byte_of_code_point() {
  std::array<int, 256 + 68> byte_of;
  byte_of.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    byte_of[printable ? b : next++] = b;
  }
  return byte_of;
}

// The raw bytes behind a token as the files spell it. Every code point in the spelling is below
// 0x144, so one or two UTF-8 bytes each.
std::string raw_bytes(const std::string& spelled) {
  static const auto byte_of = byte_of_code_point();
  std::string bytes;
  for (size_t i = 0; i < spelled.size(); ++i) {
    unsigned point = static_cast<unsigned char>(spelled[i]);
    if (point >= 0xc0 && i + 1 < spelled.size())
      point = (point & 0x1f) << 6 | (static_cast<unsigned char>(spelled[++i]) & 0x3f);
    if (point >= byte_of.size() || byte_of[point] < 0)
      throw std::runtime_error("'" + spelled + "' is not a GPT-2 token spelling");
    bytes += static_cast<char>(byte_of[point]);
  }
  return bytes;
}

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

uint64_t pair_key(uint32_t left, uint32_t right) {
  return uint64_t{left} << 32 | right;
}

struct Merge {
  uint32_t rank;
  uint32_t merged;  // the id of the two tokens joined
};

// A token of a word being merged, in a list linked by index so that merges erase in O(1).
struct Symbol {
  uint32_t id;
  int prev;
  int next;  // -1 at the end
};

class Gpt2Tokenizer : public Tokenizer {
 public:
  explicit Gpt2Tokenizer(std::string dir) : dir_(std::move(dir)), pattern_(compile_pattern()) {
    const auto id_of = load_encoder(read_pinned(dir_ + "/encoder.json", kEncoderSha256));
    load_merges(read_pinned(dir_ + "/vocab.bpe", kMergesSha256), id_of);
  }

  std::vector<uint32_t> encode(const std::string& text) const override {
    std::vector<uint32_t> ids;
    // Per call, because match data is the part of PCRE2 matching that threads cannot share.
    MatchData match(pcre2_match_data_create_from_pattern(pattern_.get(), nullptr));
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    uint32_t options = 0;
    for (PCRE2_SIZE start = 0; start < text.size();) {
      const int rc =
          pcre2_match(pattern_.get(), subject, text.size(), start, options, match.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) throw_match_error(rc, match.get());
      // The first call checked that the whole text is UTF-8; checking per word is quadratic.
      options = PCRE2_NO_UTF_CHECK;
      const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
      append_word(std::string_view(text).substr(span[0], span[1] - span[0]), ids);
      start = span[1];
    }
    return ids;
  }

  std::string decode(const std::vector<uint32_t>& ids) const override {
    std::string bytes;
    for (uint32_t id : ids) {
      // Models pad the vocabulary (50257 to 50304) for speed; a sampled pad id is no token.
      if (id < bytes_of_.size()) bytes += bytes_of_[id];
    }
    return bytes;
  }

  int64_t vocab_size() const override { return kVocabSize; }
  std::optional<uint32_t> end_of_text() const override { return kEndOfText; }
  nlohmann::json save() const override { return {{"vocab_dir", dir_}}; }

 private:
  // Fills bytes_of_ and byte_id_; returns the id of every token's raw bytes.
  std::unordered_map<std::string, uint32_t> load_encoder(const std::string& json_text) {
    std::unordered_map<std::string, uint32_t> id_of;
    const auto encoder = nlohmann::json::parse(json_text);
    bytes_of_.resize(encoder.size());
    for (const auto& [spelled, value] : encoder.items()) {
      const auto id = value.get<uint32_t>();
      std::string bytes = raw_bytes(spelled);
      if (bytes.size() == 1) byte_id_[static_cast<unsigned char>(bytes[0])] = id;
      bytes_of_.at(id) = bytes;
      id_of.emplace(std::move(bytes), id);
    }
    return id_of;
  }

  // A merge's rank is its line number after the "#version" header; a pair listed twice keeps
  // its last rank, as encoder.py's dict does.
  void load_merges(const std::string& text,
                   const std::unordered_map<std::string, uint32_t>& id_of) {
    std::istringstream lines(text);
    std::string line;
    std::getline(lines, line);
    for (uint32_t rank = 0; std::getline(lines, line) && !line.empty(); ++rank) {
      const size_t space = line.find(' ');
      const std::string left = raw_bytes(line.substr(0, space));
      const std::string right = raw_bytes(line.substr(space + 1));
      merges_[pair_key(id_of.at(left), id_of.at(right))] = {rank, id_of.at(left + right)};
    }
  }

  const Merge* find_merge(uint32_t left, uint32_t right) const {
    auto it = merges_.find(pair_key(left, right));
    return it == merges_.end() ? nullptr : &it->second;
  }

  // Appends one word's tokens. encoder.py merges every occurrence of the lowest-ranked pair, left
  // to right, before it looks at any other pair. A merge never makes a new occurrence of its own
  // pair, so a queue of (rank, position) drained one whole rank at a time merges exactly the same
  // occurrences, without rescanning the word after each merge.
  void append_word(std::string_view word, std::vector<uint32_t>& ids) const {
    const int n = static_cast<int>(word.size());
    std::vector<Symbol> symbols(n);
    for (int i = 0; i < n; ++i)
      symbols[i] = {byte_id_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
    using Candidate = std::pair<uint32_t, int>;  // rank, index of the pair's left symbol
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    auto consider = [&](int left) {
      if (left < 0 || symbols[left].next < 0) return;
      if (const Merge* merge = find_merge(symbols[left].id, symbols[symbols[left].next].id))
        queue.push({merge->rank, left});
    };
    for (int i = 0; i + 1 < n; ++i)
      consider(i);
    std::vector<int> lefts;
    while (!queue.empty()) {
      const uint32_t rank = queue.top().first;
      for (lefts.clear(); !queue.empty() && queue.top().first == rank; queue.pop())
        lefts.push_back(queue.top().second);
      for (int left : lefts) {
        if (merge_at(symbols, left, rank)) {
          consider(symbols[left].prev);
          consider(left);
        }
      }
    }
    for (int i = 0; i >= 0; i = symbols[i].next)
      ids.push_back(symbols[i].id);
  }

  // Joins symbols[left] with its successor if they still form the pair of `rank`: an earlier
  // merge may have taken either one since the candidate was queued.
  bool merge_at(std::vector<Symbol>& symbols, int left, uint32_t rank) const {
    const int right = symbols[left].next;
    if (right < 0) return false;
    const Merge* merge = find_merge(symbols[left].id, symbols[right].id);
    if (!merge || merge->rank != rank) return false;
    symbols[left].id = merge->merged;
    symbols[left].next = symbols[right].next;
    if (symbols[right].next >= 0) symbols[symbols[right].next].prev = left;
    symbols[right].id = kErased;
    return true;
  }

  // No merge pairs with this id, so candidates naming an erased symbol fail merge_at's check.
  static constexpr uint32_t kErased = UINT32_MAX;

  std::string dir_;
  Pattern pattern_;
  std::vector<std::string> bytes_of_;           // id -> raw bytes
  std::array<uint32_t, 256> byte_id_{};         // byte -> the id of that one byte
  std::unordered_map<uint64_t, Merge> merges_;  // pair_key(left, right) -> its merge
};

const bool registered = TokenizerRegistry::add(
    {"gpt2", "GPT-2's byte-level BPE, 50257 ids (vocabulary files fetched by tools/setup.sh)", {}},
    [](const nlohmann::json& saved) { return std::make_shared<Gpt2Tokenizer>(vocab_dir(saved)); });

}  // namespace
}  // namespace kiln
