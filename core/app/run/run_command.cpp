#include "core/app/run/run_command.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/api/optimizer.h"
#include "core/app/run/new_run.h"
#include "core/app/run/pause_and_probe.h"
#include "core/app/run/resume_checks.h"
#include "core/config/canonical.h"
#include "core/config/toml_text.h"
#include "core/distributed/distributed.h"
#include "core/store/history/queries.h"
#include "core/store/runs/inputs.h"
#include "core/store/runs/output_guard.h"
#include "core/store/runs/paths.h"
#include "core/store/runs/writer.h"
#include "core/store/tensorboard/run_log.h"
#include "core/train/assemble.h"
#include "core/train/session.h"
#include "core/train/step_batch.h"
#include "core/util/env.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// Keys a resume may change: they alter how long the run goes and what it records, not the
// model, the data or the update rule, so the snapshot still describes the same run.
const char* const kResumableKeys[] = {
    "train.steps",        "train.log_every",     "eval.every",          "eval.steps",
    "checkpoint.every",   "checkpoint.keep",     "run.threads",         "run.device",
    "train.on_nonfinite", "metrics.tensorboard", "schedule.total_steps"};

void set_option(ResolvedConfig& config, const std::string& section_name, const std::string& key,
                const std::string& value) {
  for (auto& section : config.sections) {
    if (section.name == section_name) section.params.set(key, value);
  }
}

// Stored absolute, as run.out_dir is (an unhashed key too): a resume from another directory
// writes to the same folder.
void make_tensorboard_absolute(ResolvedConfig& config) {
  const std::string dir = metrics_options(config).tensorboard;
  if (!dir.empty()) set_option(config, "metrics", "tensorboard", absolute_path(dir));
}

// Before the run's row changes: a folder that cannot take event files is refused up front.
void check_tensorboard(const ResolvedConfig& config, const RunPaths& paths) {
  const std::string& dir = metrics_options(config).tensorboard;
  check_tensorboard_dir(dir, "metrics.tensorboard", run_options(config).db);
  // A new run's folder carries no marker yet, and a resumed one's does: one rule for both.
  refuse_output_inside(dir, paths.folder(), "the run's own folder, which `kiln runs rm` deletes",
                       "metrics.tensorboard");
}

// Snapshots are whole whatever the strategy, so a run may go on with another one (the global
// batch stays train.batch_tokens; a strategy that cannot keep it says so).
bool resumable(const std::string& key) {
  return key.rfind("parallel.", 0) == 0 ||
         std::find(std::begin(kResumableKeys), std::end(kResumableKeys), key) !=
             std::end(kResumableKeys);
}

// "key: old -> new" for every key that differs; `refused` gets those a resume may not change.
std::vector<std::string> config_changes(const ResolvedConfig& before, const ResolvedConfig& after,
                                        std::vector<std::string>& refused) {
  auto a = before.flat(), b = after.flat();
  std::vector<std::string> keys;
  for (const auto& [k, _] : a)
    keys.push_back(k);
  for (const auto& [k, _] : b) {
    if (!a.count(k)) keys.push_back(k);
  }
  std::vector<std::string> changes;
  for (const auto& key : keys) {
    const std::string old_value = a.count(key) ? a[key] : "(none)";
    const std::string new_value = b.count(key) ? b[key] : "(none)";
    if (old_value == new_value) continue;
    changes.push_back(fmt::format("{}: {} -> {}", key, old_value, new_value));
    if (!resumable(key)) refused.push_back(key);
  }
  return changes;
}

// The stored config with the sections whose plugin `overrides` switch (--set parallel.type=single)
// left out: their stored keys belong to the old plugin, and the new one starts from its defaults.
std::string without_switched_sections(const std::string& stored_toml, const ResolvedConfig& stored,
                                      const std::vector<std::string>& overrides,
                                      const std::string& source) {
  toml::table table = parse_toml(stored_toml, source);
  for (const auto& assignment : overrides) {
    const auto eq = assignment.find('=');
    const auto dot = assignment.find('.');
    if (eq == std::string::npos || dot > eq || assignment.substr(dot + 1, eq - dot - 1) != "type")
      continue;
    const std::string section = assignment.substr(0, dot);
    std::string type = assignment.substr(eq + 1);
    if (type.size() >= 2 && (type.front() == '"' || type.front() == '\'')) {
      type = type.substr(1, type.size() - 2);
    }
    if (table.contains(section) && stored.type(section) != type) table.erase(section);
  }
  std::ostringstream out;
  out << table;
  return out.str();
}

