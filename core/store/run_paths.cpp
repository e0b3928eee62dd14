#include "core/store/run_paths.h"

#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {

namespace fs = std::filesystem;

RunPaths::RunPaths(std::string out_dir, std::string name)
    : out_dir_(std::move(out_dir)), name_(std::move(name)) {
  if (!is_contained_name(name_)) {
    throw UserError(
        fmt::format("run name '{}' cannot be used: names become folders under "
                    "run.out_dir, so use letters, digits and . _ - = , / without "
                    "'..' or a leading '/'",
                    name_));
  }
}

std::string RunPaths::folder() const {
  return (fs::path(out_dir_) / name_).string();
}

std::string RunPaths::lock() const {
  return (fs::path(folder()) / "lock").string();
}

std::string RunPaths::console_log() const {
  return (fs::path(folder()) / "console.log").string();
}

std::string RunPaths::snapshots() const {
  return (fs::path(folder()) / "snapshots").string();
}

std::string RunPaths::snapshot(const std::string& label) const {
  return (fs::path(snapshots()) / label).string();
}

}  // namespace kiln
