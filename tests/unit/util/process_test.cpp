// Process and StopSignal (core/util/process.h, stop_signal.h): starting programs with their
// output in a pipe or a file, exit codes and signals, waiting on several children, and a
// SIGINT that interrupts a wait instead of ending the process, and a child's resident memory.
// Children are /bin/sh one-liners.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "core/util/process.h"
#include "core/util/stop_signal.h"
#include "test_util.h"

namespace kiln {
namespace {

ProcessOptions shell(const std::string& script) {
  ProcessOptions options;
  options.program = "sh";
  options.argv = {"sh", "-c", script};
  return options;
}

// Everything the child writes to its pipe, until it closes it.
std::string read_all(Process& process) {
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = ::read(process.output_fd(), buf, sizeof buf)) > 0)
    out.append(buf, static_cast<size_t>(n));
  process.close_output();
  return out;
}

TEST(ProcessTest, PipeCarriesStdoutAndStderrAndTheExitCodeComesBack) {
  ProcessOptions options = shell("echo out; echo err >&2; exit 3");
  options.output = ProcessOptions::Output::kPipe;
  Process child = Process::start(options);
  EXPECT_EQ(read_all(child), "out\nerr\n");
  const ExitStatus status = child.wait();
  EXPECT_EQ(status.code, 3);
  EXPECT_EQ(status.signal, 0);
  EXPECT_FALSE(status.success());
  EXPECT_FALSE(child.running());
}

TEST(ProcessTest, ExtraEnvironmentIsSetOrReplaced) {
  ::setenv("KILN_PROCESS_TEST_OLD", "parent", 1);
  ProcessOptions options = shell("echo \"$KILN_PROCESS_TEST_OLD $KILN_PROCESS_TEST_NEW\"");
  options.output = ProcessOptions::Output::kPipe;
  options.extra_env = {{"KILN_PROCESS_TEST_OLD", "child"}, {"KILN_PROCESS_TEST_NEW", "new"}};
  Process child = Process::start(options);
  EXPECT_EQ(read_all(child), "child new\n");
  EXPECT_TRUE(child.wait().success());
  ::unsetenv("KILN_PROCESS_TEST_OLD");
}

TEST(ProcessTest, FileOutputIsAppended) {
  testing::TempDir dir;
  ProcessOptions options = shell("echo line");
  options.output = ProcessOptions::Output::kFile;
  options.output_file = dir / "log";
  EXPECT_TRUE(Process::start(options).wait().success());
  EXPECT_TRUE(Process::start(options).wait().success());
  EXPECT_EQ(testing::read_file(dir / "log"), "line\nline\n");
}

TEST(ProcessTest, AMissingProgramIsAStartErrorWithItsErrno) {
  ProcessOptions options;
  options.program = "kiln-no-such-program";
  options.argv = {"kiln-no-such-program"};
  options.what = "the converter";
  try {
    Process::start(options);
    FAIL() << "started a program that does not exist";
  } catch (const ProcessStartError& e) {
    EXPECT_EQ(e.error(), ENOENT);
    EXPECT_EQ(std::string(e.what()), "cannot start the converter: No such file or directory");
  }
}

TEST(ProcessTest, ASignalEndsTheChildAndIsReportedAsOne) {
  Process child = Process::start(shell("exec sleep 30"));
  EXPECT_FALSE(child.try_wait().has_value());
  child.signal(SIGTERM);
  const ExitStatus status = child.wait();
  EXPECT_EQ(status.signal, SIGTERM);
  EXPECT_EQ(status.shell_code(), 128 + SIGTERM);
  child.signal(SIGTERM);  // after the wait: nothing is sent (the pid may be another's now)
}

