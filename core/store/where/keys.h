// The keys of --where and --sort (core/store/where/expr.h): a summary column, a config key, a
// metric at a point of the run, or an aggregate of a metric over the run, read at the scanner's
// position and checked against the key space.
#pragma once

#include "core/store/where/expr.h"
#include "core/store/where/scanner.h"

namespace kiln {

// The key at pos() (a column, a config key, a point or an aggregate), checked against `keys`.
WhereKey parse_key(WhereScanner& in, const KeySpace& keys);

}  // namespace kiln
