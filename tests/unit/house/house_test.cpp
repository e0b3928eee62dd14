// The house rules of README's "Layout", checked on the source tree itself: each room of core/
// includes only the rooms below it, core never includes a plugin, plugins never reach the
// commands or the run store, every path inside a run's folder is named by core/store/run_paths,
// and no core file grows past what a newcomer reads in one sitting.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Bottom to top: a room may include its own files and those of the rooms before it.
const std::vector<std::string> kRooms = {"util",       "config", "api",   "data", "store",
                                         "checkpoint", "dist",   "train", "app"};
constexpr size_t kMaxLines = 420;  // "about 400"

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

std::vector<std::string> lines_of(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// The quoted include targets of a file: "core/store/run_store.h" and the like.
std::vector<std::string> includes_of(const fs::path& file) {
  static const std::regex include(R"re(^\s*#\s*include\s+"([^"]+)")re");
  std::vector<std::string> out;
  std::smatch m;
  for (const auto& line : lines_of(file)) {
    if (std::regex_search(line, m, include)) out.push_back(m[1]);
  }
  return out;
}

size_t room_index(const std::string& room) {
  return static_cast<size_t>(std::find(kRooms.begin(), kRooms.end(), room) - kRooms.begin());
}

TEST(House, EveryCoreFileLivesInAKnownRoom) {
  for (const auto& file : sources_under(source_dir() / "core")) {
    const fs::path relative = fs::relative(file, source_dir() / "core");
    ASSERT_GE(std::distance(relative.begin(), relative.end()), 2) << file << " is not in a room";
    EXPECT_LT(room_index(relative.begin()->string()), kRooms.size())
        << file << " is in no room of README's layout";
  }
}

TEST(House, RoomsIncludeOnlyTheRoomsBelowThem) {
  for (const auto& file : sources_under(source_dir() / "core")) {
    const std::string room = fs::relative(file, source_dir() / "core").begin()->string();
    for (const auto& target : includes_of(file)) {
      EXPECT_NE(target.rfind("plugins/", 0), 0u) << file << " includes a plugin: " << target;
      if (target.rfind("core/", 0) != 0) continue;
      const std::string other = fs::path(target.substr(5)).begin()->string();
      EXPECT_LE(room_index(other), room_index(room))
          << file << " (room " << room << ") includes " << target << ", a room above it";
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

TEST(House, NoCoreFileIsLongerThanOneSitting) {
  for (const auto& file : sources_under(source_dir() / "core")) {
    EXPECT_LE(lines_of(file).size(), kMaxLines) << file;
  }
}

// As leveldb's db/filename.h: the names of the files in a run's folder are spelled once, in
// core/store/run_paths.cpp; everything else asks RunPaths.
TEST(House, OnlyRunPathsNamesTheFilesOfARunFolder) {
  const fs::path owner = source_dir() / "core/store/run_paths.cpp";
  // How a path inside a run folder is spelled: `dir / "lock"`, "snapshots/...", "console.log".
  const std::vector<std::string> spellings = {"/ \"lock\"",      "\"/lock",      "\"console.log\"",
                                              "/ \"snapshots\"", "\"/snapshots", "\"snapshots/"};
  size_t spelled_by_owner = 0;
  for (const auto& dir : {"core", "plugins", "tools/kiln"}) {
    for (const auto& file : sources_under(source_dir() / dir)) {
      for (const auto& line : lines_of(file)) {
        const auto comment = line.find("//");
        for (const auto& spelling : spellings) {
          const auto at = line.find(spelling);
          if (at == std::string::npos || (comment != std::string::npos && comment < at)) continue;
          if (file == owner) {
            ++spelled_by_owner;
          } else {
            ADD_FAILURE() << file << " spells " << spelling << ": use RunPaths (run_paths.h)";
          }
        }
      }
    }
  }
  EXPECT_GE(spelled_by_owner, 3u) << "core/store/run_paths.cpp no longer names lock, "
                                     "console.log and snapshots";
}

}  // namespace
