// The one SIGINT/SIGTERM set-up. While a StopSignal lives, either signal is recorded instead of
// ending the process, so the program can stop at a point of its choosing (a run after its
// current step and a snapshot, a sweep or a launcher after forwarding the signal to its
// children). The handlers it replaced come back when it is destroyed. No SA_RESTART: a blocking
// call such as waitpid() returns EINTR when a signal arrives, so a waiting loop notices it.
// The handler only stores into lock-free atomics: all the work of stopping happens in the
// program's own code, where it may take locks, write files and commit to the run store.
//
// A training process asks for Delivery::kPolled instead: no handler may run in the middle of a
// kernel there. oneDNN's fp32 sgemm corrupts the heap when a signal handler interrupts it (a no-op
// SIGUSR1 handler every 0.5 ms over 300,000 small sgemm calls: `free(): invalid pointer`, every
// time; blocked around the call, or with its bf16 GEMM: never), and four runs stopped together with
// SIGTERM died of it now and then (e2e Faults). So SIGINT and SIGTERM stay blocked in the thread
// that made the StopSignal, in every thread started after it (OpenMP's workers among them) and in
// every thread already running (which each add them to their mask when asked, by a real-time
// signal a thread that blocks it is not sent), and are taken from
// the pending set when received() or abandoned() is asked, between steps, by whichever of those
// threads asks (a snapshot's background writer too, while the training thread waits for it). Two
// signals that arrive before one such question count as one.
#pragma once

#include <csignal>

namespace kiln {

class StopSignal {
 public:
  enum class Second {
    kRecord,   // a second signal is recorded like the first (the caller escalates itself)
    kAbandon,  // a second signal also sets abandoned(): stop now, dropping a snapshot midway
  };
  enum class Delivery {
    kInterrupt,  // the handler records a signal as it arrives, and a blocking call returns EINTR
    kPolled,     // blocked, and taken when asked (above); a blocking call is not interrupted
  };
  explicit StopSignal(Second second = Second::kRecord, Delivery delivery = Delivery::kInterrupt);
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // The last signal received while a StopSignal was installed; 0 when none.
  static int received();
  static bool requested() { return received() != 0; }
  // A second signal under a kAbandon StopSignal that is still installed: the user will not wait
  // for a snapshot. Work that can be dropped (a snapshot being written) checks it and gives up.
  static bool abandoned();

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
  Second previous_second_ = Second::kRecord;  // an enclosing StopSignal's choice, restored too
  bool polled_ = false;
  sigset_t previous_mask_{};  // this thread's mask before a kPolled StopSignal blocked the two
};

}  // namespace kiln
