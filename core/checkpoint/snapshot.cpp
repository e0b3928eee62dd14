#include "core/checkpoint/snapshot.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/api/model.h"
#include "core/checkpoint/snapshot_state.h"
#include "core/util/error.h"
#include "core/util/fault.h"
#include "core/util/fs.h"
#include "core/util/mapped_file.h"
#include "core/util/stop_signal.h"
#include "core/util/text.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

// What Module::load does, but copying into the module's own tensors. Module::load set_s each
// parameter to the tensor it read, which (LibTorch 1.13) gives the parameter a new gradient
// accumulator and so silently drops the hooks ddp, zero and fsdp overlap their communication
// with; and it would give a parameter a tensor of another shape, so a snapshot of another model
// would load "fine" and fail at the first forward: those are collected in `mismatches` instead.
void load_in_place(torch::nn::Module& module, torch::serialize::InputArchive& archive,
                   const std::string& prefix, std::vector<std::string>& mismatches) {
  at::NoGradGuard no_grad;
  const auto copy_into = [&](const std::string& key, at::Tensor& target, bool buffer) {
    at::Tensor loaded;
    archive.read(key, loaded, buffer);
    if (loaded.sizes() != target.sizes()) {
      mismatches.push_back(fmt::format("{}{} is [{}] in the snapshot, [{}] in the model", prefix,
                                       key, fmt::join(loaded.sizes(), ", "),
                                       fmt::join(target.sizes(), ", ")));
      return;
    }
    target.copy_(loaded);
  };
  for (auto& item : module.named_parameters(/*recurse=*/false))
    copy_into(item.key(), item.value(), false);
  for (auto& item : module.named_buffers(/*recurse=*/false))
    copy_into(item.key(), item.value(), true);
  for (const auto& child : module.named_children()) {
    torch::serialize::InputArchive child_archive;
    archive.read(child.key(), child_archive);
    load_in_place(*child.value(), child_archive, prefix + child.key() + ".", mismatches);
  }
}

// XXH3-64 of a whole file, read through a memory map (snapshots can be gigabytes).
std::string file_checksum(const std::string& path, int64_t* bytes_out) {
  const MappedFile file(path, {"snapshot file", "", true});
  if (bytes_out) *bytes_out = static_cast<int64_t>(file.size());
  return fmt::format("{:016x}", XXH3_64bits(file.data(), file.size()));
}

void fsync_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    int err = errno;
    if (fd >= 0) ::close(fd);
    throw UserError(
        fmt::format("cannot sync '{}': {}: check free disk space", path, std::strerror(err)));
  }
  ::close(fd);
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError(fmt::format("'{}' is missing", path));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(json_error_text(path, e.what()) + " (not valid JSON)");
  }
}

}  // namespace

std::string regular_label(int64_t step) {
  return fmt::format("step_{:06}", step);
}
std::string best_label(int64_t step) {
  return fmt::format("best_{:06}", step);
}

std::vector<SnapshotRef> list_snapshots(const std::string& dir) {
  std::vector<SnapshotRef> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool best = name.rfind("best_", 0) == 0;
    if (!entry.is_directory() || !(best || name.rfind("step_", 0) == 0)) continue;
    if (name.find('.') != std::string::npos) continue;  // a .tmp left by a crash mid-write
    const std::string digits = name.substr(5);
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    out.push_back({entry.path().string(), name, std::stoll(digits), best});
  }
  std::sort(out.begin(), out.end(), [](const SnapshotRef& a, const SnapshotRef& b) {
    return a.step != b.step ? a.step < b.step : a.best < b.best;
  });
  return out;
}

namespace {

// A second stop signal: the user will not wait for this snapshot, so it is dropped.
void give_up_if_abandoned(const std::string& label) {
  if (StopSignal::abandoned()) throw SnapshotAbandoned("snapshot " + label + " abandoned");
}

// archive.save_to(path) would let a full disk abort the process from a destructor; written
// through a SyncedFileWriter, it becomes a UserError after the archive is done. An abandoned
// snapshot's bytes are dropped the same way (nothing may throw inside save_to), then it gives up.
void save_archive(torch::serialize::OutputArchive& archive, const std::string& path,
                  const std::string& label) {
  SyncedFileWriter file(path);
  archive.save_to([&](const void* data, size_t bytes) {
    if (!StopSignal::abandoned()) file.write(data, bytes);
    return bytes;
  });
  give_up_if_abandoned(label);
  file.finish();
}

}  // namespace

