// The one SIGINT/SIGTERM set-up. While a StopSignal lives, either signal is recorded instead of
// ending the process, so the program can stop at a point of its choosing (a run after its
// current step and a snapshot, a sweep or a launcher after forwarding the signal to its
// children). The handlers it replaced come back when it is destroyed. No SA_RESTART: a blocking
// call such as waitpid() returns EINTR when a signal arrives, so a waiting loop notices it.
#pragma once

#include <csignal>

namespace kiln {

class StopSignal {
 public:
  enum class Second {
    kRecord,  // a second signal is recorded like the first (the caller escalates itself)
    kExit,    // a second signal ends the process at once, exit status 128 + signal
  };
  explicit StopSignal(Second second = Second::kRecord);
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // The last signal received while a StopSignal was installed; 0 when none.
  static int received();
  static bool requested() { return received() != 0; }

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
  Second previous_second_ = Second::kRecord;  // an enclosing StopSignal's choice, restored too
};

}  // namespace kiln
