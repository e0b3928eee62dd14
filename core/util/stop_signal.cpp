#include "core/util/stop_signal.h"

#include <pthread.h>

#include <atomic>
#include <ctime>

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

// Under a kPolled StopSignal: the thread that blocked the signals, which alone may take them.
int g_polled = 0;  // kPolled StopSignals alive
pthread_t g_polling_thread{};

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Records the signals pending for this process or thread, where this thread blocked them.
void take_pending() {
  if (g_polled == 0 || !pthread_equal(pthread_self(), g_polling_thread)) return;
  const sigset_t set = stop_signals();
  const timespec now{0, 0};
  for (int signal; (signal = sigtimedwait(&set, nullptr, &now)) > 0;)
    on_stop_signal(signal);
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
    if (g_polled++ == 0) g_polling_thread = pthread_self();
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