// The stored config of `record` with `overrides`; `changes` gets what they change. A UserError
// when they change a key a resume may not.
ResolvedConfig resumed_config(const RunRecord& record, const std::vector<std::string>& overrides,
                              std::vector<std::string>& changes) {
  const std::string source = fmt::format("run '{}' (stored config)", record.name);
  ResolvedConfig stored = load_config_text(record.config, source, {});
  ResolvedConfig config = load_config_text(
      without_switched_sections(record.config, stored, overrides, source), source, overrides);
  config.experiment = stored.experiment = record.name;
  make_tensorboard_absolute(config);
  std::vector<std::string> refused;
  changes = config_changes(stored, config, refused);
  if (!refused.empty()) {
    throw UserError(
        fmt::format("resume cannot change {}: they alter the model, data or "
                    "optimisation the snapshot was taken with; start a new run "
                    "instead (resumable: {})",
                    fmt::join(refused, ", "), fmt::join(kResumableKeys, ", ")));
  }
  return config;
}

// A worker that torchrun or kiln launch started again after a failure continues its run.
bool restarted_worker() {
  return env_integer("TORCHELASTIC_RESTART_COUNT", 0, 0, INT32_MAX) > 0;
}

// Held by the process training the run, for as long as it trains.
std::unique_ptr<FileLock> lock_run(const RunPaths& paths) {
  return std::make_unique<FileLock>(
      paths.lock(), fmt::format("run '{}' is being trained by another kiln process right now: "
                                "wait for it, or stop it first",
                                paths.name()));
}

// Restores the run's own snapshot `which` ("latest": the latest intact one, else its best; "best";
// a step), if it has any; returns its step (0 without one). A run whose store lists snapshots
// none of which is there is refused: starting it again from step 0 would overwrite the steps
// those snapshots hold.
int64_t restore_snapshot(Session& session, const RunPaths& paths, const SnapshotOwner& owner,
                         const AssembledRun& run, bool main_rank, const std::string& which) {
  auto say = [&](const std::string& line) {
    if (main_rank) session.console().line(line);
  };
  // Rank 0 holds the run's lock, so no snapshot is being written: a .tmp is a killed write's.
  for (const auto& tmp :
       main_rank ? remove_unfinished_snapshots(paths.snapshots()) : std::vector<std::string>{}) {
    say(fmt::format("removed {}: a snapshot its writer did not finish", tmp));
  }
  const RunSnapshots snapshots = owned_snapshots(paths.snapshots(), owner);
  auto warn = [&](const std::string& w) { say("warning: " + w); };
  if (snapshots.own.empty()) {
    if (!owner.recorded.empty()) {
      throw UserError(fmt::format(
          "run '{}' has snapshots in its run store ({}) but none of them in '{}'{}: resume it "
          "where they are (a run made before Kiln stored absolute folders resumes from the "
          "directory it was started in), or start it afresh with `kiln run ... --restart`",
          paths.name(), join(owner.recorded, ", "), paths.snapshots(),
          snapshots.foreign.empty() ? "" : " (" + join(snapshots.foreign, "; ") + ")"));
    }
    for (const auto& line : snapshots.foreign)
      warn(line);
    say("no snapshot yet: the run starts again from step 0");
    return 0;
  }
  SnapshotRef picked = select_snapshot(snapshots, paths.snapshots(), which, warn);
  session.restore(picked);
  if (picked.step >= run.train.steps) {
    throw UserError(
        fmt::format("run '{}' already has a snapshot at step {} of {}: raise "
                    "train.steps with --set to train further",
                    paths.name(), picked.step, run.train.steps));
  }
  if (which != "latest") say(fmt::format("resuming from {} (step {})", picked.label, picked.step));
  return picked.step;
}

}  // namespace

