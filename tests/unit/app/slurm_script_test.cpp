// The job script `kiln sweep --launcher slurm` writes, against text written out by hand here:
// sbatch's --array syntax (ranges, lists, the %K throttle) and the script's words as bash reads
// them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/app/slurm_tools.h"
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

}  // namespace
}  // namespace kiln
