#include "core/store/where/sql.h"

#include <algorithm>

namespace kiln {

namespace {

// A metric's rows of the run being tested: `FROM ... WHERE ...` for the SQL that follows, the
// value, and how rows of one step are ordered (an eval during training before `kiln eval`'s).
struct MetricRows {
  std::string from, value, tie;
};

MetricRows rows_of(const std::string& metric, const KeySpace& keys) {
  const std::string of_run = " WHERE run_id = " + keys.run_id;
  const auto column = keys.metrics.find(metric);
  if (column != keys.metrics.end()) return {" FROM metrics" + of_run, column->second, ""};
  const auto task = keys.task_metrics.find(metric);
  if (task != keys.task_metrics.end()) {
    return {" FROM task_scores" + of_run + " AND " + task->second, "value", ", checkpoint"};
  }
  const auto probe = keys.probe_values.find(metric);
  if (probe != keys.probe_values.end()) return {" FROM rung_probes" + of_run, probe->second, ""};
  const auto layer = keys.layer_metrics.find(metric);
  if (layer != keys.layer_metrics.end()) {
    return {" FROM layer_metrics" + of_run + " AND " + layer->second, "value", ""};
  }
  return {" FROM evals" + of_run + " AND split = " + keys.eval_splits.at(metric), "loss",
          ", checkpoint"};
}

// The value at the run's last row at or before the point, NULL when the run has not reached
// the point. Every run has reached step 0 (and 0 tokens), the weights before its first step: a
// run of no steps (`kiln eval --hf`'s) is scored there. A step is bound twice: SQLite's `?NNN`
// would tie a fragment to its place.
void append_point(SqlFragment& out, const WhereKey& key, const KeySpace& keys) {
  const MetricRows rows = rows_of(key.name, keys);
  const std::string of_run = " FROM metrics WHERE run_id = " + keys.run_id;
  out.sql += key.at_tokens ? "CASE WHEN coalesce((SELECT max(tokens_seen)"
                           : "CASE WHEN coalesce((SELECT max(step)";
  out.sql += of_run + "), 0) >= ? THEN (SELECT " + rows.value + rows.from + " AND step <= ";
  out.sql +=
      key.at_tokens ? "coalesce((SELECT max(step)" + of_run + " AND tokens_seen <= ?), 0)" : "?";
  out.sql += " ORDER BY step DESC" + rows.tie + " LIMIT 1) END";
  out.params.push_back(key.at);
  out.params.push_back(key.at);
}

// min, max and mean over the values the run has; first and last: the value of its first or
// last row.
void append_aggregate(SqlFragment& out, const WhereKey& key, const KeySpace& keys) {
  const MetricRows rows = rows_of(key.name, keys);
  if (key.function == "first" || key.function == "last") {
    const char* order = key.function == "first" ? " ORDER BY step" : " ORDER BY step DESC";
    out.sql += "(SELECT " + rows.value + rows.from + order + rows.tie + " LIMIT 1)";
    return;
  }
  const std::string function = key.function == "mean" ? "avg" : key.function;
  out.sql += "(SELECT " + function + "(" + rows.value + ")" + rows.from + ")";
}

bool all_numbers(const std::vector<SqlValue>& values) {
  return !values.empty() && std::none_of(values.begin(), values.end(), [](const SqlValue& v) {
    return std::holds_alternative<std::string>(v);
  });
}

// The left-hand side of a comparison or a sort: whitelisted SQL, with any config key, step or
// token count bound. `as_number`: a config key's value is compared with numbers or sorted.
void append_key(SqlFragment& out, const WhereKey& key, const KeySpace& keys,
                bool as_number = false) {
  switch (key.kind) {
    case WhereKey::Kind::kColumn: out.sql += keys.columns.at(key.name); return;
    case WhereKey::Kind::kConfig:
      out.sql +=
          as_number && !keys.config_number_sql.empty() ? keys.config_number_sql : keys.config_sql;
      out.params.emplace_back(key.name);
      return;
    case WhereKey::Kind::kPoint: return append_point(out, key, keys);
    case WhereKey::Kind::kAggregate: return append_aggregate(out, key, keys);
  }
}

// `KEY OP ?`, `KEY IN (?, ...)` or `KEY BETWEEN ? AND ?`, false rather than NULL (FALSE, not 0:
// PostgreSQL's comparisons are booleans).
void append_comparison(SqlFragment& out, const WhereNode& node, const KeySpace& keys) {
  out.sql += "coalesce(";
  append_key(out, node.key, keys, node.op != "~" && all_numbers(node.values));
  if (node.op == "in") {
    out.sql += " IN (";
    for (size_t i = 0; i < node.values.size(); ++i)
      out.sql += i == 0 ? "?" : ", ?";
    out.sql += ")";
  } else if (node.op == "between") {
    out.sql += " BETWEEN ? AND ?";
  } else {
    out.sql += node.op == "~" ? " GLOB ?" : " " + node.op + " ?";
  }
  out.sql += ", FALSE)";
  out.params.insert(out.params.end(), node.values.begin(), node.values.end());
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
    case WhereNode::Kind::kCompare: return append_comparison(out, node, keys);
  }
}

}  // namespace

SqlFragment where_sql(const WhereNode& node, const KeySpace& keys) {
  SqlFragment out;
  append_where(out, node, keys);
  return out;
}

SqlFragment value_sql(const WhereKey& key, const KeySpace& keys) {
  SqlFragment out;
  append_key(out, key, keys);
  return out;
}

SqlFragment metric_steps_sql(const std::string& metric, const KeySpace& keys) {
  return {"SELECT DISTINCT step" + rows_of(metric, keys).from + " ORDER BY step", {}};
}

SqlFragment sort_sql(const SortKey& sort, const KeySpace& keys) {
  SqlFragment out;
  const char* order = sort.descending ? " DESC NULLS LAST" : " ASC NULLS LAST";
  append_key(out, sort.key, keys, /*as_number=*/true);
  out.sql += order;
  if (sort.key.kind == WhereKey::Kind::kConfig && !keys.config_number_sql.empty()) {
    // Numbers first, then text, as SQLite orders one column of both.
    out.sql += ", ";
    append_key(out, sort.key, keys);
    out.sql += order;
  }
  return out;
}

}  // namespace kiln
