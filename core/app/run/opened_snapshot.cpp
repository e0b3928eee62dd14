// A run's snapshot opened for a command (core/app/run/opened_snapshot.h).
#include "core/app/run/opened_snapshot.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "core/api/adapter.h"
#include "core/checkpoint/snapshot_policy.h"
#include "core/store/history/reader.h"
#include "core/store/runs/paths.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {
namespace {

// A model whose adapter computes from the run's base what snapshots lack (an int8 base's scales)
// read that base again: it must hold the weights the run trained on, or the model loaded is
// another one.
void require_trained_base(const RunRecord& info, const Adapter& adapter,
                          const std::vector<RunInput>& recorded) {
  const std::string needed_for = adapter.needs_initial_weights();
  for (const RunInput& in : recorded) {
    if (needed_for.empty() || in.key != "model.init_from") continue;
    const std::string difference = fingerprint_difference(in.files, fingerprint_files(in.resolved));
    if (difference.empty()) continue;
    throw UserError(fmt::format(
        "run '{}': model.init_from ({}) differs from the base the run trained on ({}), and {}: "
        "put that base back as it was",
        info.name, in.resolved, difference, needed_for));
  }
}

}  // namespace

void require_store_file(const std::string& db) {
  if (!store_may_exist(db)) {
    fail_no_store(db, "pass --db PATH, the run.db of the run");
  }
}

std::vector<std::string> threads_override(int64_t threads) {
  if (threads <= 0) return {};
  return {fmt::format("run.threads={}", threads)};
}

OpenedSnapshot open_snapshot(const SnapshotRequest& request, Connection& db,
                             const RunColumns& columns, Assembly mode) {
  const RunRecord info = require_run(db, request.run, columns);
  ResolvedConfig config =
      load_config_text(info.config, fmt::format("run '{}' (stored config)", info.name),
                       threads_override(request.threads));
  config.experiment = info.name;
  // Its files where the run read them, whatever directory this command runs in.
  std::vector<RunInput> inputs = read_inputs(db, info.id);
  use_recorded_inputs(config, inputs);
  AssembledRun run = assemble(config, mode);
  require_trained_base(info, *run.adapter, inputs);
  // Only the run's own snapshots: one another run left in its folder is named and passed over.
  const std::string dir = require_paths(info).snapshots();
  const SnapshotOwner owner = snapshot_owner(db, info, info.config_hash);
  const RunSnapshots snapshots = owned_snapshots(dir, owner);
  // The store lists snapshots and the disk has none of them: they were deleted, not never taken
  // (the error says so, not "the run took none").
  if (snapshots.own.empty() && snapshots.foreign.empty() && !owner.recorded.empty()) {
    std::error_code ec;
    throw UserError(fmt::format(
        "run '{}' has snapshots in its run store ({}) but none of them is on disk in '{}'{}: "
        "they were deleted or moved; restore the folder, or train the run again",
        info.name, join(owner.recorded, ", "), dir,
        std::filesystem::exists(dir, ec) ? "" : " (the folder is missing)"));
  }
  SnapshotRef snapshot = select_snapshot(snapshots, dir, request.checkpoint, request.note);
  SnapshotState state = load_snapshot(snapshot, *run.model, nullptr, /*restore_rng=*/false);
  run.model->eval();
  return {info, std::move(run), snapshot, state, std::move(inputs)};
}

OpenedSnapshot open_snapshot_read_only(const SnapshotRequest& request, Assembly mode) {
  require_store_file(request.db);
  HistoryDb db(request.db);
  if (!db.warning().empty()) request.note("warning: " + db.warning());
  return open_snapshot(request, db.connection(), db.columns(), mode);
}

void announce(const SnapshotRequest& request, const OpenedSnapshot& opened) {
  request.note(fmt::format("run '{}': snapshot {} (step {})", opened.info.name,
                           opened.snapshot.label, opened.state.step));
}

}  // namespace kiln