TEST(ProcessTest, WaitAnyReturnsTheChildThatEnded) {
  Process slow = Process::start(shell("exec sleep 30"));
  Process quick = Process::start(shell("exit 7"));
  const std::optional<size_t> ended = Process::wait_any({&slow, &quick}, [] { return false; });
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(*ended, 1u);
  EXPECT_EQ(quick.try_wait()->code, 7);
  EXPECT_TRUE(slow.running());
  slow.signal(SIGKILL);
  EXPECT_EQ(slow.wait().signal, SIGKILL);
}

// A child's resident memory as ps reports it (KiB), within the 4 MiB a shell may move.
TEST(ProcessTest, ResidentBytesAreWhatPsReports) {
  Process child = Process::start(shell("x=$(head -c 33554432 /dev/zero | tr '\\0' a); sleep 30"));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double ours = resident_bytes(child.pid());
  const auto ps = testing::run_shell("ps -o rss= -p " + std::to_string(child.pid()));
  child.signal(SIGKILL);
  child.wait();
  ASSERT_EQ(ps.exit_code, 0) << ps.output;
  const double theirs = std::stod(ps.output) * 1024;
  EXPECT_GT(theirs, 32 << 20) << "the shell holds the 32 MiB string";
  EXPECT_NEAR(ours, theirs, 4 << 20);
  EXPECT_EQ(resident_bytes(child.pid()), 0) << "a process that is gone holds nothing";
}

TEST(StopSignalTest, ASignalIsRecordedAndTheOldHandlerComesBack) {
  struct sigaction before {};
  sigaction(SIGINT, nullptr, &before);
  {
    const StopSignal stop;
    EXPECT_FALSE(StopSignal::requested());
    std::raise(SIGINT);
    std::raise(SIGINT);  // kRecord: a second one is recorded too
    EXPECT_EQ(StopSignal::received(), SIGINT);
  }
  struct sigaction after {};
  sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  const StopSignal again;  // a new one starts afresh
  EXPECT_FALSE(StopSignal::requested());
}

TEST(StopSignalTest, ASignalInterruptsWaitAny) {
  const StopSignal stop;
  // SIGINT to this process every 0.1 s, so one arrives while wait_any waits.
  Process sender = Process::start(
      shell("while :; do sleep 0.1; kill -INT " + std::to_string(::getpid()) + " || exit; done"));
  EXPECT_FALSE(Process::wait_any({&sender}, StopSignal::requested).has_value());
  EXPECT_EQ(StopSignal::received(), SIGINT);
  sender.signal(SIGKILL);
  sender.wait();
}

TEST(StopSignalTest, ASignalThatCameBeforeWaitAnyIsNotMissed) {
  // The race a blocking waitpid() loses: the signal lands after the caller last looked and
  // before the wait begins, so no EINTR ever comes and the wait lasts until the child ends.
  const StopSignal stop;
  Process child = Process::start(shell("exec sleep 30"));
  std::raise(SIGINT);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(Process::wait_any({&child}, StopSignal::requested).has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(child.running());
  // And a limit ends the wait with the child still running.
  EXPECT_FALSE(Process::wait_any(
                   {&child}, [] { return false; }, std::chrono::milliseconds(50))
                   .has_value());
  EXPECT_TRUE(child.running());
  child.signal(SIGKILL);
  child.wait();
}

TEST(StopSignalTest, KAbandonMarksTheSecondSignalAndForgetsItOnceUninstalled) {
  {
    const StopSignal stop(StopSignal::Second::kAbandon);
    std::raise(SIGTERM);
    EXPECT_EQ(StopSignal::received(), SIGTERM);
    EXPECT_FALSE(StopSignal::abandoned());
    std::raise(SIGTERM);  // the process goes on: the handler only records it
    EXPECT_TRUE(StopSignal::abandoned());
  }
  EXPECT_FALSE(StopSignal::abandoned());  // later work in this process is not abandoned
  const StopSignal record;                // kRecord: a second signal abandons nothing
  std::raise(SIGINT);
  std::raise(SIGINT);
  EXPECT_FALSE(StopSignal::abandoned());
}

}  // namespace
}  // namespace kiln