SessionOutcome run_experiment(ResolvedConfig config, bool restart, int64_t until,
                              int64_t probe_cooldown) {
  std::string name = run_options(config).name;
  if (name.empty()) name = default_run_name(config.experiment);
  check_run_name(name);
  set_option(config, "run", "name", name);
  // Stored absolute (both unhashed keys): every later command finds the same store and folder,
  // whatever directory it runs in.
  set_option(config, "run", "out_dir", absolute_path(run_options(config).out_dir));
  set_option(config, "run", "db", store_location(run_options(config).db));
  make_tensorboard_absolute(config);
  if (restarted_worker() && !restart) {
    // Decided before assembly, whose rendezvous every rank passes before rank 0 can create the
    // run: so all ranks see the same store and take the same branch.
    std::optional<RunRecord> existing = RunStore(run_options(config).db).find_run(name);
    if (existing && existing->status != "completed") {
      return resume_run(run_options(config).db, name, {}, ResumeOptions{});
    }
  }

  AssembledRun run = assemble(config);
  if (until > 0) check_pause_step(until, 0, run.train.steps);
  check_probe(run, until, probe_cooldown);
  // Rank 0's: every rank writes its snapshot files into the run's one folder.
  const std::string uuid = run.parallel->broadcast_bytes(new_identity(run.options.out_dir, name));
  const RunPaths paths = RunPaths::for_new_run(run.options.out_dir, name, uuid);
  const SnapshotOwner owner{uuid, {config.hash()}, /*legacy=*/false, {}};
  // Other ranks write no files: rank 0's identity and folder are the run's.
  if (run.parallel->rank() != 0) {
    Session session(run, paths, owner, nullptr, 0);
    if (until > 0) session.pause_after(until);
    return train_then_probe(session, probe_cooldown);
  }
  check_tensorboard(config, paths);
  warn_of_random_base(run);
  RunStore store(run.options.db);
  const std::vector<std::string> notes = make_way(store, name, restart);
  auto lock = lock_run(paths);
  const int64_t run_id = create_run_row(store, run, paths, uuid);
  Session session(run, paths, owner, &store, run_id);
  if (until > 0) session.pause_after(until);
  for (const auto& note : notes)
    session.console().line(note);
  session.print_header();
  return train_then_probe(session, probe_cooldown);
}

SessionOutcome resume_run(const std::string& db, const std::string& name_or_id,
                          const std::vector<std::string>& overrides, const ResumeOptions& options) {
  if (!store_may_exist(db)) {
    fail_no_store(db, "pass the --db that `kiln run` used");
  }
  auto store = std::make_unique<RunStore>(db);
  const RunRecord record = store->require_run(name_or_id);
  if (record.status == "completed" && overrides.empty()) {
    throw UserError(
        fmt::format("run '{}' is already completed: to train it further, resume "
                    "with --set train.steps=N",
                    record.name));
  }
  const ResolvedConfig stored =
      load_config_text(record.config, fmt::format("run '{}' (stored config)", record.name), {});
  std::vector<std::string> settings = overrides;
  if (options.schedule == ScheduleOnResume::kKeep) {
    settings.push_back(
        fmt::format("schedule.total_steps={}", schedule_span(stored, train_options(stored))));
  }
  std::vector<std::string> changes;
  ResolvedConfig config = resumed_config(record, settings, changes);
  const std::vector<RunInput> inputs =
      check_inputs(store->connection(), record, config, options.allow_data_change, changes);

  const RunPaths paths = require_paths(record);
  // The lock first, before anything is assembled: a second resume of a run that is training (a
  // killed sweep's member, resumed again by its rerun) is refused at once, not after it built the
  // model. Rank 0 holds it; a rank knows its number from the environment before its group exists.
  std::unique_ptr<FileLock> lock = read_world_env().rank == 0 ? lock_run(paths) : nullptr;
  AssembledRun run = assemble(config);
  const SnapshotOwner owner = snapshot_owner(store->connection(), record, config.hash());
  const bool main_rank = run.parallel->rank() == 0;
  if (main_rank) check_tensorboard(config, paths);
  if (!main_rank) store.reset();  // only rank 0 records
  Session session(run, paths, owner, store.get(), record.id);
  const int64_t from_step =
      restore_snapshot(session, paths, owner, run, main_rank, options.checkpoint);
  const std::string lr_line = check_schedule_change(stored, run, from_step, options.schedule);
  const bool probe_only = options.probe_cooldown > 0 && options.until == from_step;
  if (options.until > 0) {
    if (!probe_only) check_pause_step(options.until, from_step, run.train.steps);
    session.pause_after(options.until);
  }
  check_probe(run, options.until, options.probe_cooldown);
  const int world = run.parallel->world_size();
  if (world != record.world_size) {
    const WorldShape shape{run.parallel->data_world(), run.parallel->micro_batches()};
    changes.push_back(world_change(step_batch(stored, static_cast<int>(record.world_size)),
                                   step_batch(config, run.train, world, shape)));
  }
  if (store) {
    store->reopen_run(record.id, from_step, join(changes, "; "), config.to_toml(), config.hash(),
                      run.train.steps, world,
                      RunProvenance{{}, key_source_lines(config, /*all=*/false), inputs});
  }
  for (const auto& change : changes) {
    if (main_rank) session.console().line("resume changes " + change);
  }
  if (main_rank && !lr_line.empty()) session.console().line(lr_line);
  session.print_header();
  if (probe_only)
    return probe_alone(session, store.get(), record, from_step, options.probe_cooldown);
  return train_then_probe(session, options.probe_cooldown);
}

}  // namespace kiln
