// Run history: what `kiln runs list|show|compare|export|rm|plot` and `kiln report` compute, in
// process, over a run store built with RunStore (support/fake_runs.h), so every expected number
// is known exactly. The command line itself: tests/e2e/runs_command_test.cpp.
#include "core/app/presentation/run_tables.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/app/presentation/plot_svg.h"
#include "core/app/presentation/report.h"
#include "core/store/history/removal.h"
#include "core/store/runs/paths.h"
#include "core/store/runs/writer.h"
#include "core/store/where/expr.h"
#include "core/store/where/sql.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "fake_runs.h"

namespace kiln {
namespace {

class RunHistory : public testing::FakeRuns {
 protected:
  std::vector<std::string> names(const ListQuery& query) {
    HistoryDb db(db_path());
    std::vector<std::string> out;
    for (const auto& r : list_runs(db, query))
      out.push_back(r.name);
    return out;
  }

  std::vector<std::string> where(const std::string& expr) { return names({expr, "id", 0}); }

  // A run made as `kiln run` makes one: a row with its uuid and folder, and a marked folder.
  RunPaths add_marked_run(const std::string& name) {
    const std::string uuid = new_run_uuid();
    RunPaths paths = RunPaths::for_new_run(dir_ / "runs", name, uuid);
    write_run_marker(paths, uuid, db_path());
    NewRun run;
    run.name = name;
    run.config_toml = config({name, 1e-3, 2, "ffff", {}, {}});
    run.config_hash = "ffff";
    run.uuid = uuid;
    run.folder = paths.folder();
    RunStore store(db_path());
    store.finish_run(store.create_run(run), "completed");
    return paths;
  }

  // The one-line message of the UserError `fn` raises.
  template <typename Fn>
  std::string error_of(Fn fn) {
    try {
      fn();
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "no UserError";
    return "";
  }
};

using Names = std::vector<std::string>;

TEST_F(RunHistory, ListFiltersOnConfigKeysAndSummaryColumns) {
  EXPECT_EQ(where("optimizer.lr < 0.002"), Names({"lr1"}));
  EXPECT_EQ(where("optimizer.lr = 3e-3 and best_val < 1.8"), Names({"lr3", "lr3-rerun"}));
  EXPECT_EQ(where("model.n_layer >= 4 and not (status = completed)"), Names({"lr3-short"}));
  EXPECT_EQ(where("name ~ 'lr3-*' and steps = 4"), Names({"lr3-rerun", "lr3-drift"}));
  EXPECT_EQ(where("best_loss <= 1.5 or final_loss = 2"),
            Names({"lr1", "lr3", "lr3-rerun", "lr3-drift"}));
  EXPECT_EQ(where("model.type = gpt AND optimizer.type != \"sgd\" and model.bias = false").size(),
            5u);
  EXPECT_EQ(where("config_hash = aaaa"), Names({"lr1"}));
  // A comparison with a value a run lacks is false, so `not` of it is true.
  EXPECT_EQ(where("not best_val > 0"), Names({"lr3-drift", "lr3-short"}));
  EXPECT_EQ(where("  "), where("id > 0"));
  EXPECT_EQ(where("steps < 1e999 and id < 99999999999999999999").size(), 5u);
}

TEST_F(RunHistory, SummariesAreTheStoredNumbers) {
  HistoryDb db(db_path());
  RunRecord r = find_run_record(db, "lr3");
  EXPECT_EQ(r.steps, 4);
  EXPECT_EQ(r.planned_steps, 4);
  EXPECT_EQ(*r.final_loss, 1.5);
  EXPECT_EQ(*r.best_loss, 1.5);
  EXPECT_EQ(*r.best_val, 1.7);
  EXPECT_EQ(*r.tokens_per_sec, 100.0);  // step 1 (10 tok/s) left out
  EXPECT_GE(*r.duration_s, 0.0);
  EXPECT_EQ(r.sweep, "");
  EXPECT_EQ(find_run_record(db, std::to_string(r.id)).name, "lr3");
  EXPECT_FALSE(find_run_record(db, "lr3-drift").best_val.has_value());
  EXPECT_NE(error_of([&] { find_run_record(db, "nope"); }).find("no run 'nope'"),
            std::string::npos);
}

TEST_F(RunHistory, SortAndLimit) {
  EXPECT_EQ(names({"", "-final_loss", 0}),  // ties in id order
            Names({"lr3-short", "lr1", "lr3", "lr3-rerun", "lr3-drift"}));
  EXPECT_EQ(names({"", "-optimizer.lr", 2}), Names({"lr3", "lr3-rerun"}));
  EXPECT_EQ(names({"", "best_val", 0}),  // runs without a value last
            Names({"lr3", "lr3-rerun", "lr1", "lr3-drift", "lr3-short"}));
  EXPECT_EQ(names({"model.n_layer = 4", "-name", 1}), Names({"lr3-short"}));
}

TEST_F(RunHistory, CsvAndJsonCarryEveryDigit) {
  HistoryDb db(db_path());
  auto runs = list_runs(db, {"name = lr3-drift or name = lr1", "id", 0});
  std::istringstream csv(format_run_list(runs, "csv"));
  std::string header, first;
  std::getline(csv, header);
  std::getline(csv, first);
  EXPECT_EQ(header.rfind("id,name,status,sweep,created_at,finished_at,steps,planned_steps,", 0),
            0u);
  EXPECT_NE(first.find(",lr1,completed,,"), std::string::npos) << first;
  EXPECT_NE(first.find(",4,4,2,2,2.2,100,"), std::string::npos) << first;

  auto json = nlohmann::json::parse(format_run_list(runs, "json"));
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[1]["name"], "lr3-drift");
  EXPECT_TRUE(json[1]["best_val"].is_null());
  EXPECT_EQ(json[1]["steps"], 4);
  EXPECT_EQ(json[0]["best_val"].get<double>(), 2.2);

