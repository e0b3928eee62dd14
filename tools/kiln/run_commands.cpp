#include "tools/kiln/run_commands.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/app/run/run_command.h"
#include "core/app/slurm/sweep.h"
#include "core/config/config.h"
#include "core/config/schema.h"
#include "core/util/error.h"
#include "core/util/stop_signal.h"
#include "tools/kiln/cli_checks.h"
#include "tools/kiln/slurm_options.h"

namespace kiln {

namespace {

struct RunArgs {
  std::string experiment, name, run_ref;
  std::string db = default_run_db();
  std::vector<std::string> overrides;
  bool restart = false;
  int64_t until = 0;           // kiln run --until (kiln resume's is in `resume`)
  int64_t probe_cooldown = 0;  // kiln run --probe-cooldown (likewise)
  ResumeOptions resume;
  std::string launcher = "local";  // kiln run --launcher
  SlurmOptions slurm;
  bool slurm_given = false;
};

int finish(const SessionOutcome& outcome) {
  if (outcome.status == "paused") {
    std::cout << fmt::format(
        "kiln: run '{}' paused after step {} (--until): `kiln resume {}` continues\n", outcome.name,
        outcome.steps_done, outcome.name);
  } else if (outcome.status == "interrupted") {
    std::cerr << fmt::format("kiln: run '{}' interrupted after step {}\n", outcome.name,
                             outcome.steps_done);
    return kExitInterrupted;
  }
  return kExitOk;
}

void print_line(const std::string& line) {
  std::cout << line << std::endl;
}

int run_command(const RunArgs& args) {
  std::vector<std::string> overrides = args.overrides;
  // Quoted, so that a name such as "nan", "42" or "true" stays a name and not a number.
  if (!args.name.empty()) overrides.push_back("run.name=" + quote_toml(args.name));
  if (args.launcher == "slurm") {
    if (args.restart || args.until > 0 || args.probe_cooldown > 0) {
      throw UserError(
          "--restart, --until and --probe-cooldown act on a run here: with --launcher slurm, "
          "give another --name, or cancel it with `kiln sweep cancel NAME`");
    }
    submit_run(args.experiment, overrides, args.slurm, print_line);
    return kExitOk;
  }
  if (args.slurm_given) {
    throw UserError(
        "--partition, --time, --nodes, --ntasks-per-node, --gpus-per-node, --cpus-per-task, "
        "--signal-seconds and --sbatch-arg are for --launcher slurm");
  }
  ResolvedConfig config = load_config(args.experiment, overrides);
  for (const auto& note : config.notes)
    std::cout << note << "\n";
  StopSignal stop(StopSignal::Second::kAbandon, StopSignal::Delivery::kPolled);
  return finish(run_experiment(std::move(config), args.restart, args.until, args.probe_cooldown));
}

int resume_command(const RunArgs& args) {
  StopSignal stop(StopSignal::Second::kAbandon, StopSignal::Delivery::kPolled);
  return finish(resume_run(args.db, args.run_ref, args.overrides, args.resume));
}

}  // namespace

ChosenCommand add_run_commands(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* run = app.add_subcommand("run", "train the experiment a TOML file describes");
  run->add_option("experiment", args->experiment, "experiment TOML file")->required();
  run->add_option("--set", args->overrides, "override a key: --set optimizer.lr=3e-3 (repeatable)");
  run->add_option("--name", args->name, "run name (same as --set run.name=NAME)");
  run->add_flag("--restart", args->restart, "replace a run of the same name, snapshots included");
  const char* until_help =
      "pause after this step, evaluated and snapshotted, with the schedule still planned over "
      "train.steps: `kiln resume` continues as if it had not stopped";
  run->add_option("--until", args->until, until_help)->check(at_least(1));
  const char* probe_help =
      "with --until: then train a branch this many steps more with a wsd schedule's decay "
      "ending there, and record its val loss as the run's probe at that step (an asha rung's "
      "score); the branch is thrown away";
  run->add_option("--probe-cooldown", args->probe_cooldown, probe_help)->check(at_least(1));
  run->add_option("--launcher", args->launcher,
                  "local: train here; slurm: submit it as one Slurm job and exit "
                  "(docs/slurm.md)")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  add_slurm_options(*run, args->slurm, /*array=*/false);

  CLI::App* resume = app.add_subcommand("resume", "continue a run from its latest intact snapshot");
  resume->add_option("run", args->run_ref, "run name or id")->required();
  resume->add_option("--set", args->overrides, "change steps, eval or checkpoint settings");
  resume->add_option("--db", args->db, "run store")->capture_default_str();
  CLI::Option* reschedule = resume->add_flag_function(
      "--reschedule", [args](int64_t) { args->resume.schedule = ScheduleOnResume::kReschedule; },
      "with a new train.steps, the schedule spans it from the resume step on (the lr may jump)");
  CLI::Option* keep = resume->add_flag_function(
      "--keep-schedule", [args](int64_t) { args->resume.schedule = ScheduleOnResume::kKeep; },
      "with a new train.steps, the schedule keeps its planned steps; added ones stay at its "
      "final lr");
  reschedule->excludes(keep);
  resume->add_option("--until", args->resume.until, until_help)->check(at_least(1));
  resume->add_option("--probe-cooldown", args->resume.probe_cooldown, probe_help)
      ->check(at_least(1));
  resume->add_flag("--allow-data-change", args->resume.allow_data_change,
                   "go on when the files the run reads differ from those it started with (the "
                   "resume records what changed)");
  resume
      ->add_option("--checkpoint", args->resume.checkpoint,
                   "the snapshot to continue from: latest (its best when it has only best "
                   "ones), best, or a step")
      ->capture_default_str();

  return [run, resume, args]() -> std::optional<int> {
    if (*run) {
      args->slurm_given = slurm_options_given(*run);
      return run_command(*args);
    }
    if (*resume) return resume_command(*args);
    return std::nullopt;
  };
}

}  // namespace kiln
