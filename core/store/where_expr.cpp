#include "core/store/where_expr.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <regex>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

bool is_word_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}

std::vector<std::string> column_names(const KeySpace& keys) {
  std::vector<std::string> names;
  for (const auto& entry : keys.columns)
    names.push_back(entry.first);
  return names;
}

// "did you mean 'name'? keys are ..." for a key that is neither a column nor `section.key`.
std::string unknown_key_hint(const std::string& key, const KeySpace& keys) {
  const std::string guess = nearest(key, column_names(keys));
  return fmt::format("{}keys are {} or a config key such as optimizer.lr",
                     guess.empty() ? "" : fmt::format("did you mean '{}'? ", guess),
                     join(column_names(keys), ", "));
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

class Parser {
 public:
  Parser(const std::string& text, const KeySpace& keys) : text_(text), keys_(keys) {}

  std::unique_ptr<WhereNode> parse() {
    auto node = parse_or();
    skip_space();
    if (pos_ < text_.size()) fail("'and', 'or' or the end of the expression");
    return node;
  }

 private:
  using Node = std::unique_ptr<WhereNode>;
  using Kind = WhereNode::Kind;

  Node parse_or() {
    Node node = parse_and();
    for (size_t at = next_token(); accept_word("or"); at = next_token())
      node = combine(Kind::kOr, std::move(node), parse_and(), at);
    return node;
  }

  Node parse_and() {
    Node node = parse_unary();
    for (size_t at = next_token(); accept_word("and"); at = next_token())
      node = combine(Kind::kAnd, std::move(node), parse_unary(), at);
    return node;
  }

  Node parse_unary() {
    const size_t at = next_token();
    if (accept_word("not")) {
      enter_level(at);
      auto node = std::make_unique<WhereNode>();
      node->kind = Kind::kNot;
      adopt(*node, parse_unary(), at);
      --levels_;
      return node;
    }
    if (pos_ < text_.size() && text_[pos_] == '(') {
      enter_level(at);
      ++pos_;
      Node inner = parse_or();
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != ')') fail("')' to close the '('");
      ++pos_;
      --levels_;
      return inner;
    }
    return parse_comparison();
  }

  Node parse_comparison() {
    auto node = std::make_unique<WhereNode>();
    node->column = next_token() + 1;
    if (++comparisons_ > kWhereMaxComparisons) {
      throw UserError(fmt::format(
          "--where \"{}\": more than {} comparisons (the one at column {} is one too many): "
          "match many names with one glob instead, e.g. name ~ 'sweep1/*'",
          shown(), kWhereMaxComparisons, node->column));
    }
    node->key = parse_key();
    node->is_config = is_config_key(node->key);
    if (!node->is_config && !keys_.columns.count(node->key)) {
      throw UserError(fmt::format("--where \"{}\": unknown key '{}' at column {}: {}", shown(),
                                  node->key, node->column, unknown_key_hint(node->key, keys_)));
    }
    node->op = parse_op();
    node->value = parse_value();
    return node;
  }

  std::string parse_key() {
    const size_t start = pos_;
    if (pos_ >= text_.size() || !is_word_start(text_[pos_])) {
      fail("a key (a column such as best_loss, or a config key such as optimizer.lr)");
    }
    scan_word();
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (pos_ >= text_.size() || !is_word_start(text_[pos_])) fail("a key name after the '.'");
      scan_word();
    }
    return text_.substr(start, pos_ - start);
  }

  std::string parse_op() {
    skip_space();
    for (const char* op : {"<=", ">=", "!=", "==", "=", "<", ">", "~"}) {
      if (text_.compare(pos_, std::char_traits<char>::length(op), op) == 0) {
        pos_ += std::char_traits<char>::length(op);
        return std::string(op) == "==" ? "=" : op;
      }
    }
    fail("an operator (=, !=, <, <=, >, >= or ~ for a glob)");
  }

  SqlValue parse_value() {
    skip_space();
    if (pos_ < text_.size() && (text_[pos_] == '\'' || text_[pos_] == '"')) return parse_quoted();
    const size_t start = pos_;
    while (pos_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[pos_])) &&
           text_[pos_] != '(' && text_[pos_] != ')') {
      ++pos_;
    }
    const std::string word = text_.substr(start, pos_ - start);
    // `lr < and ...` lost its value; a value that is a keyword must be quoted.
    if (word.empty() || is_keyword(word)) {
      pos_ = start;
      fail("a value (a number, 'text' or a bare word)");
    }
    return classify_bare_word(word);
  }

  std::string parse_quoted() {
    const char quote = text_[pos_];
    const size_t start = pos_++;
    std::string value;
    while (pos_ < text_.size()) {
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
    throw UserError(
        fmt::format("--where \"{}\": the string at column {} is not closed: end it with {}",
                    shown(), start + 1, quote));
  }

  bool accept_word(const char* word) {
    skip_space();
    const size_t n = std::char_traits<char>::length(word);
    if (pos_ + n > text_.size()) return false;
    for (size_t i = 0; i < n; ++i) {
      if (std::tolower(static_cast<unsigned char>(text_[pos_ + i])) != word[i]) return false;
    }
    if (pos_ + n < text_.size() && is_word_char(text_[pos_ + n])) return false;
    pos_ += n;
    return true;
  }

  void scan_word() {
    while (pos_ < text_.size() && is_word_char(text_[pos_]))
      ++pos_;
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
  }

  // Where the next token starts (spaces skipped).
  size_t next_token() {
    skip_space();
    return pos_;
  }

  // A '(' or a 'not' at `at`: one level deeper, refused before the recursion that would take it.
  void enter_level(size_t at) {
    if (++levels_ > kWhereMaxDepth) too_deep(at);
  }

  // `left OP right`, a chain of one operator being one node: `(a or b) or c` is `a or b or c`.
  Node combine(Kind kind, Node left, Node right, size_t at) {
    Node node = std::move(left);
    if (node->kind != kind) {
      auto chain = std::make_unique<WhereNode>();
      chain->kind = kind;
      adopt(*chain, std::move(node), at);
      node = std::move(chain);
    }
    if (right->kind != kind) {
      adopt(*node, std::move(right), at);
    } else {
      for (auto& operand : right->children)
        adopt(*node, std::move(operand), at);
    }
    return node;
  }

  // `child` as the last operand of `parent` (made by the operator at `at`), within the depth
  // limit: an 'and' inside an 'or' nests without parentheses.
  void adopt(WhereNode& parent, Node child, size_t at) const {
    parent.depth = std::max(parent.depth, child->depth + 1);
    parent.children.push_back(std::move(child));
    if (parent.depth > kWhereMaxDepth) too_deep(at);
  }

  [[noreturn]] void too_deep(size_t at) const {
    throw UserError(fmt::format(
        "--where \"{}\": nested more than {} levels deep at column {} (each '(' and 'not' is a "
        "level, and so is an 'and' inside an 'or' or an 'or' inside an 'and'): write the filter "
        "with fewer levels",
        shown(), kWhereMaxDepth, at + 1));
  }

  // Callers skip spaces first, so pos_ is where the unexpected token starts.
  [[noreturn]] void fail(const std::string& expected) const {
    throw UserError(fmt::format("--where \"{}\": expected {} at column {}, found {}", shown(),
                                expected, pos_ + 1, found()));
  }

  // The expression as errors quote it: its start alone when it is long (a generated filter of
  // a thousand comparisons), so that the error stays a line one can read.
  std::string shown() const {
    constexpr size_t kShown = 100;
    if (text_.size() <= kShown + 20) return text_;
    size_t end = kShown;
    while (end > 0 && (static_cast<unsigned char>(text_[end]) & 0xC0) == 0x80)
      --end;  // not inside a UTF-8 character
    return fmt::format("{}... ({} characters)", text_.substr(0, end), text_.size());
  }

  std::string found() const {
    if (pos_ >= text_.size()) return "the end";
    size_t end = pos_ + 1;
    while (end < text_.size() && !std::isspace(static_cast<unsigned char>(text_[end])))
      ++end;
    return fmt::format("'{}'", text_.substr(pos_, end - pos_));
  }

  const std::string& text_;
  const KeySpace& keys_;
  size_t pos_ = 0;
  int levels_ = 0;  // '(' and 'not' open around pos_
  size_t comparisons_ = 0;
};

}  // namespace

bool is_config_key(const std::string& key) {
  static const std::regex pattern("[A-Za-z_][A-Za-z0-9_]*\\.[A-Za-z_][A-Za-z0-9_]*");
  return std::regex_match(key, pattern);
}

std::unique_ptr<WhereNode> parse_where(const std::string& expr, const KeySpace& keys) {
  return Parser(expr, keys).parse();
}

std::string sort_key(const std::string& key, const KeySpace& keys) {
  const std::string name = !key.empty() && key[0] == '-' ? key.substr(1) : key;
  if (!is_config_key(name) && !keys.columns.count(name)) {
    throw UserError(fmt::format("--sort '{}': unknown key '{}': {}; prefix '-' to sort descending",
                                key, name, unknown_key_hint(name, keys)));
  }
  return name;
}

}  // namespace kiln
