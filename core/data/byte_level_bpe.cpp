#include "core/data/byte_level_bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <functional>
#include <queue>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/util/error.h"

namespace kiln {

const char* const kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// Ids this far apart would make the id -> bytes table a memory hazard, not a vocabulary.
constexpr uint32_t kMaxId = (1u << 24) - 1;
// No merge pairs with this id, so a queued candidate naming an erased symbol finds no merge.
constexpr uint32_t kErased = UINT32_MAX;

struct CodeFree {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct MatchDataFree {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
using MatchData = std::unique_ptr<pcre2_match_data, MatchDataFree>;

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> message{};
  pcre2_get_error_message(code, message.data(), message.size());
  return reinterpret_cast<const char*>(message.data());
}

// The byte behind each code point of the spelled alphabet (-1 for none).
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

}  // namespace

std::string spelling_of_byte(int byte) {
  static const auto byte_of = byte_of_code_point();
  for (size_t point = 0; point < byte_of.size(); ++point) {
    if (byte_of[point] != byte) continue;
    if (point < 0x80) return std::string(1, static_cast<char>(point));
    return {static_cast<char>(0xc0 | point >> 6), static_cast<char>(0x80 | (point & 0x3f))};
  }
  throw std::logic_error("every byte has a spelling");
}

namespace {

uint64_t pair_key(uint32_t left, uint32_t right) {
  return uint64_t{left} << 32 | right;
}

// A token of a word being merged, in a list linked by index so that merges erase in O(1).
struct Symbol {
  uint32_t id;
  int prev;
  int next;  // -1 at the end
};

}  // namespace

std::optional<std::string> byte_level_bytes(std::string_view spelled) {
  static const auto byte_of = byte_of_code_point();
  std::string bytes;
  // Every code point of the alphabet is below 0x144: one or two UTF-8 bytes each.
  for (size_t i = 0; i < spelled.size(); ++i) {
    unsigned point = static_cast<unsigned char>(spelled[i]);
    if (point >= 0x80) {  // only the lead byte of a two-byte sequence can start an alphabet one
      if (point < 0xc0 || point >= 0xe0 || i + 1 >= spelled.size()) return std::nullopt;
      point = (point & 0x1f) << 6 | (static_cast<unsigned char>(spelled[++i]) & 0x3f);
    }
    if (point >= byte_of.size() || byte_of[point] < 0) return std::nullopt;
    bytes += static_cast<char>(byte_of[point]);
  }
  return bytes;
}

class ByteLevelBpe::Splitter {
 public:
  explicit Splitter(const std::vector<std::string>& patterns) {
    for (const auto& pattern : patterns) {
      int error = 0;
      PCRE2_SIZE offset = 0;
      pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                       PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
      if (!code) {
        throw UserError(
            fmt::format("the word-splitting pattern '{}' is not one PCRE2 accepts "
                        "(at offset {}: {})",
                        pattern, offset, pcre2_message(error)));
      }
      // JIT only makes splitting faster: where PCRE2 has none, the interpreter finds the same.
      pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
      codes_.emplace_back(code);
    }
  }
  size_t stages() const { return codes_.size(); }
  const pcre2_code* code(size_t stage) const { return codes_[stage].get(); }

