#include "core/util/stop_signal.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>

namespace kiln {

namespace {

// Read and written from the signal handler: lock-free atomics are async-signal-safe.
std::atomic<int> g_received{0};
std::atomic<bool> g_abandon_on_second{false};
std::atomic<bool> g_abandoned{false};
int g_installed = 0;  // StopSignals alive; changed only by their constructors and destructors
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

void on_stop_signal(int signal) {
  if (g_received.exchange(signal) != 0 && g_abandon_on_second.load()) g_abandoned = true;
}

int g_polled = 0;  // kPolled StopSignals alive

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Under a kPolled StopSignal, records the signals pending for this process or thread, on any
// thread that blocks them: the one that made the StopSignal, and those started after it, such as
// a snapshot's background writer, which so sees a second signal that comes while the training
// thread waits for it.
void take_pending() {
  if (g_polled == 0) return;
  const sigset_t set = stop_signals();
  sigset_t blocked;
  pthread_sigmask(SIG_BLOCK, nullptr, &blocked);
  if (!sigismember(&blocked, SIGINT) || !sigismember(&blocked, SIGTERM)) return;
  const timespec now{0, 0};
  for (int signal; (signal = sigtimedwait(&set, nullptr, &now)) > 0;)
    on_stop_signal(signal);
}

// Threads that existed before a kPolled StopSignal keep the mask they started with (a pthreads
// OpenBLAS starts its workers when it loads, before main; OpenMP's pool may be up already), and
// a signal the kernel gave one of them would run the handler there, inside whatever kernel it
// runs. Each is asked, by a real-time signal of its own, to add the two to the mask it returns to
// (its saved context's, which sigreturn restores).
std::atomic<int> g_masked_threads{0};

// Whether thread `tid` of this process blocks `signal`, as the kernel reports its mask
// (/proc/self/task/TID/status, SigBlk: hex, bit N-1 for signal N); false when it cannot be read.
bool thread_blocks(pid_t tid, int signal) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/task/%d/status", static_cast<int>(tid));
  std::ifstream status(path);
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigBlk:", 0) == 0) {
      return (std::strtoull(line.c_str() + 7, nullptr, 16) >> (signal - 1)) & 1;
    }
  }
  return false;
}

void add_stop_signals_to_saved_mask(int, siginfo_t*, void* context) {
  auto* saved = static_cast<ucontext_t*>(context);
  sigaddset(&saved->uc_sigmask, SIGINT);
  sigaddset(&saved->uc_sigmask, SIGTERM);
  g_masked_threads.fetch_add(1);
}

void block_in_existing_threads() {
  const int ask = SIGRTMIN + 3;  // glibc keeps the first two for itself
  struct sigaction action {
  }, previous{};
  action.sa_sigaction = add_stop_signals_to_saved_mask;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(ask, &action, &previous) != 0) return;
  g_masked_threads = 0;
  const pid_t self = static_cast<pid_t>(::syscall(SYS_gettid));
  int asked = 0;
  if (DIR* tasks = ::opendir("/proc/self/task")) {
    while (const dirent* entry = ::readdir(tasks)) {
      const pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
      // A thread that blocks the question would never answer it: it is not asked (one that
      // blocks every signal, as some libraries' workers do, runs no handler anyway).
      if (tid <= 0 || tid == self || thread_blocks(tid, ask)) continue;
      if (::syscall(SYS_tgkill, ::getpid(), tid, ask) == 0) ++asked;
    }
    ::closedir(tasks);
  }
  // A thread that ends before it takes the signal never answers: a second is enough for the rest.
  for (int waited = 0; g_masked_threads.load() < asked && waited < 1000; ++waited) {
    const timespec millisecond{0, 1000000};
    ::nanosleep(&millisecond, nullptr);
  }
  // A question still pending (a thread that blocked it after its mask was read, or had not run
  // yet) would meet the previous action, the default one ending the process, once its thread
  // unblocks it: ignoring the signal discards every pending one, in every thread (POSIX
  // sigaction), before the previous action comes back.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(ask, &ignore, nullptr);
  sigaction(ask, &previous, nullptr);
}

}  // namespace

StopSignal::StopSignal(Second second, Delivery delivery) : polled_(delivery == Delivery::kPolled) {
  // A fresh start for the outermost one: a signal recorded under an earlier StopSignal (an
  // earlier sweep in the same test process) must not stop this one. A nested one keeps what
  // the enclosing one recorded.
  if (g_installed++ == 0) {
    g_received = 0;
    g_abandoned = false;
  }
  previous_second_ =
      g_abandon_on_second.exchange(second == Second::kAbandon) ? Second::kAbandon : Second::kRecord;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocking call returns EINTR, so its loop sees the stop
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
  if (polled_) {
    const sigset_t set = stop_signals();
    pthread_sigmask(SIG_BLOCK, &set, &previous_mask_);
    if (g_polled++ == 0) block_in_existing_threads();
  }
}

StopSignal::~StopSignal() {
  if (polled_) {
    // Taken first: unblocked under the previous handlers, a pending SIGTERM would end the
    // process. One arriving between here and the unblocking reaches the handler, still ours.
    take_pending();
    --g_polled;
    pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
  }
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
  g_abandon_on_second = previous_second_ == Second::kAbandon;
  // Code that runs later in the process (the next test, a snapshot written by another command)
  // must not find itself abandoned by a signal meant for this one.
  if (--g_installed == 0) g_abandoned = false;
}

int StopSignal::received() {
  take_pending();
  return g_received.load();
}

bool StopSignal::abandoned() {
  take_pending();
  return g_abandoned.load();
}

}  // namespace kiln
