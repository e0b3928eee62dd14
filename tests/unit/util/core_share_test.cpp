// The machine's Kiln processes sharing its cores (core/util/core_share.h), with real processes:
// children that register and wait, one of them killed with SIGKILL as a crashed run would be.
#include "core/util/core_share.h"

#include <signal.h>
#include <sys/stat.h>
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

// A registry another user made, one others may write, or a symbolic link is not used: whoever
// made it could count this user's runs or make them think the machine busy.
TEST(CoreShare, ARegistryThatIsNotThisUsersOwnIsNotUsed) {
  testing::TempDir dir;
  ::setenv("XDG_RUNTIME_DIR", dir.str().c_str(), 1);
  const std::string kiln = dir / "kiln";
  const auto refused = [&] {
    CoreShare share(2);
    const pid_t other = registered_child(2);
    const int seen = share.processes();
    kill_and_reap(other, SIGKILL);
    return seen == 1;  // neither registered: each is alone
  };
  ASSERT_EQ(::mkdir(kiln.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(kiln.c_str(), 0777), 0);  // others may write (no umask)
  EXPECT_TRUE(refused());
  ASSERT_EQ(::chmod(kiln.c_str(), 0700), 0);
  if (::getuid() == 0) {  // only root can give a directory away
    ASSERT_EQ(::chown(kiln.c_str(), 65534, 65534), 0);
    EXPECT_TRUE(refused());
    ASSERT_EQ(::chown(kiln.c_str(), 0, 0), 0);
  }
  std::filesystem::remove_all(kiln);
  ASSERT_EQ(::mkdir((dir / "elsewhere").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((dir / "elsewhere").c_str(), kiln.c_str()), 0);
  EXPECT_TRUE(refused());
  std::filesystem::remove(kiln);
  {  // the same place made properly is used
    CoreShare share(2);
    const pid_t other = registered_child(2);
    EXPECT_EQ(share.processes(), 2);
    kill_and_reap(other, SIGKILL);
  }
  ::unsetenv("XDG_RUNTIME_DIR");
}

}  // namespace
}  // namespace kiln
