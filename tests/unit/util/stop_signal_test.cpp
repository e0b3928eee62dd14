// StopSignal's polled delivery (core/util/stop_signal.h) reaches threads that were running before
// it: their signal masks, as the kernel reports them in /proc/self/task/TID/status (SigBlk), hold
// SIGINT and SIGTERM once it is made; and a SIGTERM sent to the process is then taken by the
// polling thread between steps, never by a handler in another thread. A thread that blocks every
// signal costs no wait and is left no signal pending.
#include "core/util/stop_signal.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

namespace kiln {
namespace {

// The blocked-signal mask of thread `tid`, as /proc/self/task/TID/status prints it (hex).
uint64_t blocked_signals_of(pid_t tid) {
  std::ifstream status("/proc/self/task/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigBlk:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  }
  return 0;
}

bool blocks(uint64_t mask, int signal) {
  return (mask >> (signal - 1)) & 1;
}

TEST(StopSignal, PolledDeliveryBlocksTheSignalsInThreadsThatWereAlreadyRunning) {
  std::atomic<bool> done{false};
  std::atomic<pid_t> worker_tid{0};
  std::thread worker([&] {  // a library's worker started before the StopSignal
    worker_tid = static_cast<pid_t>(::syscall(SYS_gettid));
    while (!done)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (worker_tid == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_FALSE(blocks(blocked_signals_of(worker_tid), SIGTERM));
  {
    StopSignal stop(StopSignal::Second::kRecord, StopSignal::Delivery::kPolled);
    const uint64_t mask = blocked_signals_of(worker_tid);
    EXPECT_TRUE(blocks(mask, SIGINT)) << std::hex << mask;
    EXPECT_TRUE(blocks(mask, SIGTERM)) << std::hex << mask;
    ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
    EXPECT_EQ(StopSignal::received(), SIGTERM);
  }
  done = true;
  worker.join();
}

// A thread started under a polled StopSignal (a snapshot's background writer) takes the signals
// itself when it asks: two that came while the thread that made the StopSignal was not asking
// (waiting for that writer, say) make it abandoned there.
TEST(StopSignal, AThreadStartedUnderPolledDeliveryTakesTheSignalsWhenItAsks) {
  StopSignal stop(StopSignal::Second::kAbandon, StopSignal::Delivery::kPolled);
  ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  bool abandoned = false;
  std::thread writer([&] { abandoned = StopSignal::abandoned(); });
  writer.join();
  EXPECT_TRUE(abandoned);
  EXPECT_EQ(StopSignal::received(), SIGTERM);
}

// A thread that blocks every signal, as some libraries' workers do, cannot be asked to block the
// two: it costs no wait (the question's answer used to be awaited for a second), and no question
// is left pending in it once the StopSignal is made, where unblocking it would meet the default
// action of a real-time signal and end the process.
TEST(StopSignal, PolledDeliveryNeitherWaitsForNorLeavesASignalInAThreadThatBlocksAll) {
  std::atomic<int> stage{0};  // 1: the worker blocks every signal; 2: the StopSignal is made
  std::atomic<bool> real_time_pending{true};
  std::thread worker([&] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    stage = 1;
    while (stage != 2)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    sigset_t pending;
    sigpending(&pending);
    bool any = false;
    for (int signal = SIGRTMIN; signal <= SIGRTMAX; ++signal)
      any = any || sigismember(&pending, signal);
    real_time_pending = any;
  });
  while (stage != 1)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto start = std::chrono::steady_clock::now();
  {
    StopSignal stop(StopSignal::Second::kRecord, StopSignal::Delivery::kPolled);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 0.5);
    stage = 2;
    worker.join();
  }
  EXPECT_FALSE(real_time_pending);
}

}  // namespace
}  // namespace kiln
