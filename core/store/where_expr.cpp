#include "core/store/where_expr.h"

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

  Node parse_or() {
    Node node = parse_and();
    while (accept_word("or"))
      node = combine(WhereNode::Kind::kOr, std::move(node), parse_and());
    return node;
  }

  Node parse_and() {
    Node node = parse_unary();
    while (accept_word("and"))
      node = combine(WhereNode::Kind::kAnd, std::move(node), parse_unary());
    return node;
  }

  Node parse_unary() {
    if (accept_word("not")) {
      auto node = std::make_unique<WhereNode>();
      node->kind = WhereNode::Kind::kNot;
      node->children.push_back(parse_unary());
      return node;
    }
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '(') {
      ++pos_;
      Node inner = parse_or();
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != ')') fail("')' to close the '('");
      ++pos_;
      return inner;
    }
    return parse_comparison();
  }

  Node parse_comparison() {
    auto node = std::make_unique<WhereNode>();
    skip_space();
    node->column = pos_ + 1;
    node->key = parse_key();
    node->is_config = is_config_key(node->key);
    if (!node->is_config && !keys_.columns.count(node->key)) {
      throw UserError(fmt::format("--where \"{}\": unknown key '{}' at column {}: {}", text_,
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
        fmt::format("--where \"{}\": the string at column {} is not closed: end it with {}", text_,
                    start + 1, quote));
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

  static Node combine(WhereNode::Kind kind, Node left, Node right) {
    auto node = std::make_unique<WhereNode>();
    node->kind = kind;
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    return node;
  }

  // Callers skip spaces first, so pos_ is where the unexpected token starts.
  [[noreturn]] void fail(const std::string& expected) const {
    throw UserError(fmt::format("--where \"{}\": expected {} at column {}, found {}", text_,
                                expected, pos_ + 1, found()));
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
};

// The left-hand side of a comparison or a sort: whitelisted SQL, or the config lookup with the
// key bound.
void append_key(SqlFragment& out, const std::string& key, const KeySpace& keys) {
  if (is_config_key(key)) {
    out.sql += keys.config_sql;
    out.params.emplace_back(key);
  } else {
    out.sql += keys.columns.at(key);
  }
}

void append_where(SqlFragment& out, const WhereNode& node, const KeySpace& keys) {
  switch (node.kind) {
    case WhereNode::Kind::kAnd:
    case WhereNode::Kind::kOr:
      out.sql += "(";
      append_where(out, *node.children[0], keys);
      out.sql += node.kind == WhereNode::Kind::kAnd ? " AND " : " OR ";
      append_where(out, *node.children[1], keys);
      out.sql += ")";
      return;
    case WhereNode::Kind::kNot:
      out.sql += "(NOT ";
      append_where(out, *node.children[0], keys);
      out.sql += ")";
      return;
    case WhereNode::Kind::kCompare:
      out.sql += "coalesce(";
      append_key(out, node.key, keys);
      out.sql += node.op == "~" ? " GLOB " : " " + node.op + " ";
      out.sql += "?, 0)";
      out.params.push_back(node.value);
      return;
  }
}

void collect_config_keys(const WhereNode& node, std::vector<KeyUse>& out) {
  if (node.kind == WhereNode::Kind::kCompare && node.is_config) {
    out.push_back({node.key, node.column});
  }
  for (const auto& child : node.children)
    collect_config_keys(*child, out);
}

}  // namespace

bool is_config_key(const std::string& key) {
  static const std::regex pattern("[A-Za-z_][A-Za-z0-9_]*\\.[A-Za-z_][A-Za-z0-9_]*");
  return std::regex_match(key, pattern);
}

std::unique_ptr<WhereNode> parse_where(const std::string& expr, const KeySpace& keys) {
  return Parser(expr, keys).parse();
}

SqlFragment where_sql(const WhereNode& node, const KeySpace& keys) {
  SqlFragment out;
  append_where(out, node, keys);
  return out;
}

std::string sort_key(const std::string& key, const KeySpace& keys) {
  const std::string name = !key.empty() && key[0] == '-' ? key.substr(1) : key;
  if (!is_config_key(name) && !keys.columns.count(name)) {
    throw UserError(fmt::format("--sort '{}': unknown key '{}': {}; prefix '-' to sort descending",
                                key, name, unknown_key_hint(name, keys)));
  }
  return name;
}

SqlFragment sort_sql(const std::string& key, const KeySpace& keys) {
  SqlFragment out;
  append_key(out, sort_key(key, keys), keys);
  out.sql += key[0] == '-' ? " DESC NULLS LAST" : " ASC NULLS LAST";
  return out;
}

std::vector<KeyUse> config_keys_of(const WhereNode& node) {
  std::vector<KeyUse> out;
  collect_config_keys(node, out);
  return out;
}

}  // namespace kiln
