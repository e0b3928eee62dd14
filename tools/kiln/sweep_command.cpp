#include "tools/kiln/sweep_command.h"

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include "core/app/presentation/sweep_summary.h"
#include "core/app/slurm/sweep.h"
#include "core/app/slurm/task.h"
#include "core/app/slurm/worker.h"
#include "core/app/sweeps/asha_search.h"
#include "core/app/sweeps/best.h"
#include "core/app/sweeps/runner.h"
#include "core/app/sweeps/search_space.h"
#include "core/app/sweeps/spec.h"
#include "core/app/sweeps/spec_file.h"
#include "core/config/config.h"
#include "core/config/options.h"
#include "core/config/schema.h"
#include "core/store/history/reader.h"
#include "core/store/history/rung_ladder.h"
#include "core/store/runs/sweep_claims.h"
#include "core/util/error.h"
#include "tools/kiln/slurm_options.h"

namespace kiln {

namespace {

struct SweepArgs {
  std::string file, name, launcher = "local";
  std::vector<std::string> grid, zip, fixed;
  SweepOptions options;
  SlurmOptions slurm;
  bool jobs_given = false, slurm_given = false, sort_given = false;
  std::string sweep_name;                   // of status, cancel, resubmit, best and task
  std::string best_by = "best_val";         // best: a `kiln runs list --sort` key
  std::string store_db = default_run_db();  // KILN_DB, else runs/kiln.db
};

void print_line(const std::string& line) {
  std::cout << line << std::endl;
}

SweepSpec sweep_spec(const SweepArgs& args) {
  SweepSpec spec;
  if (is_sweep_file(args.file)) {
    spec = load_sweep_file(args.file);
  } else {
    spec.base = args.file;
    spec.name = std::filesystem::path(args.file).stem().string();
  }
  if (!args.name.empty()) spec.name = args.name;
  for (const auto& g : args.grid)
    spec.grid.push_back(parse_axis(g));
  for (const auto& z : args.zip)
    spec.zip.push_back(parse_axis(z));
  spec.fixed.insert(spec.fixed.end(), args.fixed.begin(), args.fixed.end());
  return spec;
}

int sweep_command(const SweepArgs& args) {
  if (args.file.empty()) {
    throw UserError(
        "kiln sweep needs a sweep file (or an experiment file with --grid), or one "
        "of status, cancel, resubmit NAME: see kiln sweep --help");
  }
  const bool slurm = args.launcher == "slurm";
  if (slurm && args.jobs_given) {
    throw UserError(
        "--jobs runs members on this machine: with --launcher slurm, --max-parallel "
        "says how many run at once");
  }
  if (!slurm && args.slurm_given) {
    throw UserError(
        "--partition, --time, --nodes, --ntasks-per-node, --gpus-per-node, --cpus-per-task, "
        "--max-parallel, --signal-seconds and --sbatch-arg are for --launcher slurm");
  }
  const SweepSpec spec = sweep_spec(args);
  if (slurm && spec.search.type == SweepSearch::Type::kAsha &&
      !(args.grid.empty() && args.zip.empty() && args.fixed.empty())) {
    throw UserError(
        "an asha sweep's Slurm workers read the sweep file: put --grid, --zip and --set values "
        "in it ([grid], [zip], [set])");
  }
  if (slurm && !args.options.dry_run) {
    submit_sweep(spec, args.slurm, args.options.db, print_line);
    return kExitOk;
  }
  SweepOptions options = args.options;
  // The search's metric orders the summary, unless --sort says otherwise.
  if (!args.sort_given && !spec.search.metric.empty()) options.sort = search_sort_key(spec.search);
  const SweepOutcome outcome = run_sweep(spec, options, print_line);
  if (!outcome.db.empty()) {
    print_sweep_report({outcome.db, spec.name, options.sort, declared_task_metrics(spec.search),
                        outcome.ladder, !outcome.interrupted},
                       print_line);
  }
  if (outcome.interrupted) return kExitInterrupted;
  return outcome.incomplete == 0 ? kExitOk : kExitSomeFailed;
}

// The sweep `status` and `best` mean: a sweep file's (its store: --db, else its base experiment's
// run.db), or a sweep's name (its store: --db).
struct NamedSweep {
  std::optional<SweepSpec> spec;  // when a file named it
  std::string name, db;
};

NamedSweep named_sweep(const SweepArgs& args, bool db_given) {
  if (!is_sweep_file(args.sweep_name)) return {std::nullopt, args.sweep_name, args.store_db};
  SweepSpec spec = load_sweep_file(args.sweep_name);
  const std::string db =
      db_given ? args.store_db : run_options(load_config(spec.base, spec.fixed)).db;
  const std::string name = spec.name;
  return {std::move(spec), name, db};
}

// `kiln sweep status NAME|FILE`: an asha search's ladder; a sweep submitted to Slurm, with
// Slurm's states; or the members of a sweep run here.
void sweep_status(const SweepArgs& args, bool db_given) {
  const NamedSweep sweep = named_sweep(args, db_given);
  if (sweep.spec && sweep.spec->search.type == SweepSearch::Type::kAsha) {
    const SearchNow now = search_now(*sweep.spec, sweep.db);
    print_line(search_status(sweep.db, sweep.name, now.ladder, now.running));
    return;
  }
  print_sweep_status(sweep.db, sweep.name, print_line);
}

// `kiln sweep best NAME|FILE`: by --by, else the search's own metric and mode (a file's, or the
// one an asha search's workers recorded in the store), else best_val. An asha search ranks by the
// metric at its last rung, as its ladder does (the shape its workers recorded); any other search
// by the metric's best value over each run.
int sweep_best(const SweepArgs& args, bool db_given, bool by_given) {
  const NamedSweep sweep = named_sweep(args, db_given);
  if (!store_may_exist(sweep.db)) {
    fail_no_store(sweep.db, "pass the --db the sweep ran with");
  }
  HistoryDb db(sweep.db);
  const std::optional<LadderShape> ladder = find_ladder_shape(db.connection(), sweep.name);
  std::optional<SweepSearch> search;
  if (sweep.spec && !sweep.spec->search.metric.empty()) search = sweep.spec->search;
  if (!sweep.spec && ladder) {
    search = SweepSearch{};
    search->metric = ladder->metric;
    search->maximize = ladder->maximize;
  }
  std::string by = args.best_by;
  std::vector<std::string> declared;
  if (search) {
    if (!by_given) by = ladder ? last_rung_sort_key(*ladder) : search_sort_key(*search);
    declared = declared_task_metrics(*search);
  }
  std::cout << best_member_toml(db, sweep.name, by, declared);
  return kExitOk;
}

// status, cancel, resubmit, and the hidden task: each takes the sweep's name and its run store.
CLI::App* add_follow_up(CLI::App& sweep, SweepArgs& args, const std::string& name,
                        const std::string& help) {
  CLI::App* sub = sweep.add_subcommand(name, help);
  sub->add_option("name", args.sweep_name, "the sweep's name (status and best: or its sweep file)")
      ->required();
  sub->add_option("--db", args.store_db, "the run store it was submitted to")
      ->capture_default_str();
  return sub;
}

}  // namespace

ChosenCommand add_sweep_command(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* sweep = app.add_subcommand(
      "sweep", "run a sweep of experiments: a grid or a random search (a sweep file, or --grid)");
  sweep->add_option("file", args->file, "sweep file, or an experiment file with --grid/--zip");
  sweep->add_option("--grid", args->grid,
                    "section.key=v1,v2,...: one axis of the product (repeatable)");
  sweep->add_option("--zip", args->zip,
                    "section.key=v1,v2,...: varied together with other --zip keys");
  sweep->add_option("--set", args->fixed, "section.key=value for every member");
  sweep->add_option("--name", args->name, "sweep name (default: the file's name)");
  sweep->add_option("--jobs", args->options.jobs, "members run at once, sharing the cores")
      ->capture_default_str();
  sweep->add_option("--db", args->options.db, "run store (default: the experiment's run.db)");
  sweep->add_option("--sort", args->options.sort, "summary order: a `kiln runs list` key")
      ->capture_default_str();
  sweep->add_flag("--dry-run", args->options.dry_run,
                  "check every member (assembled without training) and print them; run nothing");
  CLI::Option* rerun = sweep->add_flag_function(
      "--rerun-changed", [args](int64_t) { args->options.changed = SweepOptions::Changed::kRerun; },
      "members whose config changed since they ran train again as new runs (NAME:v2, ...)");
  CLI::Option* keep = sweep->add_flag_function(
      "--keep-old", [args](int64_t) { args->options.changed = SweepOptions::Changed::kKeepOld; },
      "members whose config changed since they ran keep what they ran");
  rerun->excludes(keep);
  sweep->add_option("--launcher", args->launcher, "local: child processes; slurm: a job array")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  add_slurm_options(*sweep, args->slurm, /*array=*/true);
  CLI::App* status = add_follow_up(*sweep, *args, "status", "each member's state and Slurm's");
  CLI::App* cancel = add_follow_up(*sweep, *args, "cancel", "scancel what is pending or running");
  CLI::App* resubmit =
      add_follow_up(*sweep, *args, "resubmit", "submit the members not completed again");
  CLI::App* best =
      add_follow_up(*sweep, *args, "best", "the best completed member's config, as TOML to extend");
  best->add_option("--by", args->best_by,
                   "a `kiln runs list --sort` key: best_val, final_loss, last(val_loss), "
                   "-max(TASK.METRIC), ... ('-' first: largest first); default: a sweep "
                   "file's metric, else best_val")
      ->capture_default_str();
  CLI::App* task = add_follow_up(*sweep, *args, "task", "");  // no help: hidden
  task->group("");
  CLI::App* work = add_follow_up(*sweep, *args, "work", "");  // a search's worker: hidden
  work->group("");

  return [=]() -> std::optional<int> {
    if (!*sweep) return std::nullopt;
    if (*status) sweep_status(*args, status->count("--db") > 0);
    if (*best) return sweep_best(*args, best->count("--db") > 0, best->count("--by") > 0);
    if (*cancel) cancel_sweep(args->store_db, args->sweep_name, print_line);
    if (*resubmit) resubmit_sweep(args->store_db, args->sweep_name, print_line);
    if (*task) return run_sweep_task(args->store_db, args->sweep_name, print_line);
    if (*work) return run_sweep_worker(args->store_db, args->sweep_name, print_line);
    if (*status || *cancel || *resubmit) return kExitOk;
    args->jobs_given = sweep->count("--jobs") > 0;
    args->sort_given = sweep->count("--sort") > 0;
    args->slurm_given = slurm_options_given(*sweep);
    return sweep_command(*args);
  };
}

}  // namespace kiln