void write_snapshot(const std::string& dir, const std::string& label, const Model& model,
                    const torch::optim::Optimizer& optimizer, const SnapshotState& state) {
  const fs::path final_path = fs::path(dir) / label;
  const fs::path tmp = fs::path(dir) / (label + ".tmp");
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) {
    throw UserError(
        fmt::format("cannot create snapshot directory '{}': {}: set run.out_dir to a "
                    "writable path",
                    tmp.string(), ec.message()));
  }
  try {
    {
      torch::serialize::OutputArchive archive;
      model.save(archive);
      save_archive(archive, (tmp / "model.pt").string(), label);
    }
    fault_point("snapshot.partial");
    {
      torch::serialize::OutputArchive archive;
      optimizer.save(archive);
      save_archive(archive, (tmp / "optimizer.pt").string(), label);
    }
    write_file_synced((tmp / "state.json").string(), state_to_json(state).dump(1) + "\n");
    // The run and config the snapshot belongs to: only that run loads or prunes it
    // (core/checkpoint/snapshot_catalog.h).
    nlohmann::json manifest = {{"format", 1},
                               {"run", state.run_uuid},
                               {"config_hash", state.config_hash},
                               {"files", nlohmann::json::object()}};
    for (const char* file : {"model.pt", "optimizer.pt", "state.json"}) {
      const std::string path = (tmp / file).string();
      fsync_file(path);
      int64_t bytes = 0;
      std::string sum = file_checksum(path, &bytes);
      manifest["files"][file] = {{"bytes", bytes}, {"xxh3", sum}};
    }
    write_file_synced((tmp / "manifest.json").string(), manifest.dump(1) + "\n");
    sync_dir(tmp.string());
    give_up_if_abandoned(label);  // the last moment: once renamed, the snapshot is the run's
    fault_point("snapshot.unpublished");
    fs::remove_all(final_path, ec);  // an older snapshot of the same step (a re-done step)
    fs::rename(tmp, final_path);
    sync_dir(dir);
    fault_point("snapshot.published");
  } catch (const c10::Error& e) {
    fs::remove_all(tmp, ec);
    throw UserError(fmt::format("cannot write snapshot '{}': {}: check free disk space",
                                final_path.string(), e.what_without_backtrace()));
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
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

void verify_snapshot(const SnapshotRef& snapshot) {
  const fs::path dir(snapshot.path);
  nlohmann::json manifest;
  try {
    manifest = read_json((dir / "manifest.json").string());
    for (const auto& [file, expected] : manifest.at("files").items()) {
      const std::string path = (dir / file).string();
      if (!fs::exists(path)) throw UserError(fmt::format("'{}' is missing", file));
      int64_t bytes = 0;
      std::string sum = file_checksum(path, &bytes);
      if (bytes != expected.at("bytes").get<int64_t>()) {
        throw UserError(fmt::format("'{}' has {} bytes, the manifest says {}", file, bytes,
                                    expected.at("bytes").get<int64_t>()));
      }
      if (sum != expected.at("xxh3").get<std::string>()) {
        throw UserError(fmt::format("'{}' fails its checksum", file));
      }
    }
    for (const char* required : {"model.pt", "optimizer.pt", "state.json"}) {
      if (!manifest.at("files").contains(required)) {
        throw UserError(fmt::format("the manifest does not list '{}'", required));
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw UserError(
        fmt::format("snapshot '{}' is damaged: bad manifest ({})", snapshot.path, e.what()));
  } catch (const UserError& e) {
    throw UserError(fmt::format("snapshot '{}' is damaged: {}", snapshot.path, e.what()));
  }
}

SnapshotState load_snapshot(const SnapshotRef& snapshot, Model& model,
                            torch::optim::Optimizer* optimizer, bool restore, int rank) {
  const fs::path dir(snapshot.path);
  nlohmann::json state_json = read_json((dir / "state.json").string());
  try {
    torch::serialize::InputArchive archive;
    archive.load_from((dir / "model.pt").string());
    std::vector<std::string> mismatches;
    load_in_place(model, archive, "", mismatches);
    if (!mismatches.empty()) {
      const size_t shown = std::min<size_t>(mismatches.size(), 3);
      throw UserError(fmt::format(
          "snapshot '{}' does not fit this model ({} tensor(s) differ: {}{}): it was taken with "
          "another model config",
          snapshot.path, mismatches.size(),
          fmt::join(mismatches.begin(), mismatches.begin() + static_cast<std::ptrdiff_t>(shown),
                    "; "),
          shown < mismatches.size() ? "; ..." : ""));
    }
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("snapshot '{}' does not fit this model: {}", snapshot.path,
                                e.what_without_backtrace()));
  }
  if (optimizer) {
    try {
      torch::serialize::InputArchive optimizer_archive;
      optimizer_archive.load_from((dir / "optimizer.pt").string());
      optimizer->load(optimizer_archive);
    } catch (const c10::Error&) {
      // LibTorch's own words here are an internal assertion: what matters is which state.
      throw UserError(fmt::format(
          "snapshot '{}' holds optimizer state this run's optimizer cannot load: it was taken "
          "with another optimizer type or settings",
          snapshot.path));
    }
  }
  try {
    SnapshotState state = state_from_json(state_json);
    if (restore) {
      const auto& states = state.rng_by_rank;
      restore_rng(states.at(static_cast<size_t>(rank) < states.size() ? rank : 0));
    }
    return state;
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("snapshot '{}' has a state.json Kiln cannot read ({})",
                                snapshot.path, e.what()));
  } catch (const std::logic_error& e) {
    throw UserError(fmt::format("snapshot '{}' has a state.json Kiln cannot read ({})",
                                snapshot.path, e.what()));
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("snapshot '{}' has RNG states Kiln cannot restore ({})",
                                snapshot.path, e.what_without_backtrace()));
  }
}

}  // namespace kiln
