// The --where language compiled to SQL text with bound parameters (the language, its AST and
// its limits are core/store/where/expr.h): a filter's AST to a boolean expression, a --sort key
// to an ORDER BY term, and a key's value and a metric's steps for a run, as --where reads them.
#pragma once

#include <string>

#include "core/store/db/connection.h"  // SqlFragment
#include "core/store/where/expr.h"

namespace kiln {

// A boolean SQL expression. A comparison with a value the run lacks (no val eval yet, a key its
// plugin does not have, a point it has not reached) is false rather than SQL's NULL, so `not`
// and `or` read as in English.
// A chain is written flat (`a OR b OR c`), its most deeply nested operands first and its
// comparisons last, in groups of at most 16 once there are more than 16 operands.
SqlFragment where_sql(const WhereNode& node, const KeySpace& keys);

// A key's value for the run keys.run_id names, as a comparison reads it: NULL where the run lacks
// it. `kiln runs compare --metric` reads its points by it, so that it and --where agree.
SqlFragment value_sql(const WhereKey& key, const KeySpace& keys);
// The steps of the run's rows of a metric (a key of keys' metrics, splits, tasks or probes), in
// order: what a message saying why the run has no value at a point lists.
SqlFragment metric_steps_sql(const std::string& metric, const KeySpace& keys);

// An ORDER BY term; runs lacking the value last.
SqlFragment sort_sql(const SortKey& sort, const KeySpace& keys);

}  // namespace kiln
