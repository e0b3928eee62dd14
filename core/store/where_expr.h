// The filter language of `kiln runs list --where EXPR` and the keys of `--sort KEY`.
//
//   EXPR    := or
//   or      := and ("or" and)*
//   and     := unary ("and" unary)*
//   unary   := "not" unary | "(" or ")" | KEY OP VALUE
//   KEY     := a summary column (name, best_loss, ...) | section.key (a resolved-config key)
//   OP      := = | != | < | <= | > | >= | ~ (glob: * ? [..])
//   VALUE   := 'text' | "text" (a doubled quote is a quote) | a number | true | false
//            | a bare word (anything up to a space or a parenthesis: sweep1/*, 2024-05-01)
//
// EXPR is parsed by recursive descent into an AST and compiled to parameterized SQL: a column
// key maps to SQL text taken from a fixed whitelist, a config key is passed as a bound parameter
// of the config-lookup function, and every value is a bound parameter. Nothing the user typed is
// ever part of the SQL text, so `name = "x' or 1=1 --"` is just a name that matches no run.
//
// Limits, so that no filter can overflow Kiln's stack or SQLite's parser (whose stack holds 100
// entries in Debian's build) or its expression depth (1000): a filter nests at most
// kWhereMaxDepth levels (each '(' and 'not' is a level, and so is an 'and' inside an 'or' or the
// other way round) and holds at most kWhereMaxComparisons comparisons. Chains of one operator
// are one n-ary node, compiled flat in groups (see where_sql), so a list of 1,000 or-ed
// comparisons is an ordinary filter.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/store/sqlite.h"  // SqlValue, SqlFragment

namespace kiln {

constexpr int kWhereMaxDepth = 32;
constexpr size_t kWhereMaxComparisons = 10000;

// What a key can name.
struct KeySpace {
  std::map<std::string, std::string> columns;  // key -> its SQL expression (our text, never input)
  std::string config_sql;  // the SQL expression of a config key, with one `?` for the key
};

struct WhereNode {
  enum class Kind { kAnd, kOr, kNot, kCompare };
  Kind kind = Kind::kCompare;
  std::vector<std::unique_ptr<WhereNode>> children;  // two or more for and/or, one for not
  int depth = 0;  // and/or/not nodes on the longest path down from here, this one included
  // A comparison:
  std::string key;
  bool is_config = false;  // `section.key` rather than a column
  size_t column = 0;       // 1-based position of the key in EXPR, for later error messages
  std::string op;          // = != < <= > >= ~
  SqlValue value;
};

// A UserError naming the column of EXPR and what was expected there, for any mistake.
std::unique_ptr<WhereNode> parse_where(const std::string& expr, const KeySpace& keys);
// A boolean SQL expression. A comparison with a value the run lacks (no val eval yet, a key its
// plugin does not have) is false rather than SQL's NULL, so `not` and `or` read as in English.
// A chain is written flat (`a OR b OR c`), its most deeply nested operands first and its
// comparisons last, in groups of at most 16 once there are more than 16 operands.
SqlFragment where_sql(const WhereNode& node, const KeySpace& keys);

// An ORDER BY term for `KEY` (ascending) or `-KEY` (descending); runs lacking the value last.
SqlFragment sort_sql(const std::string& key, const KeySpace& keys);
// The key of a `--sort` argument without its '-', checked like a --where key.
std::string sort_key(const std::string& key, const KeySpace& keys);

// The config keys a filter names, with their columns in EXPR.
struct KeyUse {
  std::string key;
  size_t column = 0;
};
std::vector<KeyUse> config_keys_of(const WhereNode& node);

bool is_config_key(const std::string& key);

}  // namespace kiln
