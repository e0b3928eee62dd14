#include "core/app/slurm/sweep.h"

#include <sys/statfs.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/app/presentation/sweep_summary.h"
#include "core/app/run/new_run.h"
#include "core/app/slurm/node_range.h"
#include "core/app/sweeps/asha_search.h"
#include "core/app/sweeps/check.h"
#include "core/app/sweeps/runner.h"
#include "core/app/sweeps/spec_file.h"
#include "core/config/canonical.h"
#include "core/config/config.h"
#include "core/config/options.h"
#include "core/store/db/connection.h"
#include "core/store/runs/paths.h"
#include "core/store/runs/sweep_records.h"
#include "core/store/runs/writer.h"
#include "core/train/assemble.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/table.h"
#include "core/util/text.h"

namespace kiln {

namespace {

// Slurm's states of a task that has not ended: resubmitting its member would run it twice.
const std::set<std::string> kQueuedStates = {"PENDING",      "CONFIGURING", "RUNNING",
                                             "COMPLETING",   "SUSPENDED",   "REQUEUED",
                                             "REQUEUE_HOLD", "RESIZING"};

constexpr long kTmpfsMagic = 0x01021994;  // linux/magic.h's TMPFS_MAGIC

// A store the compute nodes cannot see would leave every task without its member: said before
// anything is submitted (a warning: a one-node cluster, or a test, may well see it).
void warn_if_local(const std::string& db, const PrintLine& print) {
  if (is_database_url(db)) return;
  const std::string folder = std::filesystem::path(db).parent_path().string();
  struct statfs fs {};
  const bool tmpfs = ::statfs(folder.c_str(), &fs) == 0 && fs.f_type == kTmpfsMagic;
  if (db.rfind("/tmp/", 0) != 0 && !tmpfs) return;
  print(fmt::format(
      "warning: run store '{}' is {}, which a cluster's compute nodes usually do not see: give "
      "--db (or run.db) a path on a shared filesystem, or use the PostgreSQL store",
      db, tmpfs ? "on a tmpfs, local to this host" : "under /tmp"));
}

// The command each array task runs: this binary, by the path the nodes will see it at; a
// search's tasks are its workers.
std::vector<std::string> task_command(const SweepRecord& sweep, const std::string& db) {
  return {std::filesystem::read_symlink("/proc/self/exe").string(),
          "sweep",
          sweep.spec_file.empty() ? "task" : "work",
          sweep.name,
          "--db",
          db};
}

// A search's workers: --max-parallel of them (2 when it is 0), each one array task.
std::vector<int64_t> worker_tasks(int64_t max_parallel) {
  std::vector<int64_t> tasks;
  for (int64_t t = 0; t < (max_parallel > 0 ? max_parallel : 2); ++t)
    tasks.push_back(t);
  return tasks;
}

// Writes the sweep's script for `tasks` into its folder and submits it; the job id.
std::string submit_tasks(RunStore& store, const SweepRecord& sweep,
                         const std::vector<int64_t>& tasks) {
  const std::string script_path = sweep.folder + "/sweep.sbatch";
  const std::string comment =
      fmt::format("written by kiln for sweep '{}' (run store {}): one array task per {}",
                  sweep.name, store.path(), sweep.spec_file.empty() ? "member" : "worker");
  ensure_parent_dir(script_path);
  write_file_atomic(
      script_path,
      sbatch_script(sweep.scheduler_args, array_spec(tasks, static_cast<int>(sweep.max_parallel)),
                    task_command(sweep, store.path()), comment));
  const std::string job = submit_batch(script_path);
  add_sweep_job(store, sweep.name, job);
  return job;
}

// Records `sweep` and its members, then submits `tasks`; the job id. A submission the scheduler
// refuses leaves nothing of the sweep in the store.
std::string record_and_submit(RunStore& store, const SweepRecord& sweep,
                              const std::vector<SweepMemberRecord>& members,
                              const std::vector<int64_t>& tasks, const PrintLine& print) {
  record_sweep(store, sweep, members);
  warn_if_local(store.path(), print);
  try {
    return submit_tasks(store, sweep, tasks);
  } catch (...) {
    forget_sweep(store, sweep.name);
    throw;
  }
}

// The store a sweep was submitted to: one that does not exist is a mistyped --db, not a new store.
std::unique_ptr<RunStore> submitted_store(const std::string& db) {
  if (!is_database_url(db) && !std::filesystem::exists(db)) {
    throw UserError(
        fmt::format("no run store '{}': pass the store the sweep was submitted to "
                    "with --db",
                    db));
  }
  return std::make_unique<RunStore>(db);
}

// A search's workers again, unless some are still in Slurm's queue (they go on with it).
void resubmit_workers(RunStore& store, const SweepRecord& sweep, const PrintLine& print) {
  const std::vector<std::string> queued = queued_jobs(sweep.job_ids);
  if (!queued.empty()) {
    print(fmt::format("sweep '{}': its workers in Slurm job {} are still queued or running",
                      sweep.name, join(queued, ", ")));
    return;
  }
  const std::vector<int64_t> tasks = worker_tasks(sweep.max_parallel);
  const std::string job = submit_tasks(store, sweep, tasks);
  print(fmt::format("resubmitted {} workers of sweep '{}' as Slurm job {} (array {})", tasks.size(),
                    sweep.name, job, array_spec(tasks, sweep.max_parallel)));
}

// What would fail on the nodes fails here, before anything is submitted: each member's config
// loads (its keys, types and values), and a member of one rank is assembled as `kiln check` does.
// One of several ranks is assembled by its ranks alone: its strategy checks the world it starts in
// (tensor parallelism's tp against the ranks), which this one process is not.
void check_before_submitting(const SweepSpec& spec, const std::vector<SweepMember>& members,
                             const SlurmOptions& slurm) {
  if (ranks_per_job(slurm) == 1) {
    check_members(spec, members);
    return;
  }
  for (const auto& member : members) {
    try {
      load_config(spec.base, member.overrides);
    } catch (const UserError& e) {
      throw UserError(fmt::format("sweep member '{}': {}", member.name, e.what()));
    }
  }
}

// A member's --set values, with its global batch pinned where --nodes is a range
// (core/app/slurm/node_range.h).
std::vector<std::string> with_pinned_batch(const std::string& base,
                                           std::vector<std::string> overrides,
                                           const SlurmOptions& slurm) {
  if (slurm.min_nodes == 0 || slurm.min_nodes >= slurm.nodes) return overrides;
  const std::vector<std::string> pin = pin_global_batch(base, overrides, slurm);
  overrides.insert(overrides.end(), pin.begin(), pin.end());
  return overrides;
}

std::string number(const std::optional<double>& value) {
  return value ? fmt::format("{:.4f}", *value) : "-";
}

}  // namespace

void submit_sweep(const SweepSpec& spec, const SlurmOptions& slurm, const std::string& db,
                  const PrintLine& print) {
  const std::vector<SweepMember> members = expand_sweep(spec);
  check_before_submitting(spec, members, slurm);
  if (spec.search.type == SweepSearch::Type::kTpe) {
    throw UserError(
        "a tpe search proposes its trials as earlier ones end, which a job array of listed "
        "members cannot: submit it as type = \"asha\" with sampler = \"tpe\" (its workers "
        "share the proposals through the run store), or run it here without --launcher slurm");
  }
  const bool search = spec.search.type == SweepSearch::Type::kAsha;
  if (search && (slurm.nodes > 1 || slurm.ntasks_per_node > 1 || slurm.gpus_per_node > 0)) {
    throw UserError(
        "an asha sweep's workers each run one member at a time on their own task: --nodes, "
        "--ntasks-per-node and --gpus-per-node (members of several ranks) are for sweeps that "
        "list their members");
  }
  std::vector<SweepMemberRecord> records;
  for (size_t i = 0; i < members.size() && !search; ++i) {
    records.push_back({static_cast<int64_t>(i), members[i].name,
                       with_pinned_batch(spec.base, members[i].overrides, slurm)});
  }
  require_sbatch();
  const RunOptions base = run_options(load_config(spec.base, spec.fixed));
  SweepRecord sweep;
  sweep.name = spec.name;
  sweep.launcher = "slurm";
  sweep.base = absolute_path(spec.base);
  const std::string given = db.empty() ? base.db : db;
  // A file path as the nodes see it (from the job's own folder it would be another); a
  // database server's URL as it is.
  const std::string store_path = is_database_url(given) ? given : absolute_path(given);
  sweep.settings = {"run.sweep=" + format_value(spec.name), "run.db=" + format_value(store_path)};
  sweep.folder = absolute_path(base.out_dir) + "/" + spec.name + "/slurm";
  sweep.scheduler_args = sbatch_options(slurm, "kiln:" + spec.name, sweep.folder,
                                        std::filesystem::current_path().string());
  sweep.max_parallel = slurm.max_parallel;
  std::vector<int64_t> tasks;
  for (const auto& record : records)
    tasks.push_back(record.task);
  if (search) {
    sweep.spec_file = spec.file;
    tasks = worker_tasks(slurm.max_parallel);
  }
  RunStore store(store_path);
  const std::string job = record_and_submit(store, sweep, records, tasks, print);
  print(fmt::format("submitted sweep '{}': {} as Slurm job {} (array {}); script {}/sweep.sbatch",
                    spec.name,
                    search ? fmt::format("{} workers of its search", tasks.size())
                           : fmt::format("{} members", members.size()),
                    job, array_spec(tasks, slurm.max_parallel), sweep.folder));
  print(fmt::format("follow it with `kiln sweep status {} --db {}`", spec.name, store_path));
}

void submit_run(const std::string& experiment, std::vector<std::string> overrides,
                const SlurmOptions& slurm, const PrintLine& print) {
  // What would fail on the nodes fails here, submitting nothing; as check_before_submitting.
  const ResolvedConfig config = load_config(experiment, overrides);
  if (ranks_per_job(slurm) == 1) assemble(config, Assembly::kCheck);
  overrides = with_pinned_batch(experiment, overrides, slurm);
  const RunOptions options = run_options(config);
  const std::string name =
      options.name.empty() ? default_run_name(config.experiment) : options.name;
  if (options.name.empty()) overrides.push_back("run.name=" + quote_toml(name));
  require_sbatch();
  const std::string store_path =
      is_database_url(options.db) ? options.db : absolute_path(options.db);
  RunStore store(store_path);
  if (store.find_run(name)) {
    throw UserError(fmt::format(
        "run '{}' is in run store '{}' already: `kiln resume {} --db {}` goes on with it, or give "
        "this one another --name",
        name, store_path, name, store_path));
  }
  SweepRecord sweep;
  sweep.name = name;
  sweep.launcher = "slurm";
  sweep.base = absolute_path(experiment);
  sweep.settings = {"run.db=" + format_value(store_path)};
  sweep.folder = absolute_path(options.out_dir) + "/" + name + "/slurm";
  sweep.scheduler_args =
      sbatch_options(slurm, "kiln:" + name, sweep.folder, std::filesystem::current_path().string());
  const std::string job = record_and_submit(store, sweep, {{0, name, overrides}}, {0}, print);
  print(
      fmt::format("submitted run '{}' as Slurm job {} ({} ranks on {} nodes); script "
                  "{}/sweep.sbatch",
                  name, job, ranks_per_job(slurm), slurm.nodes, sweep.folder));
  print(fmt::format("follow it with `kiln sweep status {} --db {}`", name, store_path));
}

void print_sweep_status(const std::string& db, const std::string& name, const PrintLine& print) {
  // A sweep run here is in no sweeps table; without a store, members_status says so.
  if (!is_database_url(db) && !std::filesystem::exists(db)) return print(members_status(db, name));
  RunStore store(db);
  const std::optional<SweepRecord> submitted = find_sweep(store, name);
  if (!submitted) return print(members_status(db, name));
  const SweepRecord& sweep = *submitted;
  const std::map<int64_t, std::string> slurm = array_task_states(sweep.job_ids);
  if (!sweep.spec_file.empty()) {
    std::vector<std::string> workers;
    for (const auto& [task, state] : slurm)
      workers.push_back(fmt::format("task {} {}", task, state));
    print(fmt::format("sweep '{}' (Slurm job {}), a search: workers {}", name,
                      sweep.job_ids.empty() ? "-" : join(sweep.job_ids, ", "),
                      workers.empty() ? "none in Slurm's records" : join(workers, ", ")));
    SweepSpec spec = load_sweep_file(sweep.spec_file);
    spec.name = name;
    const SearchNow now = search_now(spec, store.path());
    print(search_status(store.path(), name, now.ladder, now.running));
    return;
  }
  Table table;
  table.header = {"task", "member", "state", "slurm", "steps", "final_loss"};
  table.numeric = {true, false, false, false, true, true};
  std::map<std::string, int> counts;
  for (const auto& m : sweep_members(store, name)) {
    const std::optional<RunRecord> run = store.find_run(m.name);
    const std::string state = run ? run->status : "pending";
    ++counts[state];
    const auto job_state = slurm.find(m.task);
    table.rows.push_back({std::to_string(m.task), m.name, state,
                          job_state == slurm.end() ? "-" : job_state->second,
                          run ? fmt::format("{}/{}", run->steps, run->planned_steps) : "-",
                          run ? number(run->final_loss) : "-"});
  }
  std::vector<std::string> summary;
  for (const auto& [state, count] : counts)
    summary.push_back(fmt::format("{} {}", count, state));
  print(fmt::format("sweep '{}' (Slurm job {}): {}", name,
                    sweep.job_ids.empty() ? "-" : join(sweep.job_ids, ", "), join(summary, ", ")));
  print(render_text_table(table));
}

void cancel_sweep(const std::string& db, const std::string& name, const PrintLine& print) {
  const std::unique_ptr<RunStore> opened = submitted_store(db);
  RunStore& store = *opened;
  const SweepRecord sweep = require_sweep(store, name);
  const std::vector<std::string> jobs = queued_jobs(sweep.job_ids);
  if (jobs.empty()) {
    print(fmt::format("sweep '{}': no task of it is pending or running in Slurm", name));
    return;
  }
  std::vector<std::string> argv = {"scancel"};
  argv.insert(argv.end(), jobs.begin(), jobs.end());
  const CapturedRun result = run_slurm_tool(argv);
  if (result.code != 0) {
    throw UserError(fmt::format("scancel {} failed: {}", join(jobs, " "), result.output));
  }
  print(fmt::format(
      "cancelled Slurm job {} of sweep '{}': running members snapshot and stop as interrupted; "
      "`kiln sweep resubmit {} --db {}` goes on with them",
      join(jobs, ", "), name, name, store.path()));
}

void resubmit_sweep(const std::string& db, const std::string& name, const PrintLine& print) {
  require_sbatch();
  const std::unique_ptr<RunStore> opened = submitted_store(db);
  RunStore& store = *opened;
  const SweepRecord sweep = require_sweep(store, name);
  const std::map<int64_t, std::string> slurm = array_task_states(sweep.job_ids);
  if (!sweep.spec_file.empty()) {
    resubmit_workers(store, sweep, print);
    return;
  }
  std::vector<int64_t> tasks;
  int completed = 0, queued = 0;
  for (const auto& m : sweep_members(store, name)) {
    const std::optional<RunRecord> run = store.find_run(m.name);
    const auto state = slurm.find(m.task);
    const bool in_queue = state != slurm.end() && kQueuedStates.count(state->second) > 0;
    if (run && run->status == "completed") {
      ++completed;
    } else if (in_queue) {
      ++queued;
    } else {
      tasks.push_back(m.task);
    }
  }
  if (tasks.empty()) {
    print(fmt::format("sweep '{}': nothing to submit ({} completed, {} still in Slurm's queue)",
                      name, completed, queued));
    return;
  }
  const std::string job = submit_tasks(store, sweep, tasks);
  print(fmt::format(
      "resubmitted {} members of sweep '{}' as Slurm job {} (array {}); {} "
      "completed, {} still in Slurm's queue",
      tasks.size(), name, job, array_spec(tasks, sweep.max_parallel), completed, queued));
}

}  // namespace kiln
