// A new run's name, way, identity and row (core/app/run/new_run.h).
#include "core/app/run/new_run.h"

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "core/api/adapter.h"
#include "core/store/history/reader.h"
#include "core/store/history/removal.h"
#include "core/store/runs/paths.h"
#include "core/store/runs/sources.h"
#include "core/store/runs/writer.h"
#include "core/train/assemble.h"
#include "core/util/build_info.h"
#include "core/util/error.h"
#include "core/util/process.h"

namespace kiln {

std::string default_run_name(const std::string& experiment) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  // The file's name, with what a run name does not take (spaces, say) made '_'.
  std::string stem = std::filesystem::path(experiment).stem().string().substr(0, 180);
  for (char& c : stem) {
    if (c != '.' && !is_run_name(std::string(1, c))) c = '_';
  }
  return stem + "-" + stamp;
}

std::vector<std::string> make_way(RunStore& store, const std::string& name, bool restart) {
  const std::optional<RunRecord> existing = store.find_run(name);
  if (!existing) return {};
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
  std::vector<std::string> left;
  HistoryDb history(store.path());
  remove_run(history, *existing, [&](const std::string& w) { left.push_back("warning: " + w); });
  return left;
}

std::string new_identity(const std::string& out_dir, const std::string& name) {
  if (const char* chosen = std::getenv(kChosenRunUuid)) {
    const std::string uuid = chosen;
    ::unsetenv(kChosenRunUuid);  // this run's alone: nothing this process starts inherits it
    if (!is_run_uuid(uuid)) {
      throw UserError(fmt::format("{}='{}' is not a run uuid: unset it (kiln sweep sets it)",
                                  kChosenRunUuid, uuid));
    }
    return uuid;
  }
  for (;;) {
    std::string uuid = new_run_uuid();
    if (!std::filesystem::exists(RunPaths::for_new_run(out_dir, name, uuid).folder())) return uuid;
  }
}

void warn_of_random_base(const AssembledRun& run) {
  if (!run.adapter->adapts() || !run.config.params("model").text("init_from").empty()) return;
  std::cerr << fmt::format(
      "kiln: warning: adapter '{}' trains over a randomly initialised model, as model.init_from "
      "is empty, and its export names a base only Kiln can rebuild: set model.init_from to the "
      "weights to fine-tune\n",
      run.config.type("adapter"));
}

int64_t create_run_row(RunStore& store, const AssembledRun& run, const RunPaths& paths,
                       const std::string& uuid) {
  write_run_marker(paths, uuid, run.options.db);
  const ResolvedConfig& config = run.config;
  try {
    return store.create_run(
        NewRun{paths.name(), config.experiment, config.to_toml(), config.hash(), run.options.seed,
               run.parallel->world_size(), run.train.steps, build_git_commit(), host_name(),
               run.options.sweep, uuid, paths.folder()},
        provenance_of(config));
  } catch (const UserError&) {
    std::error_code ec;
    std::filesystem::remove_all(paths.folder(), ec);  // made a moment ago, for this run alone
    throw;
  }
}

}  // namespace kiln
