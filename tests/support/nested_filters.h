// Run filters (`kiln runs --where`) built to a given depth, for the tests of the filter's limits.
#pragma once

#include <string>

namespace kiln::testing {

// `levels` parentheses, each opened on the right of an operator that lets `inner` decide:
// "name = nobody or (id > 0 and (name = nobody or (... inner ...)))", the shape that costs
// SQLite's parser the most.
inline std::string right_nested(const std::string& inner, int levels) {
  std::string expr = inner;
  for (int i = 0; i < levels; ++i)
    expr = (i % 2 ? "id > 0 and (" : "name = nobody or (") + expr + ")";
  return expr;
}

}  // namespace kiln::testing
