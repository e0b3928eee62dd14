#include "core/store/history/import.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <type_traits>

#include <fmt/format.h>

#include "core/store/db/location.h"
#include "core/store/history/queries.h"
#include "core/store/history/reader.h"
#include "core/store/runs/layer_metrics.h"
#include "core/store/runs/paths.h"
#include "core/store/runs/run_environment.h"
#include "core/store/runs/rung_probes.h"
#include "core/store/runs/writer.h"
#include "core/util/error.h"

namespace kiln {

namespace {

bool taken(Connection& db, const char* column, const std::string& value) {
  Statement q(db, fmt::format("SELECT count(*) FROM runs WHERE {} = ?", column), {value});
  q.step();
  return q.integer(0) > 0;
}

// Where each source run goes in the target: a new run of this name, or (the same run, its uuid,
// there already) the run to merge into.
struct Destination {
  std::string name;
  std::optional<int64_t> same_run;
};

// The destination of each source run, or the UserError that refuses the import.
std::vector<Destination> destinations(const std::vector<RunRecord>& runs, RunStore& target,
                                      bool rename) {
  std::vector<Destination> to;
  for (const auto& run : runs) {
    if (!run.uuid.empty()) {
      Statement same(target.connection(), "SELECT id, name FROM runs WHERE uuid = ?", {run.uuid});
      if (same.step()) {
        to.push_back({same.text(1), same.integer(0)});
        continue;
      }
    }
    std::string name = run.name;
    for (int k = 2; taken(target.connection(), "name", name); ++k) {
      if (!rename) {
        throw UserError(fmt::format(
            "a run named '{}' is in '{}' already (another run: its uuid differs): nothing "
            "imported: pass --rename to import it as '{}-2' (and so on)",
            run.name, target.path(), run.name));
      }
      name = fmt::format("{}-{}", run.name, k);
    }
    to.push_back({name, std::nullopt});
  }
  return to;
}

// The keys `sql` (one column, the run id bound) finds.
template <typename Key>
std::set<Key> keys_of(Connection& db, const char* sql, int64_t run_id) {
  std::set<Key> keys;
  Statement q(db, sql, {run_id});
  while (q.step()) {
    if constexpr (std::is_same_v<Key, int64_t>) {
      keys.insert(q.integer(0));
    } else {
      keys.insert(q.text(0));
    }
  }
  return keys;
}

// The columns of runs that RunRecord does not carry.
struct RunExtras {
  int64_t seed = 0, world_size = 1;
  std::string created_at;
};

RunExtras extras_of(HistoryDb& source, int64_t id) {
  Statement q(source.connection(), "SELECT seed, world_size, created_at FROM runs WHERE id = ?",
              {id});
  q.step();
  return {q.integer(0), q.integer(1), q.text(2)};
}

ImportedRun copy_rows(HistoryDb& source, RunStore& target, const RunRecord& run, int64_t id) {
  ImportedRun copied;
  for (const MetricRow& row : run_metric_rows(source, run.id)) {
    target.add_metric(id, row);
    ++copied.metrics;
  }
  for (const EvalRecord& e : run_evals(source, run.id)) {
    target.add_eval(id,
                    EvalRow{e.step, e.split, e.loss.value_or(NAN), e.checkpoint, e.counted_tokens});
    ++copied.evals;
  }
  target.flush();
  Connection& db = target.connection();
  write_task_scores(db, id, read_task_scores(source.connection(), run.id));
  for (const LayerMetricRow& r : read_layer_metrics(source.connection(), run.id))
    write_layer_metrics(db, id, r.step, {{r.name, r.value}});
  write_run_environment(db, id, read_run_environment(source.connection(), run.id));
  for (const auto& [step, probe] : read_rung_probes(source.connection(), run.id))
    write_rung_probe(db, id, step, probe);
  for (const SnapshotRecord& s : run_snapshots(source, run.id)) {
    Statement(
        db, "INSERT INTO snapshots (run_id, label, step, path, created_at) VALUES (?, ?, ?, ?, ?)",
        {id, s.label, s.step, s.path, s.created_at})
        .step();
  }
  for (const ResumeRecord& r : run_resumes(source, run.id)) {
    Statement resume(db,
                     "INSERT INTO resumes (run_id, from_step, changes, created_at) VALUES "
                     "(?, ?, ?, ?)");
    resume.bind(1, id).bind(2, r.from_step).bind_text_or_null(3, r.changes).bind(4, r.created_at);
    resume.step();
  }
  for (const std::string& hash : run_config_hashes(source.connection(), run)) {
    Statement(db, "INSERT OR IGNORE INTO run_config_hashes (run_id, config_hash) VALUES (?, ?)",
              {id, hash})
        .step();
  }
  Statement status(db,
                   "UPDATE runs SET status = ?, created_at = ?, finished_at = ?, error = ? "
                   "WHERE id = ?");
  status.bind(1, run.status).bind(2, extras_of(source, run.id).created_at);
  status.bind_text_or_null(3, run.finished_at).bind_text_or_null(4, run.error).bind(5, id);
  status.step();
  return copied;
}

ImportedRun import_run(HistoryDb& source, RunStore& target, const RunRecord& run,
                       const std::string& name) {
  const RunExtras extras = extras_of(source, run.id);
  const RunProvenance provenance{read_run_files(source.connection(), run.id),
                                 read_key_sources(source.connection(), run.id),
                                 read_inputs(source.connection(), run.id)};
  const int64_t id = target.create_run(
      NewRun{name, run.experiment, run.config, run.config_hash, extras.seed, extras.world_size,
             run.planned_steps, run.git_commit, run.host, run.sweep, run.uuid, run.folder},
      provenance);
  try {
    ImportedRun copied = copy_rows(source, target, run, id);
    copied.from = run.name;
    copied.to = name;
    return copied;
  } catch (...) {
    // Nothing half-written: the run's rows go with it (ON DELETE CASCADE).
    Statement(target.connection(), "DELETE FROM runs WHERE id = ?", {id}).step();
    throw;
  }
}

// The same run, there already (a run whose server went away wrote the rest of its rows to its
// unstored-rows file): only the rows the target lacks are added, so no row is duplicated and an
// import that stops midway is finished by running it again.
ImportedRun merge_run(HistoryDb& source, RunStore& target, const RunRecord& run, int64_t id,
                      const std::string& name) {
  ImportedRun added{run.name, name, 0, 0, true, ""};
  Connection& db = target.connection();
  const std::set<int64_t> steps =
      keys_of<int64_t>(db, "SELECT step FROM metrics WHERE run_id = ?", id);
  for (const MetricRow& row : run_metric_rows(source, run.id)) {
    if (steps.count(row.step)) continue;
    target.add_metric(id, row);
    ++added.metrics;
  }
  std::set<std::string> evals;
  Statement there(db, "SELECT step, split, checkpoint FROM evals WHERE run_id = ?", {id});
  while (there.step())
    evals.insert(fmt::format("{}/{}/{}", there.integer(0), there.text(1), there.text(2)));
  for (const EvalRecord& e : run_evals(source, run.id)) {
    if (evals.count(fmt::format("{}/{}/{}", e.step, e.split, e.checkpoint))) continue;
    target.add_eval(id,
                    EvalRow{e.step, e.split, e.loss.value_or(NAN), e.checkpoint, e.counted_tokens});
    ++added.evals;
  }
  target.flush();
  // A score the target has is the same score (one key, one measurement): replaced, not doubled.
  write_task_scores(db, id, read_task_scores(source.connection(), run.id));
  for (const LayerMetricRow& r : read_layer_metrics(source.connection(), run.id))
    write_layer_metrics(db, id, r.step, {{r.name, r.value}});
  const std::set<std::string> labels =
      keys_of<std::string>(db, "SELECT label FROM snapshots WHERE run_id = ?", id);
  for (const SnapshotRecord& s : run_snapshots(source, run.id)) {
    if (labels.count(s.label)) continue;
    Statement(
        db, "INSERT INTO snapshots (run_id, label, step, path, created_at) VALUES (?, ?, ?, ?, ?)",
        {id, s.label, s.step, s.path, s.created_at})
        .step();
  }
  // The run's end as the source knows it, where the target never heard of one.
  Statement status(db,
                   "UPDATE runs SET status = ?, finished_at = ?, error = ? "
                   "WHERE id = ? AND status = 'running'");
  status.bind(1, run.status).bind_text_or_null(2, run.finished_at);
  status.bind_text_or_null(3, run.error).bind(4, id);
  if (run.status != "running") status.step();
  return added;
}

// The run's folder now serves both stores: its marker lists the target beside the source (a
// marker of a Kiln before store lists gets the source too, the store that made the run), so that
// `kiln runs rm` in either keeps the folder for the other. "" when done, or when the run has no
// marked folder; else why not.
std::string share_folder(const RunRecord& run, const std::string& source,
                         const std::string& target) {
  const std::optional<RunPaths> paths = paths_of(run);
  const std::optional<RunMarker> marker = paths ? read_run_marker(*paths) : std::nullopt;
  if (!marker || marker->uuid != run.uuid) return "";
  std::vector<std::string> stores = marker->stores;
  for (const std::string& store : {source, target}) {
    if (std::find(stores.begin(), stores.end(), store) == stores.end()) stores.push_back(store);
  }
  if (stores == marker->stores || set_marker_stores(*paths, stores)) return "";
  return fmt::format(
      "could not record in '{}' that run '{}' is now also in '{}': `kiln runs rm` in '{}' would "
      "delete its folder, which '{}' still uses",
      paths->marker(), run.name, target, source, target);
}

}  // namespace

std::vector<ImportedRun> import_runs(const std::string& source, const std::string& target,
                                     bool rename) {
  std::error_code ec;
  if (!is_database_url(source) && !is_database_url(target) &&
      std::filesystem::equivalent(source, target, ec)) {
    // One file by two names (a symlink, a hard link, `..`): the import would list the store in
    // its own runs' markers a second time, under the other name, which no rm could clear.
    throw UserError(fmt::format(
        "'{}' and --db '{}' are the same run store (one file): nothing to import; give another "
        "--db",
        source, target));
  }
  HistoryDb from(source);
  if (!from.warning().empty()) throw UserError(from.warning() + ": nothing imported");
  RunStore to(target);
  const std::vector<RunRecord> runs = read_run_records(
      from.connection(), {run_summary_select(from.columns()) + " ORDER BY id", {}});
  const std::vector<Destination> where = destinations(runs, to, rename);
  std::vector<ImportedRun> imported;
  for (size_t i = 0; i < runs.size(); ++i) {
    imported.push_back(where[i].same_run
                           ? merge_run(from, to, runs[i], *where[i].same_run, where[i].name)
                           : import_run(from, to, runs[i], where[i].name));
    imported.back().warning =
        share_folder(runs[i], store_location(from.path()), store_location(to.path()));
  }
  return imported;
}

}  // namespace kiln