 private:
  std::vector<std::unique_ptr<pcre2_code, CodeFree>> codes_;
};

ByteLevelBpe::ByteLevelBpe(const ByteLevelBpeSpec& spec)
    : splitter_(std::make_unique<Splitter>(spec.split_patterns)), byte_id_(256, kErased) {
  std::unordered_map<std::string, uint32_t> id_of_spelling;
  uint32_t top = 0;
  for (const auto& [spelled, id] : spec.vocabulary) {
    if (id > kMaxId) {
      throw UserError(fmt::format("token '{}' has id {}, beyond the {} ids a vocabulary may have",
                                  spelled, id, kMaxId + 1));
    }
    top = std::max(top, id);
    id_of_spelling.emplace(spelled, id);
  }
  bytes_of_.resize(spec.vocabulary.empty() ? 0 : top + 1);
  for (const auto& [spelled, id] : spec.vocabulary) {
    auto bytes = byte_level_bytes(spelled);
    if (!bytes) continue;  // a marker such as "<unk>" in another alphabet: no merge makes it
    if (bytes->size() == 1 && byte_id_[static_cast<unsigned char>((*bytes)[0])] == kErased)
      byte_id_[static_cast<unsigned char>((*bytes)[0])] = id;
    if (spec.ignore_merges) word_id_.emplace(*bytes, id);
    bytes_of_[id] = std::move(*bytes);
  }
  for (int b = 0; b < 256; ++b) {
    if (byte_id_[b] == kErased) {
      throw UserError(
          fmt::format("the vocabulary has no token for byte 0x{:02x} (spelled '{}'): "
                      "byte-level BPE needs one for each of the 256 bytes",
                      b, spelling_of_byte(b)));
    }
  }
  uint32_t rank = 0;
  for (const auto& [left, right] : spec.merges) {
    auto id = [&](const std::string& spelled) {
      auto it = id_of_spelling.find(spelled);
      if (it == id_of_spelling.end()) {
        throw UserError(
            fmt::format("merge {} ('{}' '{}') needs the token '{}', which the "
                        "vocabulary lacks",
                        rank + 1, left, right, spelled));
      }
      return it->second;
    };
    merges_[pair_key(id(left), id(right))] = {rank++, id(left + right)};
  }
}

ByteLevelBpe::~ByteLevelBpe() = default;

std::string_view ByteLevelBpe::bytes_of(uint32_t id) const {
  return id < bytes_of_.size() ? std::string_view(bytes_of_[id]) : std::string_view();
}

void ByteLevelBpe::encode(std::string_view text, std::vector<uint32_t>& ids) const {
  if (!text.empty()) split(text, 0, /*check_utf8=*/true, ids);
}

// Cuts `text` with the pattern of `stage` (matches and the text between them), each piece going
// on to the next stage; after the last, each piece is a word. PCRE2 checks the UTF-8 of the
// whole text in the first match only: checking each piece again would be quadratic.
void ByteLevelBpe::split(std::string_view text, size_t stage, bool check_utf8,
                         std::vector<uint32_t>& ids) const {
  if (stage == splitter_->stages()) return append_word(text, ids);
  const pcre2_code* code = splitter_->code(stage);
  // Per call, because match data is the part of PCRE2 matching that threads cannot share.
  MatchData match(pcre2_match_data_create_from_pattern(code, nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  uint32_t options = check_utf8 ? 0 : PCRE2_NO_UTF_CHECK;
  size_t piece = 0;  // where the text not yet handed on begins
  for (size_t start = 0; start < text.size();) {
    const int rc = pcre2_match(code, subject, text.size(), start, options, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21) {
      throw UserError(
          fmt::format("the text is not UTF-8 at byte {} ({}): convert the input to "
                      "UTF-8",
                      pcre2_get_startchar(match.get()), pcre2_message(rc)));
    }
    if (rc < 0) throw std::runtime_error("splitting text into words failed: " + pcre2_message(rc));
    options = PCRE2_NO_UTF_CHECK;
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
    if (span[0] == span[1]) {  // an empty match cuts nothing: look again one character on
      start = span[1] + 1;
      while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xc0) == 0x80)
        ++start;
      continue;
    }
    if (span[0] > piece) split(text.substr(piece, span[0] - piece), stage + 1, false, ids);
    split(text.substr(span[0], span[1] - span[0]), stage + 1, false, ids);
    piece = start = span[1];
  }
  if (piece < text.size()) split(text.substr(piece), stage + 1, false, ids);
}

const ByteLevelBpe::Merge* ByteLevelBpe::find_merge(uint32_t left, uint32_t right) const {
  auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

// Appends one word's tokens. encoder.py merges every occurrence of the lowest-ranked pair, left
// to right, before it looks at any other pair. A merge never makes a new occurrence of its own
// pair, so a queue of (rank, position) drained one whole rank at a time merges exactly the same
// occurrences, without rescanning the word after each merge.
void ByteLevelBpe::append_word(std::string_view word, std::vector<uint32_t>& ids) const {
  if (!word_id_.empty()) {
    auto whole = word_id_.find(std::string(word));
    if (whole != word_id_.end()) return ids.push_back(whole->second);
  }
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
  // Joins symbols[left] with its successor if they still form the pair of `rank`: an earlier
  // merge may have taken either one since the candidate was queued.
  auto merge_at = [&](int left, uint32_t rank) {
    const int right = symbols[left].next;
    if (right < 0) return false;
    const Merge* merge = find_merge(symbols[left].id, symbols[right].id);
    if (!merge || merge->rank != rank) return false;
    symbols[left].id = merge->merged;
    symbols[left].next = symbols[right].next;
    if (symbols[right].next >= 0) symbols[symbols[right].next].prev = left;
    symbols[right].id = kErased;
    return true;
  };
  for (int i = 0; i + 1 < n; ++i)
    consider(i);
  std::vector<int> lefts;
  while (!queue.empty()) {
    const uint32_t rank = queue.top().first;
    for (lefts.clear(); !queue.empty() && queue.top().first == rank; queue.pop())
      lefts.push_back(queue.top().second);
    for (int left : lefts) {
      if (merge_at(left, rank)) {
        consider(symbols[left].prev);
        consider(left);
      }
    }
  }
  for (int i = 0; i >= 0 && i < n; i = symbols[i].next)
    ids.push_back(symbols[i].id);
}

nlohmann::json hugging_face_tokenizer_file(const ByteLevelBpeSpec& spec,
                                           std::optional<SpecialToken> special) {
  if (spec.split_patterns != std::vector<std::string>{kGpt2SplitPattern}) {
    throw std::logic_error("a ByteLevel pre-tokenizer splits by GPT-2's pattern only");
  }
  nlohmann::json vocab = nlohmann::json::object(), merges = nlohmann::json::array();
  for (const auto& [spelled, id] : spec.vocabulary)
    vocab[spelled] = id;
  for (const auto& [left, right] : spec.merges)
    merges.push_back({left, right});
  const nlohmann::json byte_level = {{"type", "ByteLevel"},
                                     {"add_prefix_space", false},
                                     {"trim_offsets", true},
                                     {"use_regex", true}};
  nlohmann::json added = nlohmann::json::array();
  if (special) {
    added.push_back({{"id", special->id},
                     {"content", special->text},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", true},
                     {"special", true}});
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level},
          {"post_processor", nullptr},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", ""},
            {"end_of_word_suffix", ""},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", spec.ignore_merges},
            {"vocab", vocab},
            {"merges", merges}}}};
}

}  // namespace kiln
