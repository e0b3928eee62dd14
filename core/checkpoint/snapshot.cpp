#include "core/checkpoint/snapshot.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>

#include "core/api/model.h"
#include "core/checkpoint/snapshot_state.h"
#include "core/util/error.h"
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

void verify_snapshot(const SnapshotRef& snapshot) {
  const fs::path dir(snapshot.path);
  nlohmann::json manifest;
  try {
    manifest = read_json((dir / "manifest.json").string());
    for (const auto& [file, expected] : manifest.at("files").items()) {
      const std::string path = (dir / file).string();
      if (!fs::exists(path)) throw UserError(fmt::format("'{}' is missing", file));
      int64_t bytes = 0;
      std::string sum = snapshot_file_checksum(path, &bytes);
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
