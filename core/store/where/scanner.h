// The scanner of the --where language (core/store/where/expr.h), which its grammar
// (core/store/where/expr.cpp) and its keys (core/store/where/keys.h) read with: a position in
// the text, words and values, and the one-line errors that name the column where the text went
// wrong.
#pragma once

#include <string>
#include <utility>

#include "core/store/db/connection.h"  // SqlValue

namespace kiln {

bool is_word_start(char c);

class WhereScanner {
 public:
  // A --where filter, or a --sort key: what every error starts with.
  enum class Text { kFilter, kSortKey };
  // `option`: how errors name a sort key's argument ("--sort", "--by").
  WhereScanner(const std::string& text, Text what, std::string option = "--sort")
      : text_(text), what_(what), option_(std::move(option)) {}

  bool sorting() const { return what_ == Text::kSortKey; }
  size_t pos() const { return pos_; }
  void set_pos(size_t pos) { pos_ = pos; }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_space();
  // Where the next token starts (spaces skipped).
  size_t next_token();
  // After spaces: `text` exactly, taken; or false, nothing taken.
  bool accept(const char* text);
  // After spaces: `word` in any case and not the start of a longer word, taken; or false.
  bool accept_word(const char* word);
  // Letters, digits and '_' from pos().
  std::string scan_word();
  // Up to a space, a parenthesis or one of `stops`.
  std::string scan_bare(const char* stops);
  // After spaces: a quoted string, or a bare word read as a number, a boolean or text; a bare
  // word also ends at a ',' inside a list.
  SqlValue parse_value(bool in_list);

  // `--where "EXPR"` or `--sort 'KEY'`, as errors begin.
  std::string context() const;
  // "<context>: expected <expected> at column <pos()+1>, found <the token there>".
  [[noreturn]] void fail(const std::string& expected) const;

 private:
  std::string parse_quoted();
  std::string shown() const;
  std::string found() const;

  const std::string& text_;
  Text what_;
  std::string option_;
  size_t pos_ = 0;
};

}  // namespace kiln
