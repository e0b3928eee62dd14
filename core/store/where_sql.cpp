// Compiling a parsed --where filter and a --sort key (where_expr.h) to SQL text with bound
// parameters.
#include "core/store/where_expr.h"

#include <algorithm>

namespace kiln {

namespace {

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

void append_where(SqlFragment& out, const WhereNode& node, const KeySpace& keys);

bool is_chain(const WhereNode& node) {
  return node.kind == WhereNode::Kind::kAnd || node.kind == WhereNode::Kind::kOr;
}

// An operand of NOT, AND or OR: a chain in parentheses (NOT binds tighter than AND, AND than OR,
// so a NOT or a comparison needs none).
void append_operand(SqlFragment& out, const WhereNode& node, const KeySpace& keys) {
  if (!is_chain(node)) return append_where(out, node, keys);
  out.sql += "(";
  append_where(out, node, keys);
  out.sql += ")";
}

// Operands joined by `op`, at most kFlatGroup to a chain: SQLite's expression tree is as deep as
// a chain is long, and it allows 1000; more become groups of groups, a few levels deep.
constexpr size_t kFlatGroup = 16;

void append_grouped(SqlFragment& out, const WhereNode* const* items, size_t count, const char* op,
                    const KeySpace& keys) {
  if (count <= kFlatGroup) {
    for (size_t i = 0; i < count; ++i) {
      if (i > 0) out.sql += op;
      append_operand(out, *items[i], keys);
    }
    return;
  }
  const size_t group = (count + kFlatGroup - 1) / kFlatGroup;
  for (size_t start = 0; start < count; start += group) {
    if (start > 0) out.sql += op;
    out.sql += "(";
    append_grouped(out, items + start, std::min(group, count - start), op, keys);
    out.sql += ")";
  }
}

// A chain, its operands reordered (AND and OR of 0/1 values commute: every comparison is
// coalesced). SQLite's parser keeps an operand opened on the left of its chain in one entry of
// its 100-entry stack and one opened on the right in three (`x OR (`), so the deepest operands
// lead, each on its own (at most kLeadingOperands of them, so that the deepest stays near the
// top of the expression tree), and everything else follows in one group, comparisons last.
constexpr size_t kLeadingOperands = 8;

void append_chain(SqlFragment& out, const WhereNode& node, const KeySpace& keys) {
  const char* op = node.kind == WhereNode::Kind::kAnd ? " AND " : " OR ";
  std::vector<const WhereNode*> operands, comparisons;
  for (const auto& child : node.children)
    (child->kind == WhereNode::Kind::kCompare ? comparisons : operands).push_back(child.get());
  std::stable_sort(operands.begin(), operands.end(),
                   [](const WhereNode* a, const WhereNode* b) { return a->depth > b->depth; });
  const size_t leading = std::min(operands.size(), kLeadingOperands);
  operands.insert(operands.end(), comparisons.begin(), comparisons.end());
  for (size_t i = 0; i < leading; ++i) {
    if (i > 0) out.sql += op;
    append_operand(out, *operands[i], keys);
  }
  const size_t rest = operands.size() - leading;
  if (rest == 0) return;
  const bool grouped = leading > 0 && rest > 1;
  if (leading > 0) out.sql += op;
  if (grouped) out.sql += "(";
  append_grouped(out, operands.data() + leading, rest, op, keys);
  if (grouped) out.sql += ")";
}

void append_where(SqlFragment& out, const WhereNode& node, const KeySpace& keys) {
  switch (node.kind) {
    case WhereNode::Kind::kAnd:
    case WhereNode::Kind::kOr: return append_chain(out, node, keys);
    case WhereNode::Kind::kNot:
      out.sql += "NOT ";
      return append_operand(out, *node.children[0], keys);
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

SqlFragment where_sql(const WhereNode& node, const KeySpace& keys) {
  SqlFragment out;
  append_where(out, node, keys);
  return out;
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
