// The limits of `kiln runs list --where` (core/store/where/expr.h) and the SQL it compiles to: long
// chains are flat and grouped, deep filters are refused before they reach Kiln's stack or SQLite's
// parser, and every filter within the limits runs in SQLite over the store of fake_runs.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/store/history/queries.h"
#include "core/store/where/expr.h"
#include "core/store/where/sql.h"
#include "core/util/error.h"
#include "core/util/text.h"
#include "fake_runs.h"
#include "nested_filters.h"

namespace kiln {
namespace {

using Names = std::vector<std::string>;

class WhereLimits : public testing::FakeRuns {
 protected:
  Names where(const std::string& expr) {
    HistoryDb db(db_path());
    Names out;
    for (const auto& r : list_runs(db, {expr, "id", 0}))
      out.push_back(r.name);
    return out;
  }

  std::string error_of(const std::string& expr) {
    try {
      where(expr);
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "no UserError for a filter of " << expr.size() << " characters";
    return "";
  }
};

std::string repeated(const std::string& text, int times) {
  std::string out;
  for (int i = 0; i < times; ++i)
    out += text;
  return out;
}

using testing::right_nested;

// A full binary tree of alternating and/or, `depth` deep: 2^depth comparisons, all true.
std::string bushy(int depth) {
  if (depth == 0) return "id > 0";
  const std::string half = bushy(depth - 1);
  return "(" + half + (depth % 2 ? " and " : " or ") + half + ")";
}

TEST_F(WhereLimits, AThousandOredComparisonsSelectTheirRuns) {
  // Before: one SQL parenthesis per 'or', nested, and at about 100 of them SQLite's parser stack
  // overflowed ("parser stack overflow: is it a Kiln run store?").
  std::vector<std::string> terms;
  for (int i = 0; i < 1000; ++i)
    terms.push_back(fmt::format("name = x{}", i));
  terms[10] = "name = lr1";
  terms[500] = "optimizer.lr = 3e-3 and status = interrupted";
  terms[999] = "name = 'lr3-rerun'";
  EXPECT_EQ(where(join(terms, " or ")), Names({"lr1", "lr3-rerun", "lr3-short"}));
  for (auto& term : terms)
    term = "not (" + term + ")";
  EXPECT_EQ(where(join(terms, " and ")), Names({"lr3", "lr3-drift"}));
}

TEST_F(WhereLimits, TenThousandComparisonsAreTheMost) {
  std::vector<std::string> terms(10000, "id = 99");
  terms[7777] = "name = lr1";
  EXPECT_EQ(where(join(terms, " or ")), Names({"lr1"}));
  terms.push_back("name = lr3");
  const std::string expr = join(terms, " or ");
  EXPECT_EQ(error_of(expr),
            fmt::format("--where \"{}... ({} characters)\": more than 10000 comparisons (the one "
                        "at column {} is one too many): match many names with one glob instead, "
                        "e.g. name ~ 'sweep1/*'",
                        expr.substr(0, 100), expr.size(), expr.size() - 9));
}

TEST_F(WhereLimits, ThirtyThousandParenthesesAreRefusedAtTheThirtyThirdOne) {
  // Before: one C++ stack frame per '(' and SIGSEGV.
  const std::string parens = std::string(30000, '(') + "name = lr1" + std::string(30000, ')');
  EXPECT_EQ(error_of(parens),
            fmt::format("--where \"{}... (60010 characters)\": nested more than 32 levels deep at "
                        "column 33 (each '(' and 'not' is a level, and so is an 'and' inside an "
                        "'or' or an 'or' inside an 'and'): write the filter with fewer levels",
                        std::string(100, '(')));
  EXPECT_NE(error_of(repeated("not ", 30000) + "name = lr1").find("levels deep at column 129 "),
            std::string::npos);
  EXPECT_EQ(where(std::string(32, '(') + "name = lr1" + std::string(32, ')')), Names({"lr1"}));
  EXPECT_EQ(where(repeated("not ", 32) + "name = lr1"), Names({"lr1"}));
}

TEST_F(WhereLimits, AnAndInsideAnOrIsALevelWithoutParentheses) {
  // 17 parentheses, 34 levels: "a or b and (c or d and (...".
  std::string expr = "name = lr1";
  for (int i = 0; i < 17; ++i)
    expr = "name = nobody or id > 0 and (" + expr + ")";
  EXPECT_NE(error_of(expr).find("nested more than 32 levels deep"), std::string::npos);
  expr = "name = lr1";
  for (int i = 0; i < 16; ++i)
    expr = "name = nobody or id > 0 and (" + expr + ")";
  EXPECT_EQ(where(expr), Names({"lr1"}));
}

TEST_F(WhereLimits, EveryShapeWithinTheLimitsRunsInSQLite) {
  // The shapes that cost SQLite's parser the most, at the depth limit: operands opened on the
  // right, 'not (' after 'not (', and a full tree of 4096 comparisons under a chain.
  EXPECT_EQ(where(right_nested("name = lr1", 32)), Names({"lr1"}));
  EXPECT_EQ(where(repeated("not (name = nobody or ", 16) + "name = lr1" + std::string(16, ')')),
            Names({"lr1"}));
  const Names all = {"lr1", "lr3", "lr3-rerun", "lr3-drift", "lr3-short"};
  EXPECT_EQ(where(right_nested(bushy(12), 20)), all);
  EXPECT_EQ(where(repeated("not (name = nobody or ", 10) + bushy(12) + std::string(10, ')')), all);
  // Long chains at every level.
  std::string chain = "name = lr1";
  for (int level = 0; level < 32; ++level) {
    const std::string op = level % 2 ? " and " : " or ";
    const std::string neutral = level % 2 ? "id > 0" : "name = nobody";
    std::vector<std::string> terms(300, neutral);
    terms.push_back("(" + chain + ")");
    chain = join(terms, op);
  }
  EXPECT_EQ(where(chain), Names({"lr1"}));
}

// The grouping parentheses of compiled SQL (not a function's): how deep they nest, and the
// longest run of one operator between them.
struct SqlShape {
  int depth = 0;
  int longest_chain = 0;
};

SqlShape shape_of(const std::string& sql) {
  SqlShape shape;
  std::vector<int> chains = {1};    // operands so far at each open grouping level
  std::vector<bool> grouping = {};  // for each open '(': grouping or a call's
  for (size_t i = 0; i < sql.size(); ++i) {
    if (sql[i] == '(') {
      const bool call =
          i > 0 && (std::isalnum(static_cast<unsigned char>(sql[i - 1])) || sql[i - 1] == '_');
      grouping.push_back(!call);
      if (!call) chains.push_back(1);
      shape.depth = std::max(shape.depth, static_cast<int>(chains.size()) - 1);
    } else if (sql[i] == ')') {
      if (grouping.back()) {
        shape.longest_chain = std::max(shape.longest_chain, chains.back());
        chains.pop_back();
      }
      grouping.pop_back();
    } else if (sql.compare(i, 4, " OR ") == 0 || sql.compare(i, 5, " AND ") == 0) {
      ++chains.back();
    }
  }
  shape.longest_chain = std::max(shape.longest_chain, chains.back());
  return shape;
}

const KeySpace kKeys{{{"name", "name"}, {"steps", "steps"}}, "kiln_config(config, ?)"};

std::string sql_of(const std::string& expr) {
  return where_sql(*parse_where(expr, kKeys), kKeys).sql;
}

TEST(WhereSql, AChainOfOneOperatorIsFlat) {
  const std::string flat =
      "coalesce(name = ?, FALSE) OR coalesce(name = ?, FALSE) OR coalesce(name = ?, FALSE)";
  EXPECT_EQ(sql_of("name = a or name = b or name = c"), flat);
  EXPECT_EQ(sql_of("(name = a or name = b) or (name = c)"), flat);
  EXPECT_EQ(sql_of("name = a or (name = b or name = c)"), flat);
  EXPECT_EQ(sql_of("not not name = a"), "NOT NOT coalesce(name = ?, FALSE)");
}

TEST(WhereSql, NestedOperandsComeFirstAndComparisonsLastWithTheirValues) {
  auto ast = parse_where("name = a and (name = b or x.y = 2) and name = c", kKeys);
  const SqlFragment sql = where_sql(*ast, kKeys);
  EXPECT_EQ(sql.sql,
            "(coalesce(name = ?, FALSE) OR coalesce(kiln_config(config, ?) = ?, FALSE)) AND "
            "(coalesce(name = ?, FALSE) AND coalesce(name = ?, FALSE))");
  ASSERT_EQ(sql.params.size(), 5u);
  EXPECT_EQ(std::get<std::string>(sql.params[0]), "b");
  EXPECT_EQ(std::get<std::string>(sql.params[1]), "x.y");
  EXPECT_EQ(std::get<int64_t>(sql.params[2]), 2);
  EXPECT_EQ(std::get<std::string>(sql.params[3]), "a");
  EXPECT_EQ(std::get<std::string>(sql.params[4]), "c");
}

TEST(WhereSql, LongChainsAreGroupedBySixteenAFewLevelsDeep) {
  std::vector<std::string> terms(1000, "steps = 1");
  const SqlShape thousand = shape_of(sql_of(join(terms, " or ")));
  EXPECT_EQ(thousand.depth, 2);
  EXPECT_EQ(thousand.longest_chain, 16);
  terms.resize(16);
  EXPECT_EQ(shape_of(sql_of(join(terms, " or "))).depth, 0);
  terms.resize(10000);
  std::fill(terms.begin(), terms.end(), "steps = 1");
  const SqlShape most = shape_of(sql_of(join(terms, " and ")));
  EXPECT_EQ(most.depth, 3);
  EXPECT_LE(most.longest_chain, 16);
}

}  // namespace
}  // namespace kiln