  const std::string table = format_run_list(runs, "table");
  EXPECT_NE(table.find("best_val"), std::string::npos);
  EXPECT_NE(table.find("2.2000"), std::string::npos) << table;
  EXPECT_NE(table.find("4/4"), std::string::npos) << table;
}

TEST_F(RunHistory, ValuesAreDataNeverSql) {
  add({"x' or 1=1 --", 1e-3, 2, "cccc", {3.0}, {}});
  // Quoted, the whole thing is one name: it matches that run and nothing else.
  EXPECT_EQ(where("name = \"x' or 1=1 --\""), Names({"x' or 1=1 --"}));
  EXPECT_EQ(where("name = 'x'' or 1=1 --'"), Names({"x' or 1=1 --"}));
  EXPECT_EQ(where("status = \"completed' or '1'='1\""), Names({}));
  EXPECT_EQ(where("name = 'or'"), Names({}));
  // Unquoted, it is not a filter at all: `1=1` is no key.
  EXPECT_NE(error_of([&] { where("name = 'x' or 1=1 --"); }).find("expected a key"),
            std::string::npos);
  EXPECT_NE(error_of([&] { where("name = x; DROP TABLE runs"); }).find("column 11"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              names({"", "name; DROP TABLE runs", 0});
            }).find("expected the end of the key at column 5, found ';'"),
            std::string::npos);
  EXPECT_EQ(where("id > 0").size(), 6u);
}

TEST_F(RunHistory, BadExpressionsSayWhereAndWhatWasExpected) {
  struct Case {
    std::string expr, expect;
  };
  const std::vector<Case> cases = {
      {"optimizer.lr <",
       "expected a value (a number, 'text' or a bare word) at column 15, "
       "found the end"},
      {"optimizer.lr < and steps > 1",
       "expected a value (a number, 'text' or a bare word) at "
       "column 16, found 'and'"},
      {"name = a and",
       "expected a key (a column such as best_loss, or a config key such as "
       "optimizer.lr) at column 13"},
      {"(name = a", "expected ')' to close the '(' at column 10, found the end"},
      {"best_loss ! 3",
       "expected an operator (=, !=, <, <=, >, >=, ~ for a glob, in (...) or between ... and "
       "...) at column 11, found '!'"},
      {"nme = a", "unknown key 'nme' at column 1: did you mean 'name'?"},
      {"name = a status = b", "expected 'and', 'or' or the end of the expression at column 10"},
      {"name = 'abc", "the string at column 8 is not closed: end it with '"},
      {"model. = 3", "expected a key name after the '.' at column 7"},
      {"steps > 1 and optimizer.lrr < 1",
       "no run has the config key 'optimizer.lrr' (column 15): did you mean 'optimizer.lr'?"},
      // A number key compared with a text would match nothing, silently: said instead.
      {"optimizer.lr < 'abc'",
       "config key 'optimizer.lr' holds numbers (such as 0.001) but is compared with the text "
       "'abc' (column 1): write the number without quotes"},
  };
  for (const auto& c : cases) {
    const std::string message = error_of([&] { where(c.expr); });
    EXPECT_NE(message.find(c.expect), std::string::npos) << c.expr << "\n" << message;
    EXPECT_EQ(message.rfind("--where \"" + c.expr + "\": ", 0), 0u) << message;
  }
  EXPECT_NE(error_of([&] {
              names({"", "-nme", 0});
            }).find("--sort '-nme': unknown key 'nme' at column 2: did you mean 'name'?"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              names({"", "model.n_layr", 0});
            }).find("did you mean 'model.n_layer'"),
            std::string::npos);
}

