// Every relative link in README.md and docs/*.md resolves: the file it names exists, and the
// anchor after '#' is a heading of that file, spelled as GitHub spells heading anchors (lowercase,
// punctuation other than '-' and '_' dropped, spaces as '-', a repeated heading suffixed -1, -2,
// ...). Links inside code blocks and inline code are text, not links; web links are not followed.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

namespace fs = std::filesystem;

// The lines of a Markdown file outside ``` fences, with `inline code` blanked out.
std::vector<std::pair<size_t, std::string>> prose_of(const fs::path& file) {
  std::vector<std::pair<size_t, std::string>> out;
  bool in_fence = false;
  size_t number = 0;
  for (const auto& line : kiln::testing::read_lines(file)) {
    ++number;
    if (line.rfind("```", 0) == 0) {
      in_fence = !in_fence;
      continue;
    }
    if (in_fence) continue;
    static const std::regex code("`[^`]*`");
    out.emplace_back(number, std::regex_replace(line, code, "``"));
  }
  return out;
}

// GitHub's anchor of a heading's text.
std::string anchor_of(const std::string& heading) {
  std::string out;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_' || c >= 0x80) {
      out += static_cast<char>(std::tolower(c));
    } else if (c == ' ') {
      out += '-';
    }
  }
  return out;
}

// The anchors of a file's headings (outside code fences), repeated ones numbered.
std::set<std::string> anchors_of(const fs::path& file) {
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  bool in_fence = false;
  static const std::regex heading(R"(^#{1,6}\s+(.*?)\s*$)");
  for (const auto& line : kiln::testing::read_lines(file)) {
    if (line.rfind("```", 0) == 0) in_fence = !in_fence;
    std::smatch m;
    if (in_fence || !std::regex_match(line, m, heading)) continue;
    const std::string anchor = anchor_of(m[1]);
    const int count = seen[anchor]++;
    anchors.insert(count == 0 ? anchor : anchor + "-" + std::to_string(count));
  }
  return anchors;
}

std::vector<fs::path> documents() {
  const fs::path root = KILN_SOURCE_DIR;
  std::vector<fs::path> out = {root / "README.md"};
  for (const auto& entry : fs::directory_iterator(root / "docs")) {
    if (entry.path().extension() == ".md") out.push_back(entry.path());
  }
  return out;
}

TEST(DocLinks, EveryRelativeLinkAndAnchorResolves) {
  static const std::regex link(R"(\]\(([^)\s]+)\))");
  size_t checked = 0;
  for (const auto& doc : documents()) {
    for (const auto& [number, line] : prose_of(doc)) {
      for (std::sregex_iterator it(line.begin(), line.end(), link), end; it != end; ++it) {
        const std::string target = (*it)[1];
        if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
        const auto hash = target.find('#');
        const std::string path = target.substr(0, hash);
        const fs::path file = path.empty() ? doc : doc.parent_path() / path;
        const std::string where = doc.string() + ":" + std::to_string(number) + ": " + target;
        ++checked;
        if (!fs::exists(file)) {
          ADD_FAILURE() << where << ": no such file";
          continue;
        }
        if (hash == std::string::npos) continue;
        EXPECT_EQ(anchors_of(file).count(target.substr(hash + 1)), 1u)
            << where << ": no such heading in " << file.filename();
      }
    }
  }
  EXPECT_GE(checked, 20u) << "README.md and docs/ hold fewer links than they do";
}

// The anchor rule itself, on headings whose GitHub anchors are known.
TEST(DocLinks, AnchorsAreSpelledAsGitHubSpellsThem) {
  EXPECT_EQ(anchor_of("The `--where` language"), "the---where-language");
  EXPECT_EQ(anchor_of("The dashboard: `kiln serve`"), "the-dashboard-kiln-serve");
  EXPECT_EQ(anchor_of("What a run survives"), "what-a-run-survives");
  EXPECT_EQ(anchor_of("run_store and 2.x"), "run_store-and-2x");
}

}  // namespace
