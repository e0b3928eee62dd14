// The machine's Kiln processes sharing its cores (core/util/core_share.h), with real processes:
// children that register and wait, one of them killed with SIGKILL as a crashed run would be.
#include "core/util/core_share.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "test_util.h"

namespace kiln {
namespace {

// A child process that registers and then waits to be killed; returns once it has registered.
pid_t registered_child(int cores) {
  int ready[2];
  EXPECT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    CoreShare share(cores);
    const char byte = 1;
    if (::write(ready[1], &byte, 1) != 1) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  EXPECT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  return pid;
}

void kill_and_reap(pid_t pid, int signal) {
  ::kill(pid, signal);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

TEST(CoreShare, ProcessesShareTheCoresAndADeadOneIsForgotten) {
  testing::TempDir dir;
  ::setenv("XDG_RUNTIME_DIR", dir.str().c_str(), 1);
  {
    CoreShare mine(4);
    EXPECT_EQ(mine.processes(), 1);
    EXPECT_EQ(mine.fair_threads(), 4);
    const pid_t first = registered_child(4);
    const pid_t second = registered_child(4);
    EXPECT_EQ(mine.processes(), 3);
    EXPECT_EQ(mine.fair_threads(), 1);  // 4 cores / 3 processes, rounded down
    kill_and_reap(first, SIGKILL);      // no destructor ran: its file stays, unlocked
    const std::string left = dir / ("kiln/running/" + std::to_string(first));
    EXPECT_TRUE(std::filesystem::exists(left));
    EXPECT_EQ(mine.processes(), 2);
    EXPECT_FALSE(std::filesystem::exists(left));
    EXPECT_EQ(mine.fair_threads(), 2);
    kill_and_reap(second, SIGKILL);
    EXPECT_EQ(mine.processes(), 1);
  }
  // The last one out leaves nothing behind.
  EXPECT_TRUE(std::filesystem::is_empty(dir / "kiln/running"));
  ::unsetenv("XDG_RUNTIME_DIR");
}

TEST(CoreShare, WithoutARegistryAProcessIsAlone) {
  ::setenv("XDG_RUNTIME_DIR", "/proc/kiln-cannot-write-here", 1);
  CoreShare alone(2);
  EXPECT_EQ(alone.processes(), 1);
  EXPECT_EQ(alone.fair_threads(), 2);
  ::unsetenv("XDG_RUNTIME_DIR");
}

}  // namespace
}  // namespace kiln
