// The house rules of docs/layout.md, checked on the source tree itself: each room of core/ includes
// only the rooms below it, and inside a room with sub-rooms (app/, store/) a sub-room includes only
// its own room's sub-rooms below it; core never includes a plugin, plugins never reach the
// commands or the run store, every path inside a run's folder is named by core/store/runs/paths,
// and no module of core/, plugins/ or tools/kiln/ (a .cpp with its .h) grows past what a newcomer
// reads in one sitting.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "core/util/text.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// Bottom to top: a room may include its own files and those of the rooms before it.
const std::vector<std::string> kRooms = {"util",        "kernels", "config", "layers",
                                         "api",         "data",    "store",  "checkpoint",
                                         "distributed", "train",   "app"};
// The rooms that are split further, their sub-rooms bottom to top as well.
const std::map<std::string, std::vector<std::string>> kSubRooms = {
    {"store", {"db", "where", "runs", "history", "tensorboard"}},
    {"app", {"presentation", "speed", "run", "sweeps", "slurm"}},
};
constexpr size_t kMaxLines = 420;  // "about 400", a module's header included

fs::path source_dir() {
  return KILN_SOURCE_DIR;
}

std::vector<fs::path> sources_under(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const auto ext = entry.path().extension();
    if (entry.is_regular_file() && (ext == ".h" || ext == ".cpp")) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The quoted include targets of a file: "core/store/runs/writer.h" and the like.
std::vector<std::string> includes_of(const fs::path& file) {
  static const std::regex include(R"re(^\s*#\s*include\s+"([^"]+)")re");
  std::vector<std::string> out;
  std::smatch m;
  for (const auto& line : kiln::testing::read_lines(file)) {
    if (std::regex_search(line, m, include)) out.push_back(m[1]);
  }
  return out;
}

size_t room_index(const std::string& room) {
  return static_cast<size_t>(std::find(kRooms.begin(), kRooms.end(), room) - kRooms.begin());
}

// Where a file of core/ lives: its room, and its sub-room's place in that room (0 in a room
// that is not split; kSubRooms' size when the sub-room is unknown).
struct Place {
  size_t room = 0;
  size_t sub_room = 0;
};

Place place_of(const fs::path& relative_to_core) {
  const std::vector<std::string> parts(relative_to_core.begin(), relative_to_core.end());
  Place place{room_index(parts.front()), 0};
  const auto split = kSubRooms.find(parts.front());
  if (split == kSubRooms.end()) return place;
  const auto& subs = split->second;
  const std::string sub = parts.size() > 2 ? parts[1] : "";
  place.sub_room = static_cast<size_t>(std::find(subs.begin(), subs.end(), sub) - subs.begin());
  return place;
}

TEST(House, EveryCoreFileLivesInAKnownRoom) {
  for (const auto& file : sources_under(source_dir() / "core")) {
    const fs::path relative = fs::relative(file, source_dir() / "core");
    ASSERT_GE(std::distance(relative.begin(), relative.end()), 2) << file << " is not in a room";
    const Place place = place_of(relative);
    ASSERT_LT(place.room, kRooms.size()) << file << " is in no room of docs/layout.md";
    const auto split = kSubRooms.find(kRooms[place.room]);
    if (split != kSubRooms.end()) {
      EXPECT_LT(place.sub_room, split->second.size())
          << file << " is in no sub-room of core/" << kRooms[place.room] << "/";
    }
  }
}

TEST(House, RoomsIncludeOnlyTheRoomsBelowThem) {
  for (const auto& file : sources_under(source_dir() / "core")) {
    const Place place = place_of(fs::relative(file, source_dir() / "core"));
    for (const auto& target : includes_of(file)) {
      EXPECT_NE(target.rfind("plugins/", 0), 0u) << file << " includes a plugin: " << target;
      if (target.rfind("core/", 0) != 0) continue;
      const Place other = place_of(fs::path(target.substr(5)));
      EXPECT_LE(other.room, place.room) << file << " includes " << target << ", a room above it";
      if (other.room == place.room) {
        EXPECT_LE(other.sub_room, place.sub_room)
            << file << " includes " << target << ", a sub-room above its own";
      }
    }
  }
}

TEST(House, PluginsNeverReachTheCommandsOrTheRunStore) {
  for (const auto& file : sources_under(source_dir() / "plugins")) {
    for (const auto& target : includes_of(file)) {
      EXPECT_NE(target.rfind("core/app/", 0), 0u) << file << " includes " << target;
      EXPECT_NE(target.rfind("core/store/", 0), 0u) << file << " includes " << target;
    }
  }
}

// A module is read with its header: foo.cpp and foo.h together, or either alone. Plugins and the
// command line's files are read by newcomers as much as core is, so the same measure holds there.
TEST(House, NoModuleIsLongerThanOneSitting) {
  struct Module {
    std::vector<std::string> files;  // relative to the source tree, for the message
    size_t lines = 0;
  };
  for (const auto& dir : {"core", "plugins", "tools/kiln"}) {
    std::map<fs::path, Module> modules;
    for (const auto& file : sources_under(source_dir() / dir)) {
      Module& module = modules[fs::path(file).replace_extension()];
      module.files.push_back(fs::relative(file, source_dir()).string());
      module.lines += kiln::testing::read_lines(file).size();
    }
    for (const auto& [stem, module] : modules) {
      EXPECT_LE(module.lines, kMaxLines)
          << kiln::join(module.files, " + ") << ": " << module.lines
          << " lines, more than a newcomer reads in one sitting; move what is not the module "
             "itself into a module of its own";
    }
  }
}

// As leveldb's db/filename.h: the names of the files in a run's folder are spelled once, in
// core/store/runs/paths.cpp; everything else asks RunPaths.
TEST(House, OnlyRunPathsNamesTheFilesOfARunFolder) {
  const fs::path owner = source_dir() / "core/store/runs/paths.cpp";
  // How a path inside a run folder is spelled: `dir / "lock"`, "snapshots/...", "console.log".
  const std::vector<std::string> spellings = {"/ \"lock\"",      "\"/lock",      "\"console.log\"",
                                              "/ \"snapshots\"", "\"/snapshots", "\"snapshots/"};
  size_t spelled_by_owner = 0;
  for (const auto& dir : {"core", "plugins", "tools/kiln"}) {
    for (const auto& file : sources_under(source_dir() / dir)) {
      for (const auto& line : kiln::testing::read_lines(file)) {
        const auto comment = line.find("//");
        for (const auto& spelling : spellings) {
          const auto at = line.find(spelling);
          if (at == std::string::npos || (comment != std::string::npos && comment < at)) continue;
          if (file == owner) {
            ++spelled_by_owner;
          } else {
            ADD_FAILURE() << file << " spells " << spelling
                          << ": use RunPaths (core/store/runs/paths.h)";
          }
        }
      }
    }
  }
  EXPECT_GE(spelled_by_owner, 3u) << "core/store/runs/paths.cpp no longer names lock, "
                                     "console.log and snapshots";
}

}  // namespace
