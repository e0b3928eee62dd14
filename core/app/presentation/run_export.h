// Run history for programs rather than people: `kiln runs list --format csv|json` and
// `kiln runs export` (docs/run-store.md, "Export format"). Every digit of a number is kept, and
// an unknown one is empty (csv) or null (json). Kept apart from
// core/app/presentation/run_tables.cpp, whose tables round numbers for reading, because the two
// share no helper and each is read alone.
#pragma once

#include <string>
#include <vector>

#include "core/store/history/reader.h"
#include "core/store/runs/lookup.h"

namespace kiln {

// `kiln runs list --format csv`: one row per run, with a header row.
std::string runs_csv(const std::vector<RunRecord>& runs);
// `kiln runs list --format json`: an array of one object per run.
std::string runs_json(const std::vector<RunRecord>& runs);

// `kiln runs export`: the metrics rows, then the evals, as "csv" or "jsonl" (docs/run-store.md,
// "Export format").
std::string export_run(HistoryDb& db, const RunRecord& run, const std::string& format);

}  // namespace kiln
