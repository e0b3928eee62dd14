#include "core/checkpoint/snapshot_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include <fmt/format.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/output-archive.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/api/model.h"
#include "core/util/error.h"
#include "core/util/fault.h"
#include "core/util/fs.h"
#include "core/util/mapped_file.h"
#include "core/util/stop_signal.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

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

// A second stop signal: the user will not wait for this snapshot, so it is dropped.
void give_up_if_abandoned(const std::string& label) {
  if (StopSignal::abandoned()) throw SnapshotAbandoned("snapshot " + label + " abandoned");
}

// Writes one archive file through a SyncedFileWriter, so that a full disk is a UserError (not an
// abort from a destructor inside save_to). `produce` hands it the bytes in pieces; once part of
// model.pt is on disk, the mid-file crash point. An abandoned snapshot's bytes are dropped (nothing
// may throw inside save_to), then it gives up.
void write_archive_file(
    const fs::path& path, const std::string& label,
    const std::function<void(const std::function<void(const void*, size_t)>&)>& produce) {
  SyncedFileWriter file(path.string());
  const bool model_file = path.filename() == "model.pt";
  bool first = true;
  produce([&](const void* data, size_t bytes) {
    if (StopSignal::abandoned()) return;
    file.write(data, bytes);
    if (model_file && std::exchange(first, false)) fault_point("snapshot.mid_file");
  });
  give_up_if_abandoned(label);
  file.finish();
}

// Streams `archive` into `path`.
void save_archive(torch::serialize::OutputArchive& archive, const fs::path& path,
                  const std::string& label) {
  write_archive_file(path, label, [&](const auto& sink) {
    archive.save_to([&](const void* data, size_t bytes) {
      sink(data, bytes);
      return bytes;
    });
  });
}

// Writes bytes serialized earlier into `path`, in two halves (the mid-file point between them).
void save_bytes(const std::string& bytes, const fs::path& path, const std::string& label) {
  write_archive_file(path, label, [&](const auto& sink) {
    const size_t half = bytes.size() / 2;
    sink(bytes.data(), half);
    sink(bytes.data() + half, bytes.size() - half);
  });
}

// The steps every snapshot takes around its archives: the temporary folder, state.json, the
// manifest, the syncs and the rename. `write_archives` writes model.pt and optimizer.pt into
// the folder it is given.
void publish_snapshot(const std::string& dir, const std::string& label, const SnapshotState& state,
                      const std::function<void(const fs::path&)>& write_archives) {
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
    fault_point("snapshot.begun");
    write_archives(tmp);
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
      std::string sum = snapshot_file_checksum(path, &bytes);
      manifest["files"][file] = {{"bytes", bytes}, {"xxh3", sum}};
    }
    fault_point("snapshot.unlisted");
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

}  // namespace

std::string snapshot_file_checksum(const std::string& path, int64_t* bytes_out) {
  // Read through a memory map: snapshots can be gigabytes.
  const MappedFile file(path, {"snapshot file", "", true});
  if (bytes_out) *bytes_out = static_cast<int64_t>(file.size());
  return fmt::format("{:016x}", XXH3_64bits(file.data(), file.size()));
}

void serialize_snapshot(const Model& model, const torch::optim::Optimizer& optimizer,
                        SnapshotArchives& into) {
  const auto serialize = [](const auto& saved, std::string& bytes) {
    torch::serialize::OutputArchive archive;
    saved.save(archive);
    bytes.clear();  // keeps the buffer's memory for this save
    archive.save_to([&](const void* data, size_t size) {
      bytes.append(static_cast<const char*>(data), size);
      return size;
    });
  };
  serialize(model, into.model);
  serialize(optimizer, into.optimizer);
}

void write_snapshot(const std::string& dir, const std::string& label, const Model& model,
                    const torch::optim::Optimizer& optimizer, const SnapshotState& state) {
  publish_snapshot(dir, label, state, [&](const fs::path& tmp) {
    {
      torch::serialize::OutputArchive archive;
      model.save(archive);
      save_archive(archive, tmp / "model.pt", label);
    }
    fault_point("snapshot.partial");
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    save_archive(archive, tmp / "optimizer.pt", label);
  });
}

void write_snapshot(const std::string& dir, const std::string& label,
                    const SnapshotArchives& archives, const SnapshotState& state) {
  publish_snapshot(dir, label, state, [&](const fs::path& tmp) {
    save_bytes(archives.model, tmp / "model.pt", label);
    fault_point("snapshot.partial");
    save_bytes(archives.optimizer, tmp / "optimizer.pt", label);
  });
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
