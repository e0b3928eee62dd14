#include "core/checkpoint/snapshot_writer.h"

#include <algorithm>
#include <filesystem>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/output-archive.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/api/optimizer.h"
#include "core/checkpoint/state_shards.h"
#include "core/util/error.h"
#include "core/util/fault.h"
#include "core/util/fs.h"
#include "core/util/mapped_file.h"
#include "core/util/stop_signal.h"
#include "core/util/torch_compat.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

// A second stop signal: the user will not wait for this snapshot, so it is dropped.
void give_up_if_abandoned(const std::string& label) {
  if (StopSignal::abandoned()) throw SnapshotAbandoned("snapshot " + label + " abandoned");
}

fs::path tmp_folder(const std::string& dir, const std::string& label) {
  return fs::path(dir) / (label + ".tmp");
}

// A file this rank wrote, as the manifest lists it.
nlohmann::json listed(const fs::path& path) {
  int64_t bytes = 0;
  std::string sum = snapshot_file_checksum(path.string(), &bytes);
  return {{"bytes", bytes}, {"xxh3", sum}};
}

// Runs `write`; when it fails, the snapshot's `.tmp` folder goes with it (the earlier snapshots
// are untouched) and a LibTorch error becomes a UserError.
template <typename Write>
void or_discard(const std::string& dir, const std::string& label, Write&& write) {
  try {
    write();
  } catch (const c10::Error& e) {
    discard_snapshot(dir, label);
    throw UserError(fmt::format("cannot write snapshot '{}': {}: check free disk space",
                                (fs::path(dir) / label).string(), e.what_without_backtrace()));
  } catch (...) {
    discard_snapshot(dir, label);
    throw;
  }
}

}  // namespace

std::string snapshot_file_checksum(const std::string& path, int64_t* bytes_out) {
  // Read through a memory map: snapshots can be gigabytes.
  const MappedFile file(path, {"snapshot file", "", true});
  if (bytes_out) *bytes_out = static_cast<int64_t>(file.size());
  return fmt::format("{:016x}", XXH3_64bits(file.data(), file.size()));
}

std::string optimizer_settings(torch::optim::Optimizer& optimizer,
                               const std::vector<StateSlice>& parts) {
  std::unordered_set<const void*> mine;  // parameters whose state this rank writes from offset 0
  for (const auto& part : parts) {
    const bool origin = std::all_of(part.offsets.begin(), part.offsets.end(),
                                    [](int64_t offset) { return offset == 0; });
    if (part.writes && origin && part.tensor.rfind("optimizer/", 0) == 0)
      mine.insert(part.parameter.unsafeGetTensorImpl());
  }
  if (mine.empty()) return {};
  // While serialising: other parameters' entries set aside, this rank's state tensors emptied.
  auto& state = optimizer.state();
  std::vector<std::pair<std::decay_t<decltype(state.begin()->first)>,
                        std::unique_ptr<torch::optim::OptimizerParamState>>>
      aside;
  std::vector<std::pair<at::Tensor*, at::Tensor>> emptied;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      const auto key = compat::optimizer_state_key(p);
      if (!mine.count(p.unsafeGetTensorImpl())) {
        auto found = state.find(key);
        if (found != state.end()) aside.emplace_back(key, std::move(found->second));
        if (found != state.end()) state.erase(found);
        continue;
      }
      for (at::Tensor* t : parameter_state(optimizer, p))
        emptied.emplace_back(t, std::exchange(*t, at::empty({0}, t->options())));
    }
  }
  std::string bytes;
  std::exception_ptr error;
  try {
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    archive.save_to([&](const void* data, size_t size) {
      bytes.append(static_cast<const char*>(data), size);
      return size;
    });
  } catch (...) {
    error = std::current_exception();
  }
  for (auto& [t, kept] : emptied)
    *t = std::move(kept);
  for (auto& [key, entry] : aside)
    state[key] = std::move(entry);
  if (error) std::rethrow_exception(error);
  return bytes;
}

nlohmann::json write_rank_files(const std::string& dir, const std::string& label,
                                const RankSnapshot& mine) {
  const fs::path tmp = tmp_folder(dir, label);
  nlohmann::json files = nlohmann::json::object();
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) {
    throw UserError(
        fmt::format("cannot create snapshot directory '{}': {}: set run.out_dir to a "
                    "writable path",
                    tmp.string(), ec.message()));
  }
  or_discard(dir, label, [&] {
    if (mine.rank == 0) fault_point("snapshot.begun");
    const bool writes = std::any_of(mine.parts.begin(), mine.parts.end(), [](const auto& part) {
      return part.writes && part.local.numel() > 0;
    });
    if (writes) {
      const std::string name = state_shard_name(mine.rank);
      files[name] = write_state_shard((tmp / name).string(), mine.parts,
                                      [] { fault_point("snapshot.mid_file"); });
    }
    give_up_if_abandoned(label);
    fault_point("snapshot.partial");
    if (!mine.optimizer_settings.empty()) {
      const std::string name = fmt::format("optimizer_{}.pt", mine.rank);
      write_file_synced((tmp / name).string(), mine.optimizer_settings);
      files[name] = listed(tmp / name);
    }
  });
  return files;
}

void commit_snapshot(const std::string& dir, const std::string& label, const SnapshotState& state,
                     const nlohmann::json& files) {
  const fs::path final_path = fs::path(dir) / label;
  const fs::path tmp = tmp_folder(dir, label);
  or_discard(dir, label, [&] {
    write_file_synced((tmp / "state.json").string(), state_to_json(state).dump(1) + "\n");
    // The run and config the snapshot belongs to: only that run loads or prunes it
    // (core/checkpoint/snapshot_catalog.h).
    nlohmann::json manifest = {{"format", 2},
                               {"run", state.run_uuid},
                               {"config_hash", state.config_hash},
                               {"world_size", state.world_size},
                               {"files", files}};
    manifest["files"]["state.json"] = listed(tmp / "state.json");
    fault_point("snapshot.unlisted");
    write_file_synced((tmp / "manifest.json").string(), manifest.dump(1) + "\n");
    sync_dir(tmp.string());
    give_up_if_abandoned(label);  // the last moment: once renamed, the snapshot is the run's
    fault_point("snapshot.unpublished");
    std::error_code ec;
    fs::remove_all(final_path, ec);  // an older snapshot of the same step (a re-done step)
    fs::rename(tmp, final_path);
    sync_dir(dir);
    fault_point("snapshot.published");
  });
}

void write_snapshot(const std::string& dir, const std::string& label, Model& model,
                    torch::optim::Optimizer& optimizer, const SnapshotState& state) {
  RankSnapshot whole{0, whole_state_slices(model, &optimizer, /*writes=*/true), {}};
  whole.optimizer_settings = optimizer_settings(optimizer, whole.parts);
  commit_snapshot(dir, label, state, write_rank_files(dir, label, whole));
}

void discard_snapshot(const std::string& dir, const std::string& label) {
  std::error_code ec;
  fs::remove_all(tmp_folder(dir, label), ec);
}

std::vector<std::string> remove_unfinished_snapshots(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".tmp") removed.push_back(entry.path().filename().string());
  }
  for (const auto& name : removed)
    fs::remove_all(fs::path(dir) / name, ec);
  return removed;
}

}  // namespace kiln
