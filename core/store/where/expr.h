// The filter language of `kiln runs list --where EXPR` and the keys of `--sort KEY`.
//
//   EXPR    := or
//   or      := and ("or" and)*
//   and     := unary ("and" unary)*
//   unary   := "not" unary | "(" or ")" | KEY OP VALUE | KEY "in" "(" VALUE ("," VALUE)* ")"
//            | KEY "between" VALUE "and" VALUE
//   KEY     := a summary column (name, best_loss, ...) | section.key (a resolved-config key)
//            | METRIC "@" ("step" | "tokens") "=" NUMBER (the metric at a point of the run)
//            | AGGREGATE "(" METRIC ")" (AGGREGATE: min max mean first last)
//   OP      := = | != | < | <= | > | >= | ~ (glob: * ? [..])
//   VALUE   := 'text' | "text" (a doubled quote is a quote) | a number | true | false
//            | a bare word (anything up to a space or a parenthesis, or a comma in a list:
//              sweep1/*, 2024-05-01)
//
// EXPR is parsed by recursive descent into an AST (here) and compiled to parameterized SQL
// (core/store/where/sql.h): a column key maps to SQL text taken from a fixed whitelist, and so
// does a metric (KeySpace), a config key is passed as a bound parameter of the config-lookup
// function, and every value and point is a bound parameter. Nothing the user typed is ever part of
// the SQL text, so `name = "x' or 1=1 --"` is just a name that matches no run.
//
// Limits, so that no filter can overflow Kiln's stack or SQLite's parser (whose stack holds 100
// entries in Debian's build), its expression depth (1000) or its bound parameters (32766): a
// filter nests at most kWhereMaxDepth levels (each '(' and 'not' is a level, and so is an 'and'
// inside an 'or' or the other way round) and holds at most kWhereMaxComparisons comparisons
// (each value of an `in` list is one, `between` is two); a list holds at most kWhereMaxListValues
// values. A filter names at most kWhereMaxMetricKeys points and aggregates: each is subqueries
// of its own, and SQLite's time to plan a filter grows with the square of their number (a
// thousand take a second, ten thousand minutes). Chains of one operator are one n-ary node,
// compiled flat in groups (core/store/where/sql.h), so a list of 1,000 or-ed comparisons is an
// ordinary filter.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/store/db/connection.h"  // SqlValue, SqlFragment

namespace kiln {

constexpr int kWhereMaxDepth = 32;
constexpr size_t kWhereMaxComparisons = 10000;
constexpr size_t kWhereMaxListValues = 1000;
constexpr size_t kWhereMaxMetricKeys = 100;

// What a key can name. Every string is our SQL text, never input. Without metrics, a key space
// names columns and config keys only.
struct KeySpace {
  std::map<std::string, std::string> columns;  // key -> its SQL expression
  std::string config_sql;  // the SQL expression of a config key, with one `?` for the key
  std::map<std::string, std::string> metrics = {};      // metric -> its column of `metrics`
  std::map<std::string, std::string> eval_splits = {};  // metric -> its split of `evals`, quoted
  std::string run_id = {};  // the id of the run a filter is testing, for a metric's rows
  // Where a config key's value has one SQL type (PostgreSQL): its expression as a number, for
  // comparisons with numbers and for sorts (config_sql is then its text). Empty: config_sql.
  std::string config_number_sql = {};
  // TASK.METRIC -> the condition on `task_scores` that picks its rows
  // (core/store/runs/task_scores.h)
  std::map<std::string, std::string> task_metrics = {};
  // metric -> its column of `rung_probes` (core/store/runs/rung_probes.h): a rung's cooled score
  std::map<std::string, std::string> probe_values = {};
  // metric -> the condition on `layer_metrics` that picks its rows
  // (core/store/runs/layer_metrics.h): a layer's measure, such as moe_1.aux_loss
  std::map<std::string, std::string> layer_metrics = {};
};

// The left-hand side of a comparison, or a --sort key.
struct WhereKey {
  enum class Kind { kColumn, kConfig, kPoint, kAggregate };
  Kind kind = Kind::kColumn;
  std::string name;        // the column, the config key, or the metric of a point or aggregate
  std::string function;    // an aggregate's: min max mean first last
  bool at_tokens = false;  // a point's axis: tokens seen rather than steps
  SqlValue at;             // a point's step or token count
  size_t column = 0;       // 1-based position in the text, for later error messages
};

struct WhereNode {
  enum class Kind { kAnd, kOr, kNot, kCompare };
  Kind kind = Kind::kCompare;
  std::vector<std::unique_ptr<WhereNode>> children;  // two or more for and/or, one for not
  int depth = 0;  // and/or/not nodes on the longest path down from here, this one included
  // A comparison:
  WhereKey key;
  std::string op;                // = != < <= > >= ~ in between
  std::vector<SqlValue> values;  // one; the list of `in`; the two ends of `between`
};

// A UserError naming the column of EXPR and what was expected there, for any mistake.
std::unique_ptr<WhereNode> parse_where(const std::string& expr, const KeySpace& keys);
// A `--sort` argument: `KEY` (ascending) or `-KEY` (descending), KEY checked like a --where key.
struct SortKey {
  WhereKey key;
  bool descending = false;
};
// `option` names the argument in errors: "--sort", or "--by" for `kiln sweep best`.
SortKey parse_sort(const std::string& arg, const KeySpace& keys,
                   const std::string& option = "--sort");

// The config keys a filter names, with their columns in EXPR.
struct KeyUse {
  std::string key;
  size_t column = 0;
  std::string text;  // a quoted value it is compared with (not by `~`, a glob): "" when none
};
std::vector<KeyUse> config_keys_of(const WhereNode& node);

}  // namespace kiln
