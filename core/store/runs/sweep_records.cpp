#include "core/store/runs/sweep_records.h"

#include <fmt/format.h>

#include "core/store/db/connection.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

const char* const kSweepTablesSql = R"sql(
    CREATE TABLE sweeps (
      name            TEXT PRIMARY KEY,
      launcher        TEXT NOT NULL,
      base            TEXT NOT NULL,
      settings        TEXT NOT NULL,
      scheduler_args  TEXT NOT NULL,
      max_parallel    INTEGER NOT NULL,
      folder          TEXT NOT NULL,
      job_ids         TEXT NOT NULL DEFAULT '',
      submitted_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    );
    CREATE TABLE sweep_members (
      sweep      TEXT NOT NULL REFERENCES sweeps(name) ON DELETE CASCADE,
      task       INTEGER NOT NULL,
      name       TEXT NOT NULL UNIQUE,
      overrides  TEXT NOT NULL,
      PRIMARY KEY (sweep, task)
    );
    )sql";

namespace {

// Values one a line: a value with a line break of its own would come back as two.
std::string lines_of(const std::vector<std::string>& values, const std::string& owner) {
  for (const auto& v : values) {
    if (v.find('\n') != std::string::npos) {
      throw UserError(fmt::format(
          "{}: the value '{}' holds a line break, which a submitted sweep cannot record: write "
          "it on one line (a TOML basic string with \\n)",
          owner, v));
    }
  }
  return join(values, "\n");
}

std::vector<std::string> values_of(const std::string& lines) {
  return lines.empty() ? std::vector<std::string>{} : split(lines, '\n');
}

std::vector<std::string> sweep_names(RunStore& store) {
  std::vector<std::string> names;
  Statement select(store.connection(), "SELECT name FROM sweeps ORDER BY name");
  while (select.step())
    names.push_back(select.text(0));
  return names;
}

}  // namespace

void record_sweep(RunStore& store, const SweepRecord& sweep,
                  const std::vector<SweepMemberRecord>& members) {
  Connection& db = store.connection();
  Transaction transaction(db);
  if (find_sweep(store, sweep.name)) {
    throw UserError(fmt::format(
        "sweep '{}' was already submitted to run store '{}': `kiln sweep status {} --db {}` "
        "shows it, `kiln sweep resubmit` submits its unfinished members, or give this one "
        "another --name",
        sweep.name, store.path(), sweep.name, store.path()));
  }
  Statement(
      db,
      "INSERT INTO sweeps (name, launcher, base, settings, scheduler_args, max_parallel, "
      "folder, spec_file) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      {sweep.name, sweep.launcher, sweep.base, lines_of(sweep.settings, "sweep " + sweep.name),
       lines_of(sweep.scheduler_args, "sweep " + sweep.name), sweep.max_parallel, sweep.folder,
       sweep.spec_file})
      .step();
  Statement insert(db, "INSERT INTO sweep_members (sweep, task, name, overrides) VALUES (?,?,?,?)");
  for (const auto& m : members) {
    insert.reset();
    insert.bind(1, sweep.name).bind(2, m.task).bind(3, m.name);
    insert.bind(4, lines_of(m.overrides, "sweep member '" + m.name + "'"));
    insert.step();
  }
  transaction.commit();
}

void forget_sweep(RunStore& store, const std::string& name) {
  Connection& db = store.connection();
  Transaction transaction(db);
  Statement(db, "DELETE FROM sweep_members WHERE sweep = ?", {name}).step();
  Statement(db, "DELETE FROM sweeps WHERE name = ?", {name}).step();
  transaction.commit();
}

std::optional<SweepRecord> find_sweep(RunStore& store, const std::string& name) {
  Statement select(store.connection(),
                   "SELECT launcher, base, settings, scheduler_args, folder, job_ids, "
                   "max_parallel, spec_file FROM sweeps WHERE name = ?",
                   {name});
  if (!select.step()) return std::nullopt;
  SweepRecord sweep;
  sweep.name = name;
  sweep.launcher = select.text(0);
  sweep.base = select.text(1);
  sweep.settings = values_of(select.text(2));
  sweep.scheduler_args = values_of(select.text(3));
  sweep.folder = select.text(4);
  const std::string jobs = select.text(5);
  if (!jobs.empty()) sweep.job_ids = split(jobs, ',');
  sweep.max_parallel = select.integer(6);
  sweep.spec_file = select.text(7);
  return sweep;
}

SweepRecord require_sweep(RunStore& store, const std::string& name) {
  if (auto sweep = find_sweep(store, name)) return *sweep;
  const std::vector<std::string> names = sweep_names(store);
  throw UserError(fmt::format(
      "no sweep '{}' was submitted to run store '{}' ({}): pass the "
      "store it was submitted to with --db",
      name, store.path(), names.empty() ? "it has none" : "it has " + join(names, ", ")));
}

std::vector<SweepMemberRecord> sweep_members(RunStore& store, const std::string& name) {
  std::vector<SweepMemberRecord> members;
  Statement select(store.connection(),
                   "SELECT task, name, overrides FROM sweep_members WHERE sweep = ? ORDER BY task",
                   {name});
  while (select.step())
    members.push_back({select.integer(0), select.text(1), values_of(select.text(2))});
  return members;
}

void add_sweep_job(RunStore& store, const std::string& name, const std::string& job_id) {
  Statement(store.connection(),
            "UPDATE sweeps SET job_ids = CASE job_ids WHEN '' THEN ? ELSE job_ids || ',' || ? "
            "END WHERE name = ?",
            {job_id, job_id, name})
      .step();
}

}  // namespace kiln
