// The job script `kiln sweep --launcher slurm` writes, against text written out by hand here:
// sbatch's --array syntax (ranges, lists, the %K throttle) and the script's words as bash reads
// them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/app/slurm/sbatch.h"
#include "test_util.h"

namespace kiln {
namespace {

TEST(SlurmScript, ArraySpecsAreSbatchRangesAndLists) {
  EXPECT_EQ(array_spec({0, 1, 2, 3}, 2), "0-3%2");
  EXPECT_EQ(array_spec({1, 3}, 0), "1,3");
  EXPECT_EQ(array_spec({0, 2, 3, 4, 7}, 1), "0,2-4,7%1");
  EXPECT_EQ(array_spec({5}, 0), "5");
}

TEST(SlurmScript, OptionsThenTheArrayThenExecOfTheTaskWithEachWordQuotedForBash) {
  SlurmOptions options;
  options.partition = "gpu";
  options.time = "1:00:00";
  options.gpus_per_node = 2;
  options.cpus_per_task = 4;
  options.signal_seconds = 90;
  options.sbatch_args = {"--account=lab"};
  const std::vector<std::string> args = sbatch_options(options, "kiln:s", "/out/s/slurm", "/w");
  const std::string script = sbatch_script(
      args, "0-3%2", {"/bin/kiln", "sweep", "task", "it's", "--db", "/a b/k.db"}, "a comment");
  EXPECT_EQ(script, R"(#!/bin/bash
# a comment
#SBATCH --job-name=kiln:s
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=4
#SBATCH --gpus-per-node=2
#SBATCH --partition=gpu
#SBATCH --time=1:00:00
#SBATCH --chdir=/w
#SBATCH --output=/out/s/slurm/%A_%a.out
#SBATCH --open-mode=append
#SBATCH --signal=B:USR1@90
#SBATCH --requeue
#SBATCH --account=lab
#SBATCH --array=0-3%2
exec /bin/kiln sweep task 'it'\''s' --db '/a b/k.db'
)");
  // bash reads the script's words back as they were given: its exec line, printing them instead.
  const std::string exec_line = script.substr(script.rfind("exec /bin/kiln "));
  testing::TempDir dir;
  testing::write_text(dir / "words.sh",
                      "printf '%s\\n'" + exec_line.substr(std::string("exec /bin/kiln").size()));
  FILE* pipe = ::popen(("bash " + (dir / "words.sh")).c_str(), "r");
  char buffer[256] = {};
  const size_t n = std::fread(buffer, 1, sizeof buffer - 1, pipe);
  ::pclose(pipe);
  EXPECT_EQ(std::string(buffer, n), "sweep\ntask\nit's\n--db\n/a b/k.db\n");
}

// Paths with a space, quotes, a backslash or '#' reach sbatch whole: each #SBATCH word below is
// split the way Slurm's own reader does it (src/sbatch/opt.c, _get_argument: quotes of either
// kind group, a backslash escapes the next character, an unquoted '#' ends the line), written
// out here from that reading, not from Kiln's writer. A line break is refused: it would start
// a new line of the script.
std::string slurm_reads(const std::string& line) {
  std::string word;
  bool quoted = false, escaped = false;
  char quote = 0;
  for (char c : line) {
    if (escaped) {
      escaped = false;
    } else if (c == '\\') {
      escaped = true;
      continue;
    } else if (quoted) {
      if (c == quote) {
        quoted = false;
        continue;
      }
    } else if (c == '"' || c == '\'') {
      quoted = true;
      quote = c;
      continue;
    } else if (c == '#' || std::isspace(static_cast<unsigned char>(c))) {
      break;
    }
    word += c;
  }
  return word;
}

TEST(SlurmScript, PathsWithSpacesQuotesAndHashesReachSbatchWholeAndALineBreakIsRefused) {
  const std::string workdir = "/w/a b/it's \"q\" #1\\x";
  const std::vector<std::string> args =
      sbatch_options(SlurmOptions{}, "kiln:s", "/out/s p/slurm", workdir);
  const std::string script = sbatch_script(args, "0-1", {"/bin/kiln"}, "store /a b/k.db");
  std::vector<std::string> read_back;
  std::istringstream lines(script);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("#SBATCH ", 0) == 0) read_back.push_back(slurm_reads(line.substr(8)));
  }
  EXPECT_NE(std::find(read_back.begin(), read_back.end(), "--chdir=" + workdir), read_back.end())
      << script;
  EXPECT_NE(std::find(read_back.begin(), read_back.end(), "--output=/out/s p/slurm/%A_%a.out"),
            read_back.end())
      << script;
  EXPECT_NE(script.find("#SBATCH --nodes=1\n"), std::string::npos) << script;  // plain: as is
  for (const auto& [dir, comment] :
       {std::pair<std::string, std::string>{"/w/a\nb", "c"}, {"/w", "store /a\n#SBATCH --x"}}) {
    const std::string error = testing::user_error_of([&] {
      sbatch_script(sbatch_options(SlurmOptions{}, "kiln:s", "/o", dir), "0", {"/bin/kiln"},
                    comment);
    });
    EXPECT_NE(error.find("holds a line break"), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace kiln