TEST_F(RunHistory, WhereCompilesToPlaceholdersOnly) {
  KeySpace keys{{{"name", "name"}, {"best_loss", "best_loss"}}, "kiln_config(config, ?)"};
  auto ast = parse_where("not (name ~ 'a*' or optimizer.lr >= 1e-3) and best_loss < 2", keys);
  SqlFragment sql = where_sql(*ast, keys);
  EXPECT_EQ(
      sql.sql,
      "NOT (coalesce(name GLOB ?, FALSE) OR coalesce(kiln_config(config, ?) >= ?, FALSE)) AND "
      "coalesce(best_loss < ?, FALSE)");
  ASSERT_EQ(sql.params.size(), 4u);
  EXPECT_EQ(std::get<std::string>(sql.params[0]), "a*");
  EXPECT_EQ(std::get<std::string>(sql.params[1]), "optimizer.lr");
  EXPECT_EQ(std::get<double>(sql.params[2]), 1e-3);
  EXPECT_EQ(std::get<int64_t>(sql.params[3]), 2);
}

TEST_F(RunHistory, CompareFindsIdenticalCurvesAndTheFirstDifference) {
  HistoryDb db(db_path());
  auto id = [&](const std::string& name) { return find_run_record(db, name).id; };
  CurveComparison same = compare_loss_curves(db, id("lr3"), id("lr3-rerun"));
  EXPECT_TRUE(same.identical);
  EXPECT_EQ(same.common_steps, 4);

  CurveComparison drift = compare_loss_curves(db, id("lr3"), id("lr3-drift"));
  EXPECT_FALSE(drift.identical);
  EXPECT_EQ(drift.first_difference, 3);
  EXPECT_EQ(drift.common_steps, 2);
  EXPECT_EQ(*drift.loss_a, 2.1);
  EXPECT_EQ(*drift.loss_b, std::nextafter(2.1, 3.0));

  CurveComparison shorter = compare_loss_curves(db, id("lr3"), id("lr3-short"));
  EXPECT_FALSE(shorter.identical);
  EXPECT_EQ(shorter.first_difference, 4);
  EXPECT_EQ(*shorter.loss_a, 1.5);
  EXPECT_FALSE(shorter.loss_b.has_value());

  const std::string report = compare_report(db, match_runs(db, {"lr1", "lr3*"}));
  EXPECT_NE(report.find("lr3 and lr3-rerun (config bbbb): loss curves identical over 4 steps"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("lr3 and lr3-drift (config bbbb): loss curves first differ at step 3 "
                        "(2.1 vs 2.1000000000000005), after 2 identical steps"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("lr1 and"), std::string::npos) << report;  // no other run has its hash
  EXPECT_NE(report.find("optimizer.lr"), std::string::npos) << report;
  EXPECT_NE(report.find("model.n_layer"), std::string::npos) << report;
  EXPECT_EQ(report.find("run.name"), std::string::npos) << report;
  EXPECT_EQ(report.find("optimizer.type"), std::string::npos) << report;  // the same in all
}

TEST_F(RunHistory, ExportWritesMetricsThenEvalsExactly) {
  HistoryDb db(db_path());
  RunRecord drift = find_run_record(db, "lr3");
  std::istringstream csv(export_run(db, drift, "csv"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(csv, line);)
    lines.push_back(line);
  ASSERT_EQ(lines.size(), 1u + 4 + 2);
  EXPECT_EQ(lines[0],
            "run,kind,step,loss,lr,grad_norm,tokens_per_sec,dt_ms,tokens_seen,split,checkpoint,"
            "perplexity");
  EXPECT_EQ(lines[1], "lr3,metric,1,4,0.003,0.5,10,250,1000,,,");
  EXPECT_EQ(lines[5], fmt::format("lr3,eval,2,1.9,,,,,,val,,{}", std::exp(1.9)));

  RunRecord exact = find_run_record(db, "lr3-drift");
  std::istringstream jsonl(export_run(db, exact, "jsonl"));
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(jsonl, line);)
    records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[2]["kind"], "metric");
  EXPECT_EQ(records[2]["step"], 3);
  EXPECT_EQ(records[2]["loss"].get<double>(), std::nextafter(2.1, 3.0));  // round-trips exactly
  EXPECT_EQ(records[2]["tokens_seen"], 3000);

  std::istringstream evals(export_run(db, find_run_record(db, "lr1"), "jsonl"));
  std::string last;
  for (std::string line; std::getline(evals, line);)
    last = line;
  auto eval = nlohmann::json::parse(last);
  EXPECT_EQ(eval["kind"], "eval");
  EXPECT_EQ(eval["split"], "val");
  EXPECT_EQ(eval["loss"].get<double>(), 2.2);
}

TEST_F(RunHistory, RemoveDeletesRowsAndTheRunsOwnFolderButNotARunBeingTrained) {
  const RunPaths made = add_marked_run("m");
  testing::write_text(made.snapshot("step_000004") + "/model.bin", "weights");
  const std::string db_file = db_path();
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& w) { warnings.push_back(w); };
  {
    HistoryDb db(db_file);
    RunRecord r = find_run_record(db, "m");
    EXPECT_EQ(run_folder(r), made.folder());
    {
      FileLock training(made.lock(), "busy");
      EXPECT_NE(error_of([&] { remove_run(db, r, warn); }).find("being trained"),
                std::string::npos);
    }
    EXPECT_EQ(testing::scalar(db_file, "select count(*) from runs where name = 'm'"), "1");
    EXPECT_EQ(remove_run(db, r, warn), made.folder());
  }
  EXPECT_FALSE(std::filesystem::exists(made.folder()));
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(testing::scalar(db_file, "select count(*) from runs where name = 'm'"), "0");

  // A folder whose marker names another run, and the folder of a run made before markers
  // (runs/lr1, which FakeRuns makes as such), are left as they are, each with a warning.
  const RunPaths other = add_marked_run("o");
  write_run_marker(other, new_run_uuid(), db_file);
  const std::string legacy_file = dir_ / "runs/lr1/snapshots/step_000004/model.bin";
  testing::write_text(legacy_file, "weights");
  HistoryDb db(db_file);
  EXPECT_EQ(remove_run(db, find_run_record(db, "o"), warn), "");
  EXPECT_EQ(remove_run(db, find_run_record(db, "lr1"), warn), "");
  EXPECT_TRUE(std::filesystem::exists(other.marker()));
  EXPECT_EQ(testing::read_file(legacy_file), "weights");
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("does not carry run 'o''s marker"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("made before Kiln marked run folders"), std::string::npos)
      << warnings[1];
  EXPECT_EQ(testing::scalar(db_file, "select count(*) from runs where name in ('o', 'lr1')"), "0");
  EXPECT_EQ(testing::scalar(db_file, "select count(*) from metrics where run_id = 1"), "0");
  EXPECT_EQ(testing::scalar(db_file, "select count(*) from evals where run_id = 1"), "0");

  // A sweep member's folder is nested in its sweep's, which goes with the last member.
  const RunPaths one = add_marked_run("sw/lr=1"), two = add_marked_run("sw/lr=2");
  testing::write_text(one.console_log(), "log");
  testing::write_text(two.console_log(), "log");
  EXPECT_EQ(remove_run(db, find_run_record(db, "sw/lr=1"), warn), one.folder());
  EXPECT_TRUE(std::filesystem::exists(two.console_log()));
  remove_run(db, find_run_record(db, "sw/lr=2"), warn);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "runs/sw"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "runs"));
  RunRecord escape = find_run_record(db, "lr3");
  escape.name = "../lr3";
  EXPECT_EQ(run_folder(escape), "");
}

