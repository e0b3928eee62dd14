// How the server tests start their servers and say they cannot: under CI=true a server that cannot
// start fails its test (tests/support/server_unavailable.h), where elsewhere it skips; the Slurm
// cluster's daemons take ports below the kernel's ephemeral range, none twice; and a cluster
// stopped leaves no process of its jobs behind for the next one to start beside.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "server_unavailable.h"
#include "slurm_cluster.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::shell;

// This test binary again, on a Slurm test whose cluster cannot start: sbatch is not on PATH.
testing::CommandResult slurm_test_without_sbatch(const std::string& ci) {
  return shell(
      fmt::format("CI={} PATH=/nonexistent '{}' "
                  "--gtest_filter=SlurmSweep.FourMembersTwoAtATimeMatchTheSameSweepRunLocally",
                  ci, std::filesystem::read_symlink("/proc/self/exe").string()));
}

TEST(ServerStart, AServerThatCannotStartFailsItsTestOnCiAndSkipsItElsewhere) {
  const testing::CommandResult on_ci = slurm_test_without_sbatch("true");
  EXPECT_NE(on_ci.exit_code, 0) << on_ci.output;
  EXPECT_NE(on_ci.output.find("CI=true: a server cannot start here, which fails the test: a "
                              "one-node Slurm cannot start here: sbatch is not installed"),
            std::string::npos)
      << on_ci.output;
  EXPECT_NE(on_ci.output.find("[  FAILED  ] SlurmSweep.FourMembers"), std::string::npos)
      << on_ci.output;
  const testing::CommandResult elsewhere = slurm_test_without_sbatch("");
  EXPECT_EQ(elsewhere.exit_code, 0) << elsewhere.output;
  EXPECT_NE(elsewhere.output.find("[  SKIPPED ] SlurmSweep.FourMembers"), std::string::npos)
      << elsewhere.output;
}

// The kernel's ephemeral ports, from which a client's connect takes its own.
std::pair<int, int> ephemeral_range() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  in >> low >> high;
  return {low, high};
}

TEST(ServerStart, TheClustersDaemonsGetPortsOfTheirOwnThatNoClientTakes) {
  const auto [low, high] = ephemeral_range();
  ASSERT_GT(low, 0);
  const std::vector<int> ports = testing::SlurmCluster::daemon_ports(5);
  ASSERT_EQ(ports.size(), 5u);
  EXPECT_EQ(std::set<int>(ports.begin(), ports.end()).size(), 5u);
  for (int port : ports) {
    EXPECT_TRUE(port < low || port > high) << port << " is in " << low << "-" << high;
    EXPECT_GE(port, 1024);
  }
}

// A job's process that left its job (setsid, as a daemon does) outlives the job's end and its
// cancel; the cluster that stops kills it rather than leave it running beside the next cluster.
TEST(ServerStart, AStoppedClusterLeavesNoProcessOfItsJobs) {
  std::string why;
  auto cluster = testing::SlurmCluster::start(why);
  if (!cluster) KILN_SERVER_UNAVAILABLE("a one-node Slurm cannot start here: " + why);
  const std::string marker = cluster->folder() + "/escaped";
  const testing::CommandResult submitted = shell(fmt::format(
      "sbatch --parsable --output /dev/null --wrap \"setsid sleep 300 & echo \\$! > '{}'\"",
      marker));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  ASSERT_TRUE(testing::wait_for(
      [&] { return std::filesystem::exists(marker) && !testing::read_file(marker).empty(); },
      std::chrono::seconds(60)))
      << cluster->logs();
  const pid_t escaped = std::stoi(testing::read_file(marker));
  ASSERT_EQ(::kill(escaped, 0), 0) << "the escaped process ended by itself";
  cluster.reset();
  const bool gone = testing::wait_for(
      [&] {
        // Gone, or a zombie that no parent of this process's reaps: /proc says state Z.
        const std::string status =
            testing::read_file("/proc/" + std::to_string(escaped) + "/status");
        return status.empty() || status.find("State:\tZ") != std::string::npos;
      },
      std::chrono::seconds(10));
  if (!gone) ::kill(escaped, SIGKILL);
  EXPECT_TRUE(gone) << "pid " << escaped << " outlived its cluster";
}

}  // namespace
}  // namespace kiln
