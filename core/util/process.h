// The one way Kiln starts another program: `kiln sweep` its members, `kiln launch` its ranks
// (both re-running /proc/self/exe), `kiln plot` rsvg-convert. posix_spawn underneath, so a
// failed exec is reported to the caller (ENOENT: not installed) rather than as a child that
// exits 127, and nothing runs between fork and exec in a process that may have threads.
//
// Rules: a Process is waited for by its owner (wait, try_wait or wait_any); destroying one
// closes its output pipe but neither stops nor waits for it (a sweep that fails leaves its
// members to finish their runs). Signals go only to a child not yet waited for, never to a
// recycled pid.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/util/error.h"

namespace kiln {

struct ProcessOptions {
  enum class Output {
    kInherit,  // the child writes where this process writes
    kFile,     // stdout and stderr appended to output_file (created 0644)
    kPipe,     // stdout and stderr into one pipe, read through output_fd()
  };
  std::string program;            // a path ("/proc/self/exe"), or a name looked up on PATH
  std::vector<std::string> argv;  // argv[0] included: the name the child sees
  // NAME=value added to this process's environment for the child (a NAME it has is replaced).
  std::vector<std::pair<std::string, std::string>> extra_env;
  Output output = Output::kInherit;
  std::string output_file;
  // Its own process group, so a terminal's Ctrl-C reaches only this process, which passes it
  // on once, instead of every child at the same moment.
  bool own_process_group = false;
  // The child is sent SIGTERM when this process dies, however it dies (a SIGKILLed sweep worker
  // must not leave its member training): a Kiln child asks the kernel for it itself, first thing
  // (die_with_parent), since posix_spawn runs nothing between fork and exec.
  bool dies_with_parent = false;
  std::string what;  // names the child in errors ("a sweep member"); argv[0] when empty
};

// How a child ended.
struct ExitStatus {
  int code = 0;    // its exit code, when it exited
  int signal = 0;  // the signal that ended it, else 0
  bool success() const { return signal == 0 && code == 0; }
  // As a shell reports it: the exit code, or 128 + the signal.
  int shell_code() const { return signal != 0 ? 128 + signal : code; }
};

// The child could not be started: "cannot start <what>: <why>", with the errno for callers that
// explain a cause of their own.
class ProcessStartError : public UserError {
 public:
  ProcessStartError(const std::string& message, int error) : UserError(message), error_(error) {}
  int error() const { return error_; }

 private:
  int error_;
};

class Process {
 public:
  // A ProcessStartError when the output file cannot be opened or the program cannot be run.
  static Process start(const ProcessOptions& options);

  // Waits until one of `children` (not empty) ends and returns its index; nullopt as soon as
  // `interrupted()` is true, or when `limit` (if given) passed first. `interrupted` is asked
  // before the first wait and every 20 ms, never left to a signal's EINTR: a signal that lands
  // between the caller's check and a blocking wait (or in another thread) would otherwise go
  // unnoticed until a child ends. Waits on any child of this process: one missing from the
  // list is reaped and passed over.
  static std::optional<size_t> wait_any(
      const std::vector<Process*>& children, const std::function<bool()>& interrupted,
      std::optional<std::chrono::milliseconds> limit = std::nullopt);

  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  pid_t pid() const { return pid_; }
  // True until it has been waited for.
  bool running() const { return !status_.has_value(); }
  // The read end of the kPipe output, or -1 (also after close_output()).
  int output_fd() const { return output_; }
  void close_output();

  // Sends `signal` while the child has not been waited for; nothing after.
  void signal(int signal) const;
  // Its status when it has ended (reaped now), nullopt while it runs; never blocks.
  std::optional<ExitStatus> try_wait();
  // Blocks until it ends; a signal does not cut the wait short.
  ExitStatus wait();

 private:
  Process(pid_t pid, int output) : pid_(pid), output_(output) {}

  pid_t pid_ = -1;
  int output_ = -1;
  std::optional<ExitStatus> status_;
};

// A child run to its end with its output captured: its code as a shell reports it, and what it
// wrote to stdout and stderr.
struct CapturedRun {
  int code = 0;
  std::string output;
};
// Starts `options` with its output piped here (a ProcessStartError as Process::start's) and
// waits for it.
CapturedRun run_captured(ProcessOptions options);

// This machine's name (gethostname): recorded with each run, and part of TensorBoard file names.
std::string host_name();

// The memory process `pid` holds resident now (VmRSS of /proc/PID/status), in bytes; 0 when it
// cannot be read (the process is gone, not Linux).
double resident_bytes(pid_t pid);

// In a Kiln child started with dies_with_parent: asks the kernel for SIGTERM when the parent
// dies (prctl's PR_SET_PDEATHSIG), and ends the process at once when it died already. Nothing
// for any other process, nor for one a wrapper of the parent's started (srun's ranks).
void die_with_parent();

}  // namespace kiln
