#include "core/store/runs/paths.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <uuid/uuid.h>
#include <nlohmann/json.hpp>

#include "core/config/toml_text.h"
#include "core/store/runs/lookup.h"
#include "core/util/error.h"
#include "core/util/fs.h"
#include "core/util/text.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxNameLength = 200;
constexpr size_t kIdInFolder = 8;  // hex digits of the uuid after '@' in the folder's name

// ASCII only, whatever the locale says a letter is.
bool is_name_character(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("._-=,+:").find(c) != std::string_view::npos;
}

}  // namespace

bool is_run_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (const auto& part : split(name, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
    for (char c : part) {
      if (!is_name_character(c)) return false;
    }
  }
  return true;
}

void check_run_name(const std::string& name, const std::string& fix) {
  if (is_run_name(name)) return;
  throw UserError(fmt::format(
      "run name '{}' cannot be used: a name becomes a folder under run.out_dir, so use 1 to {} "
      "characters from ASCII letters, digits and . _ - = , + : in parts separated by single "
      "'/' (no empty, '.' or '..' part, no leading or trailing '/'): {}",
      name, kMaxNameLength, fix));
}

std::string new_run_uuid() {
  uuid_t id;
  uuid_generate_random(id);  // version 4, from the kernel's random source
  char text[37];
  uuid_unparse_lower(id, text);
  return text;
}

bool is_run_uuid(const std::string& text) {
  uuid_t id;
  // uuid_parse takes either case; Kiln writes and matches folder names in lowercase only.
  return text.size() == 36 && uuid_parse(text.c_str(), id) == 0 &&
         std::none_of(text.begin(), text.end(), [](char c) { return c >= 'A' && c <= 'F'; });
}

RunPaths::RunPaths(std::string folder, std::string name)
    : folder_(std::move(folder)), name_(std::move(name)) {}

RunPaths RunPaths::for_new_run(const std::string& out_dir, const std::string& name,
                               const std::string& uuid) {
  check_run_name(name);
  const std::string folder = name + "@" + uuid.substr(0, kIdInFolder);
  return RunPaths((fs::path(absolute_path(out_dir)) / folder).string(), name);
}

RunPaths RunPaths::in_folder(std::string folder, std::string name) {
  return RunPaths(std::move(folder), std::move(name));
}

std::optional<RunPaths> RunPaths::legacy(const std::string& out_dir, const std::string& name) {
  if (!is_contained_name(name)) return std::nullopt;
  return RunPaths((fs::path(out_dir) / name).string(), name);
}

std::string RunPaths::marker() const {
  return (fs::path(folder_) / "run.json").string();
}

std::string RunPaths::lock() const {
  return (fs::path(folder_) / "lock").string();
}

std::string RunPaths::console_log() const {
  return (fs::path(folder_) / "console.log").string();
}

std::string RunPaths::unstored_rows() const {
  return (fs::path(folder_) / "unstored-rows.db").string();
}

std::string RunPaths::snapshots() const {
  return (fs::path(folder_) / "snapshots").string();
}

std::string RunPaths::snapshot(const std::string& label) const {
  return (fs::path(snapshots()) / label).string();
}

bool is_run_folder(const std::string& path) {
  const RunPaths candidate = RunPaths::in_folder(path, "");
  std::error_code ec;
  return fs::is_regular_file(candidate.marker(), ec) || fs::is_directory(candidate.snapshots(), ec);
}

std::optional<std::string> run_folder_holding(const std::string& path) {
  std::error_code ec;
  fs::path here = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return std::nullopt;
  for (; !here.empty(); here = here.parent_path()) {
    if (is_run_folder(here.string())) return here.string();
    if (here == here.root_path()) break;
  }
  return std::nullopt;
}

std::optional<RunPaths> paths_of(const RunRecord& run) {
  if (!run.folder.empty()) return RunPaths::in_folder(run.folder, run.name);
  const std::optional<toml::table> config = try_parse_toml(run.config);
  const std::optional<std::string> out_dir =
      config ? (*config)["run"]["out_dir"].value<std::string>() : std::nullopt;
  return RunPaths::legacy(out_dir.value_or("runs"), run.name);
}

RunPaths require_paths(const RunRecord& run) {
  std::optional<RunPaths> paths = paths_of(run);
  if (!paths) {
    throw UserError(
        fmt::format("run '{}' has a name that reaches outside run.out_dir (a run store edited "
                    "by hand?): Kiln will not use its folder",
                    run.name));
  }
  return *paths;
}

void write_run_marker(const RunPaths& paths, const std::string& uuid, const std::string& store) {
  const nlohmann::json marker = {
      {"kiln_run", uuid}, {"name", paths.name()}, {"stores", std::vector<std::string>{store}}};
  write_file_atomic(paths.marker(), marker.dump(1) + "\n");
}

std::optional<RunMarker> read_run_marker(const RunPaths& paths) {
  std::ifstream in(paths.marker());
  if (!in) return std::nullopt;
  const nlohmann::json marker = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!marker.is_object() || !marker.contains("kiln_run") || !marker["kiln_run"].is_string()) {
    return std::nullopt;
  }
  RunMarker read{marker["kiln_run"].get<std::string>(), {}};
  if (marker.contains("stores") && marker["stores"].is_array()) {
    for (const auto& store : marker["stores"]) {
      if (store.is_string()) read.stores.push_back(store.get<std::string>());
    }
  }
  return read;
}

bool set_marker_stores(const RunPaths& paths, const std::vector<std::string>& stores) {
  std::ifstream in(paths.marker());
  nlohmann::json marker = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!marker.is_object()) return false;
  marker["stores"] = stores;
  try {
    write_file_atomic(paths.marker(), marker.dump(1) + "\n");
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

}  // namespace kiln
