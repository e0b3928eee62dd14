#include "core/checkpoint/snapshot.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>

#include "core/api/model.h"
#include "core/api/optimizer.h"
#include "core/api/parallel.h"
#include "core/checkpoint/snapshot_state.h"
#include "core/checkpoint/state_shards.h"
#include "core/util/error.h"
#include "core/util/text.h"
#include "core/util/torch_compat.h"

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

// Tensors whose shapes differ between the snapshot and the model, said in one UserError.
[[noreturn]] void does_not_fit(const SnapshotRef& snapshot,
                               const std::vector<std::string>& differ) {
  const size_t shown = std::min<size_t>(differ.size(), 3);
  throw UserError(fmt::format(
      "snapshot '{}' does not fit this model ({} tensor(s) differ: {}{}): it was taken with "
      "another model config",
      snapshot.path, differ.size(),
      fmt::join(differ.begin(), differ.begin() + static_cast<std::ptrdiff_t>(shown), "; "),
      shown < differ.size() ? "; ..." : ""));
}

[[noreturn]] void optimizer_does_not_fit(const SnapshotRef& snapshot) {
  // LibTorch's own words here are an internal assertion: what matters is which state.
  throw UserError(fmt::format(
      "snapshot '{}' holds optimizer state this run's optimizer cannot load: it was taken "
      "with another optimizer type or settings",
      snapshot.path));
}

// model.pt and optimizer.pt, whole LibTorch archives, as Kiln wrote them before shards: loaded
// whole on every rank, which then keeps its part.
void load_whole_files(const SnapshotRef& snapshot, Model& model, torch::optim::Optimizer* optimizer,
                      ParallelStrategy* parallel) {
  const fs::path dir(snapshot.path);
  if (parallel) parallel->before_restore(model);
  try {
    torch::serialize::InputArchive archive;
    archive.load_from((dir / "model.pt").string());
    std::vector<std::string> mismatches;
    load_in_place(model, archive, "", mismatches);
    if (!mismatches.empty()) does_not_fit(snapshot, mismatches);
  } catch (const c10::Error& e) {
    throw UserError(fmt::format("snapshot '{}' does not fit this model: {}", snapshot.path,
                                e.what_without_backtrace()));
  }
  if (!optimizer) return;
  try {
    torch::serialize::InputArchive optimizer_archive;
    optimizer_archive.load_from((dir / "optimizer.pt").string());
    optimizer->load(optimizer_archive);
  } catch (const c10::Error&) {
    optimizer_does_not_fit(snapshot);
  }
  if (parallel) parallel->shard_state(model, *optimizer);
}

// Every rank's optimizer_<r>.pt merged into `optimizer` (each loaded into an emptied state, its
// entries set aside), then each state tensor, empty there, made as its parameter is held here,
// for the shards to fill.
void load_optimizer_settings(const SnapshotRef& snapshot, const nlohmann::json& files,
                             torch::optim::Optimizer& optimizer) {
  auto& state = optimizer.state();
  std::vector<std::pair<std::decay_t<decltype(state.begin()->first)>,
                        std::unique_ptr<torch::optim::OptimizerParamState>>>
      loaded;
  state.clear();
  try {
    for (const auto& [file, entry] : files.items()) {
      if (file.rfind("optimizer_", 0) != 0) continue;
      torch::serialize::InputArchive archive;
      archive.load_from((fs::path(snapshot.path) / file).string());
      optimizer.load(archive);
      for (auto& [key, value] : state)
        loaded.emplace_back(key, std::move(value));
      state.clear();
    }
  } catch (const c10::Error&) {
    optimizer_does_not_fit(snapshot);
  }
  for (auto& [key, value] : loaded)
    state[key] = std::move(value);
  at::NoGradGuard no_grad;
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) {
      for (at::Tensor* t : parameter_state(optimizer, p))
        *t = at::zeros(p.sizes(), p.options().dtype(t->scalar_type()));
    }
  }
}

// The parts this rank holds, read from the shards; the optimizer keeps the entries of the
// parameters whose state it holds. Returns the bytes read.
int64_t load_shards(const SnapshotRef& snapshot, const nlohmann::json& files, Model& model,
                    torch::optim::Optimizer* optimizer, ParallelStrategy* parallel) {
  if (optimizer) load_optimizer_settings(snapshot, files, *optimizer);
  const std::vector<StateSlice> parts = parallel ? parallel->state_slices(model, optimizer)
                                                 : whole_state_slices(model, optimizer, true);
  int64_t read = 0;
  try {
    read = read_state_shards(snapshot.path, files, parts);
  } catch (const UserError& e) {
    throw UserError(fmt::format(
        "snapshot '{}' does not fit this model ({}): it was taken with another model config",
        snapshot.path, e.what()));
  }
  if (!optimizer) return read;
  std::unordered_set<const void*> held;
  for (const auto& part : parts) {
    if (part.tensor.rfind("optimizer/", 0) == 0) held.insert(part.parameter.unsafeGetTensorImpl());
  }
  for (auto& group : optimizer->param_groups()) {
    for (auto& p : group.params()) {
      if (!held.count(p.unsafeGetTensorImpl()))
        optimizer->state().erase(compat::optimizer_state_key(p));
    }
  }
  return read;
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
    const bool sharded = manifest.value("format", 1) >= 2;
    const std::vector<const char*> required =
        sharded ? std::vector<const char*>{"state.json"}
                : std::vector<const char*>{"model.pt", "optimizer.pt", "state.json"};
    for (const char* file : required) {
      if (!manifest.at("files").contains(file)) {
        throw UserError(fmt::format("the manifest does not list '{}'", file));
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
                            torch::optim::Optimizer* optimizer, bool restore,
                            ParallelStrategy* parallel, int64_t* bytes_read) {
  const fs::path dir(snapshot.path);
  nlohmann::json state_json = read_json((dir / "state.json").string());
  const nlohmann::json manifest = read_json((dir / "manifest.json").string());
  if (manifest.value("format", 1) >= 2) {
    const int64_t read = load_shards(snapshot, manifest.at("files"), model, optimizer, parallel);
    if (bytes_read) *bytes_read = read;
  } else {
    load_whole_files(snapshot, model, optimizer, parallel);
  }
  const int rank = parallel ? parallel->rank() : 0;
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
