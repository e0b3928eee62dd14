#include "core/checkpoint/snapshot_catalog.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/util/error.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// Whose the snapshot is, as its manifest says.
struct Claim {
  bool readable = false;  // a manifest Kiln can read
  std::string foreign;    // why it is not the owner's; "" when it is
};

// The text of `key` in `object`; "" when it is not there or not text.
std::string text_field(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

Claim claim_of(const SnapshotRef& snapshot, const SnapshotOwner& owner) {
  std::ifstream in((fs::path(snapshot.path) / "manifest.json").string());
  if (!in) return {};
  const nlohmann::json manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!manifest.is_object()) return {};
  const std::string run = text_field(manifest, "run");
  if (run.empty()) {
    if (owner.legacy && contains(owner.recorded, snapshot.label)) return {true, ""};
    return {true, owner.legacy ? "names no run, and the run store does not list it"
                               : "names no run (Kiln marks every snapshot with its run)"};
  }
  if (run != owner.run_uuid) return {true, fmt::format("belongs to another run ({})", run)};
  const std::string hash = text_field(manifest, "config_hash");
  if (!contains(owner.config_hashes, hash)) {
    return {true, fmt::format("was taken with config hash '{}', which this run never had", hash)};
  }
  return {true, ""};
}

std::string skipped_line(const SnapshotRef& snapshot, const std::string& why) {
  return fmt::format("snapshot '{}' {}: skipped, it is not this run's", snapshot.path, why);
}

// "; " and the foreign lines, for an error that already says what else went wrong.
std::string and_foreign(const RunSnapshots& snapshots) {
  return snapshots.foreign.empty() ? ""
                                   : "; " + fmt::format("{}", fmt::join(snapshots.foreign, "; "));
}

}  // namespace

RunSnapshots owned_snapshots(const std::string& dir, const SnapshotOwner& owner) {
  RunSnapshots out;
  for (auto& snapshot : list_snapshots(dir)) {
    const Claim claim = claim_of(snapshot, owner);
    if (claim.foreign.empty()) {
      out.own.push_back(std::move(snapshot));
    } else {
      out.foreign.push_back(skipped_line(snapshot, claim.foreign));
    }
  }
  return out;
}

SnapshotRef select_snapshot(const RunSnapshots& snapshots, const std::string& dir,
                            const std::string& which,
                            const std::function<void(const std::string&)>& warn) {
  const std::vector<SnapshotRef>& all = snapshots.own;
  auto picked = [&](const SnapshotRef& snapshot) {
    for (const auto& line : snapshots.foreign)
      warn(line);
    return snapshot;
  };
  if (all.empty() && snapshots.foreign.empty()) {
    throw UserError(
        fmt::format("no snapshot in '{}': the run took none (set checkpoint.every)", dir));
  }
  if (all.empty()) {
    throw UserError(fmt::format("no snapshot of this run in '{}': {}", dir,
                                fmt::join(snapshots.foreign, "; ")));
  }
  if (which == "latest") {
    // The newest intact regular snapshot; for a run without one (stopped after an evaluation
    // and before its first regular snapshot, or whose regular ones are damaged), its newest
    // intact best one, said (a run with only a best snapshot must still resume). The
    // damaged ones are reported once an intact one is found; when none is, the error says what
    // was wrong with each (one line: a command that fails says so once).
    std::vector<std::string> damaged;
    for (const bool best : {false, true}) {
      for (auto it = all.rbegin(); it != all.rend(); ++it) {
        if (it->best != best) continue;
        try {
          verify_snapshot(*it);
        } catch (const UserError& e) {
          damaged.push_back(e.what());
          continue;
        }
        for (const auto& why : damaged)
          warn(why + "; using an older snapshot");
        if (best) {
          warn(fmt::format("no intact regular snapshot in '{}': using the best one, {} (step {})",
                           dir, it->label, it->step));
        }
        return picked(*it);
      }
    }
    throw UserError(fmt::format("no intact snapshot in '{}': {}{}", dir, fmt::join(damaged, "; "),
                                and_foreign(snapshots)));
  }
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const bool match =
        which == "best" ? it->best : (!which.empty() && which == std::to_string(it->step));
    if (match) {
      verify_snapshot(*it);
      return picked(*it);
    }
  }
  std::vector<std::string> labels;
  for (const auto& s : all)
    labels.push_back(s.label);
  throw UserError(
      fmt::format("no snapshot '{}' in '{}': use latest, best or one of the steps of {}{}", which,
                  dir, fmt::join(labels, ", "), and_foreign(snapshots)));
}

std::vector<SnapshotRef> prune_snapshots(const std::string& dir, int64_t keep,
                                         const SnapshotOwner& owner) {
  std::vector<SnapshotRef> regular, best, removed;
  for (const auto& s : list_snapshots(dir)) {
    // Only snapshots the owner's manifest proves are its own: never an unreadable one.
    const Claim claim = claim_of(s, owner);
    if (claim.readable && claim.foreign.empty()) (s.best ? best : regular).push_back(s);
  }
  auto drop_oldest = [&](std::vector<SnapshotRef>& list, size_t keep_count) {
    for (size_t i = 0; i + keep_count < list.size(); ++i) {
      std::error_code ec;
      fs::remove_all(list[i].path, ec);
      removed.push_back(list[i]);
    }
  };
  drop_oldest(regular, static_cast<size_t>(keep));
  drop_oldest(best, 1);
  return removed;
}

}  // namespace kiln
