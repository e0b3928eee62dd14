#include "core/app/slurm/worker.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/app/presentation/sweep_summary.h"
#include "core/app/sweeps/runner.h"
#include "core/app/sweeps/spec.h"
#include "core/app/sweeps/spec_file.h"
#include "core/store/runs/sweep_records.h"
#include "core/store/runs/writer.h"
#include "core/util/env.h"
#include "core/util/error.h"

namespace kiln {

int run_sweep_worker(const std::string& db, const std::string& name,
                     const std::function<void(const std::string&)>& print) {
  if (!is_database_url(db) && !std::filesystem::exists(db)) {
    throw UserError(
        fmt::format("no run store '{}': pass the store the sweep was submitted to with --db", db));
  }
  const SweepRecord sweep = [&] {
    RunStore store(db);
    return require_sweep(store, name);
  }();
  if (sweep.spec_file.empty()) {
    throw UserError(fmt::format(
        "sweep '{}' lists its members, each run by its own array task (`kiln sweep task`): "
        "`kiln sweep work` is for a search's workers (type = \"asha\")",
        name));
  }
  SweepSpec spec = load_sweep_file(sweep.spec_file);
  spec.name = name;
  SweepOptions options;
  options.db = db;
  options.threads = static_cast<int>(env_integer("SLURM_CPUS_PER_TASK", 0, 1, 1 << 20));
  options.sort = search_sort_key(spec.search);
  print(
      fmt::format("worker of sweep '{}' (sweep file {}), run store {}", name, sweep.spec_file, db));
  const SweepOutcome outcome = run_sweep(spec, options, print);
  print_sweep_report({outcome.db, name, options.sort, declared_task_metrics(spec.search),
                      outcome.ladder, !outcome.interrupted},
                     print);
  if (outcome.interrupted) return kExitInterrupted;
  return outcome.incomplete == 0 ? kExitOk : kExitSomeFailed;
}

}  // namespace kiln