TEST_F(RunHistory, ShowListsIdentityMetricsEvalsAndConfig) {
  {
    RunStore store(db_path());
    store.add_snapshot(2, 4, "step_000004", dir_ / "runs/lr3/snapshots/step_000004");
    store.reopen_run(2, 4, "train.steps: 4 -> 8", config({"lr3", 3e-3, 4, "bbbb", {}, {}}), "bbbb",
                     8, /*world_size=*/2);
    store.finish_run(2, "completed");
  }
  HistoryDb db(db_path());
  EXPECT_EQ(find_run_record(db, "lr3").world_size, 2);  // made at 1, resumed at 2
  const std::string text = describe_run(db, find_run_record(db, "lr3"));
  for (const char* expect :
       {"run lr3 (id 2): completed", "git commit   abc123", "host         host",
        "config hash  bbbb", "best loss    1.500000 at step 4", "best val     1.700000 at step 4",
        "step 4/8 | loss 1.500000", "evals\n", "step_000004", "train.steps: 4 -> 8", "[model]",
        "  n_layer = 4"}) {
    EXPECT_NE(text.find(expect), std::string::npos) << expect << "\n" << text;
  }
}

TEST_F(RunHistory, SweepsMatchWhenTheColumnExistsAndAreEmptyWhenNot) {
  {
    HistoryDb db(db_path());
    if (!db.columns().sweep) GTEST_SKIP() << "this run store has no sweep column yet";
  }
  sqlite3* raw = nullptr;
  sqlite3_open(db_path().c_str(), &raw);
  sqlite3_exec(raw, "update runs set sweep = 'lrs' where name like 'lr3%'", nullptr, nullptr,
               nullptr);
  sqlite3_close(raw);
  {
    HistoryDb db(db_path());
    EXPECT_EQ(match_runs(db, {"lrs"}).size(), 4u);
    EXPECT_EQ(match_runs(db, {"lr1", "lr3", "lr?"}).size(), 2u);  // each run once
    EXPECT_EQ(where("sweep = lrs").size(), 4u);
    EXPECT_NE(error_of([&] { match_runs(db, {"zzz*"}); }).find("'zzz*' is no run name"),
              std::string::npos);
  }
  // An older store, before the sweep runner's migration: no column, the sweep shows empty.
  sqlite3_open(db_path().c_str(), &raw);
  sqlite3_exec(raw, "drop index if exists runs_by_sweep; alter table runs drop column sweep",
               nullptr, nullptr, nullptr);
  sqlite3_close(raw);
  HistoryDb db(db_path());
  EXPECT_FALSE(db.columns().sweep);
  EXPECT_EQ(where("sweep = lrs").size(), 0u);
  EXPECT_EQ(find_run_record(db, "lr3").sweep, "");
}

