#include "tools/kiln/runs_command.h"

#include <unistd.h>

#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/app/presentation/plot_svg.h"
#include "core/app/presentation/provenance.h"
#include "core/app/presentation/report.h"
#include "core/app/presentation/run_tables.h"
#include "core/app/presentation/seed_groups.h"
#include "core/app/presentation/tensorboard_export.h"
#include "core/config/schema.h"
#include "core/store/history/import.h"
#include "core/store/history/removal.h"
#include "core/store/runs/output_guard.h"
#include "core/store/runs/task_scores.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"
#include "tools/kiln/cli_checks.h"

namespace kiln {

struct RunsCli {
  CLI::App* runs = nullptr;
  CLI::App* list = nullptr;
  CLI::App* show = nullptr;
  CLI::App* compare = nullptr;
  CLI::App* diff = nullptr;
  CLI::App* exporter = nullptr;
  CLI::App* rm = nullptr;
  CLI::App* plot = nullptr;
  CLI::App* report = nullptr;
  CLI::App* import = nullptr;

  std::string db = default_run_db();
  ListQuery query;
  std::string list_format = "table";
  std::string export_format = "csv";
  std::string run;                // show
  std::vector<std::string> refs;  // compare, diff, export, rm, plot, report
  std::string output;
  bool yes = false;
  std::string source;   // import
  bool rename = false;  // import
  CurveRequest curve;
  std::vector<std::string> group_by;  // compare: config keys, or auto
  GroupReportOptions grouped;         // compare --group-by
};

namespace {

// A note per task metric compared whose scores some of `runs` computed by older rules.
std::string older_rules_notes(HistoryDb& db, const std::vector<RunRecord>& runs,
                              const std::vector<std::string>& metrics) {
  std::vector<int64_t> ids;
  for (const RunRecord& run : runs)
    ids.push_back(run.id);
  std::set<std::string> tasks;
  for (const std::string& metric : metrics) {
    std::string task, name;
    if (split_task_metric(metric.substr(0, metric.find('@')), task, name)) tasks.insert(task);
  }
  std::string notes;
  for (const std::string& task : tasks) {
    const std::string note = older_rules_note(db.connection(), ids, task);
    if (!note.empty()) notes += note + "\n";
  }
  return notes;
}

void add_db_option(CLI::App* sub, RunsCli& cli) {
  sub->add_option("--db", cli.db, "run store")->capture_default_str();
}

void add_list(CLI::App* runs, RunsCli& cli) {
  cli.list = runs->add_subcommand("list", "runs with their summary, filtered and sorted");
  cli.list->add_option("--where", cli.query.where,
                       "filter, e.g. \"optimizer.lr < 1e-3 and status = completed\"");
  cli.list->add_option("--sort", cli.query.sort, "key to sort by; prefix '-' for descending")
      ->capture_default_str();
  cli.list->add_option("--limit", cli.query.limit, "at most N runs; 0 = all")->check(at_least(0));
  cli.list->add_option("--format", cli.list_format, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  add_db_option(cli.list, cli);
}

void add_show_export_rm(CLI::App* runs, RunsCli& cli) {
  cli.show = runs->add_subcommand("show", "one run: config, timing, metrics, evals, snapshots");
  cli.show->add_option("run", cli.run, "run name or id")->required();
  add_db_option(cli.show, cli);

  cli.exporter = runs->add_subcommand(
      "export", "a run's metrics and evals as csv or jsonl, or runs' as TensorBoard event files");
  cli.exporter
      ->add_option("runs", cli.refs,
                   "run name or id; for tensorboard, run names, ids, sweeps or name globs")
      ->required();
  cli.exporter->add_option("--format", cli.export_format, "csv, jsonl or tensorboard")
      ->check(CLI::IsMember({"csv", "jsonl", "tensorboard"}))
      ->capture_default_str();
  cli.exporter->add_option(
      "-o,--output", cli.output,
      "file to write, stdout when omitted; for tensorboard the folder (required)");
  add_db_option(cli.exporter, cli);

  cli.rm = runs->add_subcommand("rm", "delete runs: their rows and their own folders");
  cli.rm->add_option("runs", cli.refs, "run names or ids")->required();
  cli.rm->add_flag("-y,--yes", cli.yes, "do not ask for confirmation");
  add_db_option(cli.rm, cli);
}

void add_compare_plot(CLI::App* runs, RunsCli& cli) {
  cli.compare = runs->add_subcommand("compare", "runs side by side; are reruns bit-identical?");
  cli.compare->add_option("runs", cli.refs, "run names, ids, sweeps or name globs")->required();
  auto* grouped = cli.compare
                      ->add_option("--group-by", cli.group_by,
                                   "seeds as groups: config keys (a,b) that define a group, or "
                                   "auto (every key but run.seed and naming keys)")
                      ->delimiter(',');
  cli.compare
      ->add_option("--baseline", cli.grouped.baseline,
                   "the group the others are tested against: its label or key=value terms; "
                   "default the first")
      ->needs(grouped);
  cli.compare
      ->add_option("--metric", cli.grouped.metrics,
                   "also compare METRIC@step=S or METRIC@tokens=T (repeatable)")
      ->needs(grouped);
  add_db_option(cli.compare, cli);

  cli.diff = runs->add_subcommand("diff", "two runs' differing config keys, and their sources");
  cli.diff->add_option("runs", cli.refs, "two run names or ids")->required()->expected(2);
  add_db_option(cli.diff, cli);

  cli.plot = runs->add_subcommand("plot", "one metric of several runs as an .svg or .png");
  cli.plot->add_option("runs", cli.refs, "run names, ids, sweeps or name globs")->required();
  cli.plot
      ->add_option("--metric", cli.curve.metric,
                   "loss, val_loss, lr, grad_norm, tokens_per_sec, or a task's TASK.METRIC "
                   "(kjv_cloze.acc)")
      ->capture_default_str();
  cli.plot
      ->add_option("--x", cli.curve.x,
                   "step, tokens or time (seconds of step time; not with --group-by)")
      ->check(CLI::IsMember({"step", "tokens", "time"}))
      ->capture_default_str();
  cli.plot->add_option("--smooth", cli.curve.smooth, "moving average over K points")
      ->check(at_least(1))
      ->capture_default_str();
  cli.plot->add_flag("--log-y", cli.curve.log_y, "logarithmic y axis");
  auto* group_by = cli.plot
                       ->add_option("--group-by", cli.curve.group_by,
                                    "a mean curve per group of runs: config keys (a,b) or auto")
                       ->delimiter(',');
  cli.plot
      ->add_option("--band", cli.curve.band,
                   "around each group's mean: ci (95% CI of the mean) or minmax")
      ->check(CLI::IsMember({"ci", "minmax"}))
      ->needs(group_by)
      ->capture_default_str();
  cli.plot->add_option("-o,--output", cli.output, "curves.svg or curves.png")->required();
  add_db_option(cli.plot, cli);
}

void emit(const std::string& text, const std::string& path) {
  if (path.empty()) {
    std::cout << text << std::flush;
  } else {
    write_file_atomic(path, text);
  }
}

// Deleting is the one thing these commands cannot undo: without --yes a person confirms it.
bool confirmed(const std::vector<RunRecord>& runs) {
  std::vector<std::string> names;
  for (const auto& r : runs)
    names.push_back(r.name);
  if (!::isatty(STDIN_FILENO)) {
    throw UserError(fmt::format(
        "not deleting {}: stdin is not a terminal to confirm on: pass --yes to delete anyway",
        join(names, ", ")));
  }
  std::cerr << "kiln: delete " << runs.size() << " run(s) with their rows and folders?\n";
  for (const auto& r : runs) {
    const std::string folder = run_folder(r);
    std::cerr << fmt::format("  {} (id {}, {}, {} steps){}\n", r.name, r.id, r.status, r.steps,
                             folder.empty() ? "" : " and " + folder + "/");
  }
  std::cerr << "[y/N] " << std::flush;
  std::string answer;
  std::getline(std::cin, answer);
  return answer == "y" || answer == "Y" || answer == "yes";
}

int remove_command(HistoryDb& db, const RunsCli& cli) {
  std::vector<RunRecord> runs;
  for (const auto& ref : cli.refs)
    runs.push_back(find_run_record(db, ref));
  if (!cli.yes && !confirmed(runs)) {
    std::cerr << "kiln: nothing deleted\n";
    return kExitOk;
  }
  for (const auto& r : runs) {
    const std::string folder = remove_run(
        db, r, [](const std::string& w) { std::cerr << "kiln: warning: " << w << "\n"; });
    std::cout << fmt::format("removed run '{}' (id {}){}\n", r.name, r.id,
                             folder.empty() ? "" : " and " + folder + "/");
  }
  return kExitOk;
}

// csv and jsonl: one run, to a file or stdout; tensorboard: a folder of event files, one per run.
int export_command(HistoryDb& db, const RunsCli& cli) {
  if (cli.export_format == "tensorboard") {
    if (cli.output.empty()) {
      throw UserError(
          "--format tensorboard writes a folder of event files: name it with -o DIR (then "
          "`tensorboard --logdir DIR`)");
    }
    for (const auto& path : export_tensorboard(db, match_runs(db, cli.refs), cli.output))
      std::cout << fmt::format("wrote {}\n", path);
    return kExitOk;
  }
  if (cli.refs.size() > 1) {
    throw UserError(fmt::format(
        "--format {} exports one run at a time, not {} ({}): export them one by one, or all at "
        "once with --format tensorboard -o DIR",
        cli.export_format, cli.refs.size(), join(cli.refs, " ")));
  }
  emit(export_run(db, find_run_record(db, cli.refs[0]), cli.export_format), cli.output);
  return kExitOk;
}

// A store newer than this kiln is read as far as it understands it, and says so once.
void warn_if_newer(const HistoryDb& db) {
  if (!db.warning().empty()) std::cerr << "kiln: warning: " << db.warning() << "\n";
}

// Every run of cli.source into cli.db (made when missing), one line a run.
int import_command(const RunsCli& cli) {
  for (const auto& run : import_runs(cli.source, cli.db, cli.rename)) {
    if (!run.warning.empty()) std::cerr << "kiln: warning: " << run.warning << "\n";
    if (run.merged) {
      std::cout << fmt::format(
          "merged run '{}' into the same run '{}': {} new metrics rows, {} new evals\n", run.from,
          run.to, run.metrics, run.evals);
      continue;
    }
    std::cout << fmt::format("imported run '{}'{}: {} metrics rows, {} evals\n", run.from,
                             run.to == run.from ? "" : " as '" + run.to + "'", run.metrics,
                             run.evals);
  }
  return kExitOk;
}

int runs_command(const RunsCli& cli) {
  if (*cli.import) return import_command(cli);
  if (*cli.exporter || *cli.plot) check_output_path(cli.output, cli.db, "-o");
  HistoryDb db(cli.db);
  if (!*cli.rm) warn_if_newer(db);  // rm refuses such a store instead
  if (*cli.list) {
    std::cout << format_run_list(list_runs(db, cli.query), cli.list_format);
  } else if (*cli.show) {
    std::cout << describe_run(db, find_run_record(db, cli.run));
  } else if (*cli.compare) {
    auto runs = match_runs(db, cli.refs);
    if (runs.size() < 2) {
      throw UserError(fmt::format(
          "compare needs two runs or more, and '{}' names only '{}': add another run, a sweep "
          "or a glob of names",
          join(cli.refs, " "), runs[0].name));
    }
    if (!cli.group_by.empty()) std::cout << older_rules_notes(db, runs, cli.grouped.metrics);
    std::cout << (cli.group_by.empty()
                      ? compare_report(db, runs)
                      : grouped_report(db, group_runs(runs, cli.group_by), cli.grouped));
  } else if (*cli.diff) {
    std::cout << diff_report(db, find_run_record(db, cli.refs[0]),
                             find_run_record(db, cli.refs[1]));
  } else if (*cli.exporter) {
    return export_command(db, cli);
  } else if (*cli.rm) {
    return remove_command(db, cli);
  } else if (*cli.plot) {
    write_plot(plot_runs(db, match_runs(db, cli.refs), cli.curve), cli.output);
    std::cout << fmt::format("wrote {}\n", cli.output);
  }
  return kExitOk;
}

// After parsing: the exit code when `report` or a `runs` command was chosen, nothing otherwise.
std::optional<int> run_chosen(const RunsCli& cli) {
  if (*cli.report) {
    check_output_path(cli.output, cli.db, "-o");
    HistoryDb db(cli.db);
    warn_if_newer(db);
    write_file_atomic(cli.output, render_report(db, match_runs(db, cli.refs), join(cli.refs, " ")));
    std::cout << fmt::format("wrote {}\n", cli.output);
    return kExitOk;
  }
  if (*cli.runs) return runs_command(cli);
  return std::nullopt;
}

}  // namespace

ChosenCommand add_runs_commands(CLI::App& app) {
  auto cli = std::make_shared<RunsCli>();
  cli->runs =
      app.add_subcommand("runs", "run history: list, show, compare, diff, export, rm, plot");
  cli->runs->require_subcommand(1);
  add_list(cli->runs, *cli);
  add_show_export_rm(cli->runs, *cli);
  add_compare_plot(cli->runs, *cli);
  cli->import = cli->runs->add_subcommand(
      "import", "copy every run of another store (SQLite or PostgreSQL) into --db");
  cli->import->add_option("source", cli->source, "the store to copy: a path or postgresql:// URL")
      ->required();
  cli->import->add_flag("--rename", cli->rename, "import a run whose name is taken as NAME-2, ...");
  add_db_option(cli->import, *cli);

  cli->report = app.add_subcommand("report", "one self-contained HTML page about runs or sweeps");
  cli->report->add_option("runs", cli->refs, "run names, ids, sweeps or name globs")->required();
  cli->report->add_option("-o,--output", cli->output, "report.html")->required();
  add_db_option(cli->report, *cli);
  return [cli] { return run_chosen(*cli); };
}

}  // namespace kiln
