// `kiln bench --record [LABEL]` and `kiln bench --against LABEL`: the label a result is kept
// under, whether a stored result may be compared with this measurement, and the comparison, so
// that a regression is one command away. Torch-free: core/app/speed/measure.h measures.
#pragma once

#include <string>
#include <vector>

#include "core/store/runs/speed_records.h"

namespace kiln {

// What `--record` without a label stands for (and the CLI shows as its default): not a valid
// label itself, so no label a user types is ever mistaken for it.
constexpr const char* kDefaultBenchLabel = "<commit>-<config hash>";

// `requested`, checked (check_bench_label); kDefaultBenchLabel becomes the build's short commit
// and the config hash's first 8 digits, "d5013db-3f2a9c1e" ("3f2a9c1e" without a commit).
std::string resolve_bench_label(const std::string& requested, const std::string& git_commit,
                                const std::string& config_hash);

// What makes two results incomparable, one phrase each ("config hash 1234abcd recorded, 5678ef90
// here"); empty when they were measured on the same machine and config.
std::vector<std::string> bench_mismatches(const BenchRecord& recorded, const BenchRecord& current);

// The result stored as `label`, checked against `current` (its machine and config hash) before
// anything is timed: a UserError when no result has that label (naming those that exist) or when
// bench_mismatches finds a difference, unless `allow_mismatch`.
BenchRecord require_bench_baseline(Connection& db, const std::string& label,
                                   const BenchRecord& current, bool allow_mismatch);

// The ratio of this measurement to the recorded one, phase by phase, as a table.
std::string format_bench_comparison(const BenchRecord& recorded, const BenchRecord& current);

}  // namespace kiln
