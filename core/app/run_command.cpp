#include "core/app/run_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/config/canonical.h"
#include "core/config/toml_text.h"
#include "core/store/run_paths.h"
#include "core/store/run_store.h"
#include "core/train/assemble.h"
#include "core/train/session.h"
#include "core/util/build_info.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// Keys a resume may change: they alter how long the run goes and what it records, not the
// model, the data or the update rule, so the snapshot still describes the same run.
const char* const kResumableKeys[] = {"train.steps", "train.log_every",  "eval.every",
                                      "eval.steps",  "checkpoint.every", "checkpoint.keep",
                                      "run.threads", "run.device",       "train.on_nonfinite"};

std::string default_run_name(const std::string& experiment) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  return std::filesystem::path(experiment).stem().string() + "-" + stamp;
}

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

void set_run_name(ResolvedConfig& config, const std::string& name) {
  for (auto& section : config.sections) {
    if (section.name == "run") section.params.set("name", name);
  }
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
  auto a = flatten_config(before.to_toml()), b = flatten_config(after.to_toml());
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
  const char* count = std::getenv("TORCHELASTIC_RESTART_COUNT");
  return count && std::atoi(count) > 0;
}

// Held by the process training the run, for as long as it trains.
std::unique_ptr<FileLock> lock_run(const RunPaths& paths) {
  return std::make_unique<FileLock>(
      paths.lock(), fmt::format("run '{}' is being trained by another kiln process right now: "
                                "wait for it, or stop it first",
                                paths.name()));
}

// Rank 0 of a new run: refuses a name in use unless `restart`, which deletes the old run's rows
// and snapshots. Returns the new run's id.
int64_t create_run_row(RunStore& store, const AssembledRun& run, const RunPaths& paths,
                       bool restart) {
  const std::string& name = paths.name();
  if (auto existing = store.find_run(name)) {
    if (!restart && existing->status != "completed") {
      throw UserError(
          fmt::format("run '{}' already exists and is {}: continue it with `kiln "
                      "resume {}`, or start it afresh with --restart",
                      name, existing->status, name));
    }
    if (!restart) {
      throw UserError(
          fmt::format("a run named '{}' already exists (completed) in '{}': pick "
                      "another --name, or replace it with --restart",
                      name, store.path()));
    }
    store.delete_run(existing->id);
    std::filesystem::remove_all(paths.snapshots());
  }
  const ResolvedConfig& config = run.config;
  return store.create_run(NewRun{name, config.experiment, config.to_toml(), config.hash(),
                                 run.options.seed, run.parallel->world_size(), run.train.steps,
                                 build_git_commit(), host_name(), run.options.sweep});
}

// Restores the latest intact snapshot, if any; returns its step (0 without one).
int64_t restore_latest(Session& session, const RunPaths& paths, const AssembledRun& run,
                       bool main_rank) {
  auto say = [&](const std::string& line) {
    if (main_rank) session.console().line(line);
  };
  if (list_snapshots(paths.snapshots()).empty()) {
    say("no snapshot yet: the run starts again from step 0");
    return 0;
  }
  SnapshotRef latest = select_snapshot(paths.snapshots(), "latest",
                                       [&](const std::string& w) { say("warning: " + w); });
  session.restore(latest);
  if (latest.step >= run.train.steps) {
    throw UserError(
        fmt::format("run '{}' already has a snapshot at step {} of {}: raise "
                    "train.steps with --set to train further",
                    paths.name(), latest.step, run.train.steps));
  }
  return latest.step;
}

}  // namespace

SessionOutcome run_experiment(ResolvedConfig config, bool restart) {
  std::string name = run_options(config).name;
  if (name.empty()) name = default_run_name(config.experiment);
  RunPaths paths(run_options(config).out_dir, name);  // checks the name
  set_run_name(config, name);
  if (restarted_worker() && !restart) {
    // Decided before assembly, whose rendezvous every rank passes before rank 0 can create the
    // run: so all ranks see the same store and take the same branch.
    std::optional<RunRecord> existing = RunStore(run_options(config).db).find_run(name);
    if (existing && existing->status != "completed") {
      return resume_run(run_options(config).db, name, {});
    }
  }

  AssembledRun run = assemble(config);
  if (run.parallel->rank() != 0) return Session(run, paths, nullptr, 0).train();
  RunStore store(run.options.db);
  auto lock = lock_run(paths);
  const int64_t run_id = create_run_row(store, run, paths, restart);
  Session session(run, paths, &store, run_id);
  session.print_header();
  return session.train();
}

SessionOutcome resume_run(const std::string& db, const std::string& name_or_id,
                          const std::vector<std::string>& overrides) {
  if (!std::filesystem::exists(db)) {
    throw UserError(fmt::format("no run store at '{}': pass the --db that `kiln run` used", db));
  }
  const RunRecord record = RunStore(db).require_run(name_or_id);
  if (record.status == "completed" && overrides.empty()) {
    throw UserError(
        fmt::format("run '{}' is already completed: to train it further, resume "
                    "with --set train.steps=N",
                    record.name));
  }
  std::vector<std::string> changes;
  ResolvedConfig config = resumed_config(record, overrides, changes);

  AssembledRun run = assemble(config);
  RunPaths paths(run.options.out_dir, record.name);
  const bool main_rank = run.parallel->rank() == 0;
  std::unique_ptr<RunStore> store = main_rank ? std::make_unique<RunStore>(db) : nullptr;
  std::unique_ptr<FileLock> lock = main_rank ? lock_run(paths) : nullptr;
  Session session(run, paths, store.get(), record.id);
  const int64_t from_step = restore_latest(session, paths, run, main_rank);
  if (store) {
    store->reopen_run(record.id, from_step, join(changes, "; "), config.to_toml(), config.hash());
  }
  for (const auto& change : changes) {
    if (main_rank) session.console().line("resume changes " + change);
  }
  session.print_header();
  return session.train();
}

}  // namespace kiln
