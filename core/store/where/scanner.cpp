#include "core/store/where/scanner.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <regex>

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

namespace {

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

bool is_space(char c) {
  return std::isspace(static_cast<unsigned char>(c));
}

bool is_keyword(std::string word) {
  for (char& c : word)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return word == "and" || word == "or" || word == "not";
}

SqlValue classify_bare_word(const std::string& word) {
  static const std::regex integer("[-+]?[0-9]+");
  static const std::regex real("[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?");
  if (std::regex_match(word, integer)) {
    try {
      return static_cast<int64_t>(std::stoll(word));
    } catch (const std::out_of_range&) {
      // Past int64: compared as a double, like SQLite itself reads such a literal.
    }
  }
  // strtod, not stod: 1e999 is infinity rather than an exception.
  if (std::regex_match(word, real)) return std::strtod(word.c_str(), nullptr);
  if (word == "true") return int64_t{1};  // how the config lookup returns a TOML bool
  if (word == "false") return int64_t{0};
  return word;
}

}  // namespace

bool is_word_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}

void WhereScanner::skip_space() {
  while (!at_end() && is_space(text_[pos_]))
    ++pos_;
}

size_t WhereScanner::next_token() {
  skip_space();
  return pos_;
}

bool WhereScanner::accept(const char* text) {
  skip_space();
  const size_t n = std::strlen(text);
  if (text_.compare(pos_, n, text) != 0) return false;
  pos_ += n;
  return true;
}

bool WhereScanner::accept_word(const char* word) {
  skip_space();
  const size_t n = std::strlen(word);
  if (pos_ + n > text_.size()) return false;
  for (size_t i = 0; i < n; ++i) {
    if (std::tolower(static_cast<unsigned char>(text_[pos_ + i])) != word[i]) return false;
  }
  if (pos_ + n < text_.size() && is_word_char(text_[pos_ + n])) return false;
  pos_ += n;
  return true;
}

std::string WhereScanner::scan_word() {
  const size_t start = pos_;
  while (!at_end() && is_word_char(text_[pos_]))
    ++pos_;
  return text_.substr(start, pos_ - start);
}

std::string WhereScanner::scan_bare(const char* stops) {
  const size_t start = pos_;
  while (!at_end() && !is_space(text_[pos_]) && text_[pos_] != '(' && text_[pos_] != ')' &&
         !std::strchr(stops, text_[pos_])) {
    ++pos_;
  }
  return text_.substr(start, pos_ - start);
}

SqlValue WhereScanner::parse_value(bool in_list) {
  skip_space();
  if (peek() == '\'' || peek() == '"') return parse_quoted();
  const size_t start = pos_;
  const std::string word = scan_bare(in_list ? "," : "");
  // `lr < and ...` lost its value; a value that is a keyword must be quoted.
  if (word.empty() || is_keyword(word)) {
    pos_ = start;
    fail("a value (a number, 'text' or a bare word)");
  }
  return classify_bare_word(word);
}

std::string WhereScanner::parse_quoted() {
  const char quote = text_[pos_];
  const size_t start = pos_++;
  std::string value;
  while (!at_end()) {
    if (text_[pos_] != quote) {
      value += text_[pos_++];
    } else if (pos_ + 1 < text_.size() && text_[pos_ + 1] == quote) {
      value += quote;
      pos_ += 2;
    } else {
      ++pos_;
      return value;
    }
  }
  throw UserError(fmt::format("{}: the string at column {} is not closed: end it with {}",
                              context(), start + 1, quote));
}

std::string WhereScanner::context() const {
  return sorting() ? fmt::format("{} '{}'", option_, text_)
                   : fmt::format("--where \"{}\"", shown());
}

// Callers skip spaces first, so pos_ is where the unexpected token starts.
void WhereScanner::fail(const std::string& expected) const {
  throw UserError(fmt::format("{}: expected {} at column {}, found {}", context(), expected,
                              pos_ + 1, found()));
}

// The expression as errors quote it: its start alone when it is long (a generated filter of a
// thousand comparisons), so that the error stays a line one can read.
std::string WhereScanner::shown() const {
  constexpr size_t kShown = 100;
  if (text_.size() <= kShown + 20) return text_;
  size_t end = kShown;
  while (end > 0 && (static_cast<unsigned char>(text_[end]) & 0xC0) == 0x80)
    --end;  // not inside a UTF-8 character
  return fmt::format("{}... ({} characters)", text_.substr(0, end), text_.size());
}

std::string WhereScanner::found() const {
  if (at_end()) return "the end";
  size_t end = pos_ + 1;
  while (end < text_.size() && !is_space(text_[end]))
    ++end;
  return fmt::format("'{}'", text_.substr(pos_, end - pos_));
}

}  // namespace kiln
