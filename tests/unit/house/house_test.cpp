// The house rules of docs/layout.md, checked on the source tree itself, with the rooms and
// sub-rooms read from that page's tables: each room of core/ includes only the rooms below it, and
// inside a room with sub-rooms (app/, store/) a sub-room includes only its own room's sub-rooms
// below it; core never includes a plugin, plugins never reach the commands or the run store, every
// path inside a run's folder is named by core/store/runs/paths, and no module of core/, plugins/
// or tools/kiln/ (a header and every .cpp that implements it) grows past what a newcomer reads in
// one sitting.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "core/util/text.h"
#include "layout_doc.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// The rooms and sub-rooms, bottom to top, as docs/layout.md's tables list them: a room may include
// its own files and those of the rooms before it.
const std::vector<std::string>& rooms() {
  return kiln::testing::layout_doc().rooms;
}
const std::map<std::string, std::vector<std::string>>& sub_rooms() {
  return kiln::testing::layout_doc().sub_rooms;
}
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
  return static_cast<size_t>(std::find(rooms().begin(), rooms().end(), room) - rooms().begin());
}

// Where a file of core/ lives: its room, and its sub-room's place in that room (0 in a room
// that is not split; the number of its sub-rooms when the sub-room is unknown).
struct Place {
  size_t room = 0;
  size_t sub_room = 0;
};

Place place_of(const fs::path& relative_to_core) {
  const std::vector<std::string> parts(relative_to_core.begin(), relative_to_core.end());
  Place place{room_index(parts.front()), 0};
  const auto split = sub_rooms().find(parts.front());
  if (split == sub_rooms().end()) return place;
  const auto& subs = split->second;
  const std::string sub = parts.size() > 2 ? parts[1] : "";
  place.sub_room = static_cast<size_t>(std::find(subs.begin(), subs.end(), sub) - subs.begin());
  return place;
}

TEST(House, TheRoomsAreReadFromDocsLayout) {
  EXPECT_GE(rooms().size(), 2u) << kiln::testing::layout_doc_path()
                                << ": its room table (rows whose first cell is `core/<room>/`, "
                                   "bottom to top) lists fewer than two rooms";
  for (const auto& [room, subs] : sub_rooms()) {
    EXPECT_NE(room_index(room), rooms().size())
        << "docs/layout.md has sub-rooms of core/" << room << "/, which its room table lacks";
    EXPECT_FALSE(subs.empty()) << "docs/layout.md's table of the sub-rooms of core/" << room
                               << "/ has no row whose first cell is a folder (`name/`)";
  }
}

TEST(House, EveryCoreFileLivesInAKnownRoom) {
  for (const auto& file : sources_under(source_dir() / "core")) {
    const fs::path relative = fs::relative(file, source_dir() / "core");
    ASSERT_GE(std::distance(relative.begin(), relative.end()), 2) << file << " is not in a room";
    const Place place = place_of(relative);
    ASSERT_LT(place.room, rooms().size())
        << file
        << " is in no room of docs/layout.md: move it into a room, or add its folder to "
           "the room table in its place bottom to top";
    const std::string& room = rooms()[place.room];
    const auto split = sub_rooms().find(room);
    if (split != sub_rooms().end()) {
      EXPECT_LT(place.sub_room, split->second.size())
          << file << " is in no sub-room of core/" << room << "/: move it into one, or add its "
          << "folder to docs/layout.md's table of the sub-rooms of core/" << room << "/";
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
      EXPECT_LE(other.room, place.room)
          << file << " includes " << target << ", a room above it in docs/layout.md's room "
          << "table: move what it needs into its own room or one below";
      if (other.room == place.room) {
        EXPECT_LE(other.sub_room, place.sub_room)
            << file << " includes " << target << ", a sub-room above its own in docs/layout.md: "
            << "move what it needs into its own sub-room or one below";
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

// The header a .cpp implements: the file it includes first, where that is a header beside it
// (core/config/loader.cpp's "core/config/config.h"). None for a file that stands alone, as a
// plugin or main.cpp does.
std::optional<fs::path> header_implemented_by(const fs::path& cpp) {
  static const std::regex include(R"re(^\s*#\s*include\s+([<"])([^">]+)[">])re");
  std::smatch m;
  for (const auto& line : kiln::testing::read_lines(cpp)) {
    if (!std::regex_search(line, m, include)) continue;
    const fs::path header = source_dir() / std::string(m[2]);
    if (m[1] == "<" || header.parent_path() != cpp.parent_path() || !fs::exists(header)) break;
    return header;
  }
  return std::nullopt;
}

// A module is one concept: a header and every .cpp that implements it, read together. Plugins
// and the command line's files are read by newcomers as much as core is, so the same measure
// holds there.
TEST(House, NoModuleIsLongerThanOneSitting) {
  struct Module {
    std::vector<std::string> files;  // relative to the source tree, for the message
    size_t lines = 0;
  };
  for (const auto& dir : {"core", "plugins", "tools/kiln"}) {
    std::map<fs::path, Module> modules;  // by its header, or by the .cpp that stands alone
    for (const auto& file : sources_under(source_dir() / dir)) {
      const auto header = file.extension() == ".cpp" ? header_implemented_by(file) : std::nullopt;
      Module& module = modules[header.value_or(file)];
      module.files.push_back(fs::relative(file, source_dir()).string());
      module.lines += kiln::testing::read_lines(file).size();
    }
    for (const auto& [key, module] : modules) {
      EXPECT_LE(module.lines, kMaxLines)
          << kiln::join(module.files, " + ") << ": " << module.lines
          << " lines (a header and every .cpp that includes it first), more than a newcomer "
             "reads in one sitting; split it by meaning into modules of their own, each a header "
             "with the .cpp files that implement it";
    }
  }
}

// The count above finds a module's .cpp files by their first include, so a .cpp that implements
// a header includes it first: every .cpp of core/, and every .cpp that has a header of its name.
TEST(House, EverySourceIncludesTheHeaderItImplementsFirst) {
  for (const auto& dir : {"core", "plugins", "tools/kiln"}) {
    for (const auto& file : sources_under(source_dir() / dir)) {
      if (file.extension() != ".cpp") continue;
      const bool own_header = fs::exists(fs::path(file).replace_extension(".h"));
      if (std::string(dir) != "core" && !own_header) continue;
      EXPECT_TRUE(header_implemented_by(file).has_value())
          << fs::relative(file, source_dir()).string()
          << " does not include first the header beside it that it implements: move that "
             "#include above the others, in a block of its own, so that the file counts in that "
             "header's module";
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
