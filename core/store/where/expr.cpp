// The grammar of the --where language (core/store/where/expr.h) and its limits; its scanner and its
// keys are core/store/where/scanner.h and core/store/where/keys.h.
#include "core/store/where/expr.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/store/where/keys.h"
#include "core/store/where/scanner.h"
#include "core/util/error.h"

namespace kiln {

namespace {

class Parser {
 public:
  Parser(const std::string& text, const KeySpace& keys)
      : in_(text, WhereScanner::Text::kFilter), keys_(keys) {}

  std::unique_ptr<WhereNode> parse() {
    auto node = parse_or();
    in_.skip_space();
    if (!in_.at_end()) in_.fail("'and', 'or' or the end of the expression");
    return node;
  }

 private:
  using Node = std::unique_ptr<WhereNode>;
  using Kind = WhereNode::Kind;

  Node parse_or() {
    Node node = parse_and();
    for (size_t at = in_.next_token(); in_.accept_word("or"); at = in_.next_token())
      node = combine(Kind::kOr, std::move(node), parse_and(), at);
    return node;
  }

  Node parse_and() {
    Node node = parse_unary();
    for (size_t at = in_.next_token(); in_.accept_word("and"); at = in_.next_token())
      node = combine(Kind::kAnd, std::move(node), parse_unary(), at);
    return node;
  }

  Node parse_unary() {
    const size_t at = in_.next_token();
    if (in_.accept_word("not")) {
      enter_level(at);
      auto node = std::make_unique<WhereNode>();
      node->kind = Kind::kNot;
      adopt(*node, parse_unary(), at);
      --levels_;
      return node;
    }
    if (in_.accept("(")) {
      enter_level(at);
      Node inner = parse_or();
      if (!in_.accept(")")) in_.fail("')' to close the '('");
      --levels_;
      return inner;
    }
    return parse_comparison();
  }

  Node parse_comparison() {
    auto node = std::make_unique<WhereNode>();
    count_comparison(in_.next_token());
    node->key = parse_key(in_, keys_);
    count_metric_key(node->key);
    if (in_.accept_word("in")) {
      node->op = "in";
      node->values = parse_list();
    } else if (in_.accept_word("between")) {
      node->op = "between";
      node->values.push_back(in_.parse_value(false));
      if (!in_.accept_word("and")) in_.fail("'and' between the two ends of 'between'");
      count_comparison(in_.next_token());  // `between` is `>=` and `<=`
      node->values.push_back(in_.parse_value(false));
    } else {
      node->op = parse_op();
      node->values.push_back(in_.parse_value(false));
    }
    return node;
  }

  // `(VALUE, VALUE, ...)` after `in`: each value one comparison.
  std::vector<SqlValue> parse_list() {
    if (!in_.accept("(")) in_.fail("'(' to open the list of values after 'in'");
    std::vector<SqlValue> values;
    do {
      const size_t at = in_.next_token();
      if (values.size() == kWhereMaxListValues) {
        throw UserError(fmt::format(
            "{}: a list of more than {} values (the one at column {} is one too many): match "
            "many names with one glob instead, e.g. name ~ 'sweep1/*'",
            in_.context(), kWhereMaxListValues, at + 1));
      }
      if (!values.empty()) count_comparison(at);
      values.push_back(in_.parse_value(true));
    } while (in_.accept(","));
    if (!in_.accept(")")) in_.fail("',' or ')' to close the list");
    return values;
  }

  std::string parse_op() {
    for (const char* op : {"<=", ">=", "!=", "==", "=", "<", ">", "~"}) {
      if (in_.accept(op)) return std::string(op) == "==" ? "=" : op;
    }
    in_.fail("an operator (=, !=, <, <=, >, >=, ~ for a glob, in (...) or between ... and ...)");
  }

  // One more comparison, the one at `at`, within the limit.
  void count_comparison(size_t at) {
    if (++comparisons_ <= kWhereMaxComparisons) return;
    throw UserError(fmt::format(
        "{}: more than {} comparisons (the one at column {} is one too many): match many names "
        "with one glob instead, e.g. name ~ 'sweep1/*'",
        in_.context(), kWhereMaxComparisons, at + 1));
  }

  void count_metric_key(const WhereKey& key) {
    if (key.kind != WhereKey::Kind::kPoint && key.kind != WhereKey::Kind::kAggregate) return;
    if (++metric_keys_ <= kWhereMaxMetricKeys) return;
    throw UserError(fmt::format(
        "{}: more than {} points and aggregates (the one at column {} is one too many): each "
        "reads every run's rows anew; compare one of them with 'in (...)' or 'between' instead",
        in_.context(), kWhereMaxMetricKeys, key.column));
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
        "{}: nested more than {} levels deep at column {} (each '(' and 'not' is a level, and so "
        "is an 'and' inside an 'or' or an 'or' inside an 'and'): write the filter with fewer "
        "levels",
        in_.context(), kWhereMaxDepth, at + 1));
  }

  WhereScanner in_;
  const KeySpace& keys_;
  int levels_ = 0;  // '(' and 'not' open around the scanner's position
  size_t comparisons_ = 0;
  size_t metric_keys_ = 0;
};

void collect_config_keys(const WhereNode& node, std::vector<KeyUse>& out) {
  if (node.kind == WhereNode::Kind::kCompare && node.key.kind == WhereKey::Kind::kConfig) {
    KeyUse use{node.key.name, node.key.column, ""};
    for (const SqlValue& value : node.values) {
      const auto* text = std::get_if<std::string>(&value);
      if (text && node.op != "~") use.text = *text;
    }
    out.push_back(std::move(use));
  }
  for (const auto& child : node.children)
    collect_config_keys(*child, out);
}

}  // namespace

std::unique_ptr<WhereNode> parse_where(const std::string& expr, const KeySpace& keys) {
  return Parser(expr, keys).parse();
}

SortKey parse_sort(const std::string& arg, const KeySpace& keys, const std::string& option) {
  WhereScanner in(arg, WhereScanner::Text::kSortKey, option);
  SortKey sort;
  sort.descending = in.accept("-");
  sort.key = parse_key(in, keys);
  in.skip_space();
  if (!in.at_end()) in.fail("the end of the key");
  return sort;
}

std::vector<KeyUse> config_keys_of(const WhereNode& node) {
  std::vector<KeyUse> out;
  collect_config_keys(node, out);
  return out;
}

}  // namespace kiln
