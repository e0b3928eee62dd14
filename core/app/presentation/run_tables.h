// What `kiln runs list|show|compare|export` print, and the tables `kiln report` and the sweep
// summary share: run history (core/store/history/queries.h) turned into text. Numbers for people
// are rounded; numbers for programs (csv, json, jsonl: core/app/presentation/run_export.h) keep
// every digit.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/app/presentation/run_export.h"  // the csv, json and jsonl forms: export_run
#include "core/store/history/queries.h"
#include "core/util/table.h"

namespace kiln {

Table run_list_table(const std::vector<RunRecord>& runs);
// "table" (aligned, rounded), "csv" or "json" (every digit, empty/null when unknown).
std::string format_run_list(const std::vector<RunRecord>& runs, const std::string& format);

// `kiln runs show`: identity, timing, metrics summary, evals, snapshots, resumes and config.
std::string describe_run(HistoryDb& db, const RunRecord& run);

// A blend's mixture (data "blend"): per source, its weight, the share of rows that asks for
// (weight / the sum of weights, from the config) and the tokens its steps took with their share
// (the metrics' source_tokens). No rows for data of one source. `kiln runs show` and the
// dashboard's run page show it.
Table data_mixture_table(HistoryDb& db, const RunRecord& run);

// The config keys whose values are not the same in every run (run.name left out: it labels
// them), each with every run's value: "-" where a run lacks the key, "" quoted for an empty
// string.
std::vector<std::pair<std::string, std::vector<std::string>>> differing_config(
    const std::vector<RunRecord>& runs);
Table differing_config_table(const std::vector<RunRecord>& runs);

// `kiln runs compare`: differing config, summaries side by side, and for every pair of runs
// sharing a config hash whether their loss curves are identical.
std::string compare_report(HistoryDb& db, const std::vector<RunRecord>& runs);

}  // namespace kiln
