#include "core/checkpoint/snapshot_policy.h"

#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/api/parallel.h"
#include "core/checkpoint/state_shards.h"
#include "core/store/runs/lookup.h"
#include "core/store/runs/writer.h"
#include "core/util/fault.h"

namespace kiln {

SnapshotOwner snapshot_owner(Connection& db, const RunRecord& run,
                             const std::string& session_hash) {
  SnapshotOwner owner{run.uuid, run_config_hashes(db, run), run.folder.empty(),
                      listed_snapshot_labels(db, run.id)};
  owner.config_hashes.push_back(session_hash);
  return owner;
}

SnapshotPolicy::SnapshotPolicy(const CheckpointOptions& options, int64_t total_steps,
                               SnapshotParts parts, RunPaths paths, SnapshotOwner owner,
                               RunStore* store, int64_t run_id)
    : options_(options),
      total_steps_(total_steps),
      parts_(parts),
      paths_(std::move(paths)),
      owner_(std::move(owner)),
      store_(store),
      run_id_(run_id) {
  if (options_.async) background_ = std::make_unique<BackgroundSave>();
}

SnapshotState SnapshotPolicy::restore(const SnapshotRef& snapshot) {
  int64_t read = 0;
  SnapshotState state = load_snapshot(snapshot, parts_.model, &parts_.optimizer,
                                      /*restore_rng=*/true, &parts_.parallel, &read);
  bytes_read_.clear();
  for (const auto& bytes : parts_.parallel.gather_bytes(std::to_string(read)))
    bytes_read_.push_back(std::stoll(bytes));
  use_training_point(parts_.optimizer);  // the snapshot holds an averaging optimizer's x
  best_val_ = state.best_val_loss;
  last_step_ = state.step;
  return state;
}

bool SnapshotPolicy::due(int64_t step, bool interrupted) const {
  const int64_t every = options_.every;
  return interrupted || (every > 0 && (step % every == 0 || step == total_steps_));
}

bool SnapshotPolicy::best_due(double val_loss) {
  if (best_val_ && val_loss >= *best_val_) return false;
  best_val_ = val_loss;
  return options_.every > 0;
}

void SnapshotPolicy::save(int64_t step, bool best, SnapshotState run_state) {
  const auto start = std::chrono::steady_clock::now();
  // The snapshot gets the model an optimizer averages (eval, sample and export read it), its
  // training point kept in the optimizer's state.
  const AveragedIterateScope averaged(&parts_.optimizer);
  finish_background_save(/*wait=*/true);  // at most one save in flight
  if (!store_) fault_point("snapshot.sending");
  gather_rank_states(run_state);
  if (store_) {
    run_state.step = step;
    run_state.best_val_loss = best_val_;
    run_state.run_uuid = owner_.run_uuid;
    // Rows up to the snapshot's step are committed before the snapshot exists: a resume from it
    // then never lacks one.
    store_->flush();
  }
  const std::string label = best ? best_label(step) : regular_label(step);
  RankSnapshot mine{
      parts_.parallel.rank(), parts_.parallel.state_slices(parts_.model, &parts_.optimizer), {}};
  mine.optimizer_settings = optimizer_settings(parts_.optimizer, mine.parts);
  const std::string key = fmt::format("snapshot/{}/{}/", label, saves_++);
  if (background_) {
    // The parts are copied to host buffers kept from save to save; the thread writes those.
    copy_to_host(mine.parts, host_parts_);
    mine.parts = host_parts_;
    background_->start([this, mine = std::move(mine), state = std::move(run_state), label, key] {
      write_and_commit(mine, state, label, key);
    });
    in_flight_ = {paths_.snapshot(label), label, step, best};
    step_before_in_flight_ = last_step_;
  } else {
    write_and_commit(mine, run_state, label, key);
    if (store_) record(step, label);
  }
  last_step_ = step;  // on every rank, so that each names the same snapshot in its messages
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Every rank writes its files; once each has said they are synced, rank 0 commits the snapshot.
// On the training thread or the background one: the file lists go through the rendezvous store.
void SnapshotPolicy::write_and_commit(const RankSnapshot& mine, const SnapshotState& state,
                                      const std::string& label, const std::string& key) {
  const nlohmann::json files = write_rank_files(paths_.snapshots(), label, mine);
  const std::vector<std::string> all = parts_.parallel.gather_bytes_at(key, files.dump());
  if (!store_) return;
  nlohmann::json listed = nlohmann::json::object();
  for (const auto& bytes : all)
    listed.update(nlohmann::json::parse(bytes));
  commit_snapshot(paths_.snapshots(), label, state, listed);
}

// Every rank's RNG states and data position (`state` holds this rank's one) go to rank 0.
void SnapshotPolicy::gather_rank_states(SnapshotState& state) {
  const nlohmann::json mine = {{"rng", capture_rng_states()},
                               {"shard", state.data_positions.at(0).shard},
                               {"offset", state.data_positions.at(0).offset},
                               {"epoch", state.data_positions.at(0).epoch}};
  const std::vector<std::string> all = parts_.parallel.gather_bytes(mine.dump());
  if (!store_) return;
  state.rng_by_rank = nlohmann::json::array();
  state.data_positions.clear();
  for (const auto& bytes : all) {
    const nlohmann::json rank = nlohmann::json::parse(bytes);
    state.rng_by_rank.push_back(rank.at("rng"));
    state.data_positions.push_back({rank.at("shard"), rank.at("offset"), rank.at("epoch")});
  }
}

// The snapshot is in place: the store lists it, and older ones beyond checkpoint.keep go.
void SnapshotPolicy::record(int64_t step, const std::string& label) {
  store_->add_snapshot(run_id_, step, label, paths_.snapshot(label));
  for (const auto& removed : prune_snapshots(paths_.snapshots(), options_.keep, owner_)) {
    store_->remove_snapshot(run_id_, removed.label);
  }
}

std::optional<double> SnapshotPolicy::finish_background_save(bool wait) {
  if (!background_ || !background_->in_flight()) return std::nullopt;
  if (!wait && !background_->finished()) return std::nullopt;
  const bool finished = background_->finished();
  double waited = 0;
  try {
    waited = background_->wait();
  } catch (...) {  // dropped by a second stop signal, or failed: the one before stays the latest
    last_step_ = step_before_in_flight_;
    throw;
  }
  seconds_ += waited;
  if (store_) record(in_flight_.step, in_flight_.label);
  return finished ? 0.0 : waited;
}

}  // namespace kiln