TEST_F(RunHistory, TicksAreNiceNumbers) {
  EXPECT_EQ(linear_ticks(1, 30, 7), std::vector<double>({0, 5, 10, 15, 20, 25, 30}));
  EXPECT_EQ(linear_ticks(2.2, 4.2, 7), std::vector<double>({2, 2.5, 3, 3.5, 4, 4.5}));
  EXPECT_EQ(log_ticks(1e-5, 3e-3), std::vector<double>({1e-5, 1e-4, 1e-3}));
  EXPECT_EQ(log_ticks(1.5, 9.5), std::vector<double>({2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(log_ticks(3e-4, 1.1e-2), std::vector<double>({5e-4, 1e-3, 2e-3, 5e-3, 1e-2}));
  EXPECT_EQ(log_ticks(2.1, 3.9), std::vector<double>({2.5, 3, 3.5}));
  EXPECT_EQ(tick_label(12500), "12.5k");
  EXPECT_EQ(tick_label(2e6), "2M");
  EXPECT_EQ(tick_label(0.1 * 3), "0.3");
  EXPECT_EQ(tick_label(5e-5), "5e-5");
  EXPECT_EQ(moving_average({1, 2, 3, 4}, 2), std::vector<double>({1, 1.5, 2.5, 3.5}));
}

TEST_F(RunHistory, PlotHasLegendTicksAxisTitlesAndOneLinePerRun) {
  HistoryDb db(db_path());
  auto runs = match_runs(db, {"lr1", "lr3"});
  const std::string svg = plot_runs(db, runs, CurveRequest{"loss", "step", 1, false});
  for (const char* expect :
       {"<svg xmlns=\"http://www.w3.org/2000/svg\"", ">lr1</text>", ">lr3</text>",
        ">optimizer step</text>", ">training loss (nats)</text>", ">1.5</text>", ">4</text>",
        "stroke=\"#1f77b4\"", "stroke=\"#ff7f0e\""}) {
    EXPECT_NE(svg.find(expect), std::string::npos) << expect;
  }
  size_t lines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1))
    ++lines;
  EXPECT_EQ(lines, 2u);

  const std::string long_name(60, 'n');
  const std::string cut = render_svg({{long_name, {1, 2}, {3, 4}}}, PlotStyle{});
  EXPECT_EQ(cut.find(long_name), std::string::npos);
  EXPECT_NE(cut.find(std::string(39, 'n') + "\u2026</text>"), std::string::npos);

  const std::string log = plot_runs(db, runs, CurveRequest{"lr", "tokens", 2, true});
  EXPECT_NE(log.find(">0.001</text>"), std::string::npos);
  EXPECT_NE(log.find(">tokens seen</text>"), std::string::npos);
  const std::string val = plot_runs(db, match_runs(db, {"lr1", "lr3-drift"}),
                                    CurveRequest{"val_loss", "time", 1, false});
  EXPECT_NE(val.find(">lr3-drift (no data)</text>"), std::string::npos);
  EXPECT_NE(error_of([&] {
              plot_runs(db, match_runs(db, {"lr3-drift"}), {"val_loss", "step", 1, false});
            }).find("no run given has a val_loss value"),
            std::string::npos);
}

TEST_F(RunHistory, ReportIsOneSelfContainedPage) {
  HistoryDb db(db_path());
  const std::string html = render_report(db, match_runs(db, {"lr*"}), "lr*");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* expect : {"<style>", "<h2>Runs</h2>", "lr3-rerun", "optimizer.lr",
                             "<h2>Training loss</h2>\n<svg", "<h2>Validation loss</h2>\n<svg"}) {
    EXPECT_NE(html.find(expect), std::string::npos) << expect;
  }
  for (const char* external : {"<script", "<link", "src=", "https://"})
    EXPECT_EQ(html.find(external), std::string::npos) << external;
}

}  // namespace
}  // namespace kiln
