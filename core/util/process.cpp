#include "core/util/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <system_error>

#include <fmt/format.h>

#include "core/util/env.h"

extern char** environ;

namespace kiln {

namespace {

ExitStatus decode(int status) {
  if (WIFSIGNALED(status)) return ExitStatus{0, WTERMSIG(status)};
  return ExitStatus{WEXITSTATUS(status), 0};
}

// This process's environment with `extra` set on top, as NAME=value strings.
std::vector<std::string> child_environment(
    const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry; ++entry) {
    const std::string text(*entry);
    const std::string name = text.substr(0, text.find('='));
    bool replaced = false;
    for (const auto& [key, _] : extra)
      replaced = replaced || key == name;
    if (!replaced) env.push_back(text);
  }
  for (const auto& [key, value] : extra)
    env.push_back(key + "=" + value);
  return env;
}

// The char* array exec takes; points into `strings`, which must outlive it.
std::vector<char*> pointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings)
    out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Descriptors the parent opens for the child's output, closed however start() ends.
struct OutputEnds {
  int child = -1;   // becomes the child's stdout and stderr
  int parent = -1;  // the pipe's read end, handed to the Process
  ~OutputEnds() {
    if (child >= 0) ::close(child);
    if (parent >= 0) ::close(parent);
  }
};

// posix_spawn's two attribute objects, destroyed however start() ends.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
  }
};

// Opens the descriptors of options.output; O_CLOEXEC everywhere, so no other child inherits
// them (dup2 onto 1 and 2 clears the flag for this child's copies).
void open_output(const ProcessOptions& options, const std::string& what, OutputEnds& ends) {
  using Output = ProcessOptions::Output;
  if (options.output == Output::kFile) {
    ends.child =
        ::open(options.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (ends.child < 0) {
      const int error = errno;
      throw ProcessStartError(fmt::format("cannot open '{}' for the output of {}: {}",
                                          options.output_file, what, std::strerror(error)),
                              error);
    }
  } else if (options.output == Output::kPipe) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      const int error = errno;
      throw ProcessStartError(fmt::format("cannot start {}: {}", what, std::strerror(error)),
                              error);
    }
    ends.parent = fds[0];
    ends.child = fds[1];
  }
}

}  // namespace

namespace {

// The parent a dies_with_parent child must outlive by no more than a signal: its pid.
constexpr const char* kParentPid = "KILN_DIE_WITH_PARENT";

}  // namespace

void die_with_parent() {
  const int64_t parent = env_integer(kParentPid, 0, 0, std::numeric_limits<pid_t>::max());
  if (parent == 0) return;
  ::unsetenv(kParentPid);  // its own children have another parent (and an exec keeps the request)
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  const pid_t now = ::getppid();
  if (now == static_cast<pid_t>(parent)) return;
  // Reparented to init: the parent died before the request took, and the signal will never come.
  if (now == 1) ::raise(SIGTERM);
  // Started by a wrapper the parent ran (srun's ranks): the wrapper is the one to answer to.
  ::prctl(PR_SET_PDEATHSIG, 0);
}

Process Process::start(const ProcessOptions& options) {
  const std::string what = options.what.empty() ? options.argv.at(0) : options.what;
  OutputEnds ends;
  open_output(options, what, ends);
  SpawnSetup setup;
  if (ends.child >= 0) {
    posix_spawn_file_actions_adddup2(&setup.actions, ends.child, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&setup.actions, ends.child, STDERR_FILENO);
  }
  // The child starts with no signal blocked, whatever this thread blocks (a training process
  // keeps SIGINT and SIGTERM blocked: core/util/stop_signal.h).
  short flags = POSIX_SPAWN_SETSIGMASK;
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&setup.attributes, &none);
  if (options.own_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&setup.attributes, 0);
  }
  posix_spawnattr_setflags(&setup.attributes, flags);
  const std::vector<char*> argv = pointers(options.argv);
  std::vector<std::pair<std::string, std::string>> extra_env = options.extra_env;
  if (options.dies_with_parent) extra_env.emplace_back(kParentPid, std::to_string(::getpid()));
  const std::vector<std::string> env_strings = child_environment(extra_env);
  const std::vector<char*> env = pointers(env_strings);
  // A name without '/' is looked up on PATH, as a shell would.
  const bool on_path = options.program.find('/') == std::string::npos;
  pid_t pid = -1;
  const int error = (on_path ? ::posix_spawnp : ::posix_spawn)(
      &pid, options.program.c_str(), &setup.actions, &setup.attributes, argv.data(), env.data());
  if (error != 0) {
    throw ProcessStartError(fmt::format("cannot start {}: {}", what, std::strerror(error)), error);
  }
  Process process(pid, ends.parent);
  ends.parent = -1;  // the Process owns it now
  return process;
}

std::optional<size_t> Process::wait_any(const std::vector<Process*>& children,
                                        const std::function<bool()>& interrupted,
                                        std::optional<std::chrono::milliseconds> limit) {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno != EINTR) {
      // ECHILD: the listed children were reaped elsewhere (SIGCHLD ignored?): a bug to report.
      throw std::system_error(errno, std::generic_category(), "waiting for a child process");
    }
    for (size_t i = 0; pid > 0 && i < children.size(); ++i) {
      if (children[i]->pid_ == pid && children[i]->running()) {
        children[i]->status_ = decode(status);
        return i;
      }
    }
    if (pid > 0) continue;  // a child not listed: reaped, and the next one looked at at once
    if (interrupted()) return std::nullopt;
    if (limit && std::chrono::steady_clock::now() - start >= *limit) return std::nullopt;
    const timespec pause{0, 20 * 1000 * 1000};
    ::nanosleep(&pause, nullptr);  // EINTR or not, the loop asks again
  }
}

Process::Process(Process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      output_(std::exchange(other.output_, -1)),
      status_(std::exchange(other.status_, ExitStatus{})) {}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    close_output();
    pid_ = std::exchange(other.pid_, -1);
    output_ = std::exchange(other.output_, -1);
    status_ = std::exchange(other.status_, ExitStatus{});
  }
  return *this;
}

Process::~Process() {
  close_output();
}

void Process::close_output() {
  if (output_ >= 0) ::close(output_);
  output_ = -1;
}

void Process::signal(int signal) const {
  if (running()) ::kill(pid_, signal);
}

std::optional<ExitStatus> Process::try_wait() {
  if (!running()) return status_;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) status_ = decode(status);
  return status_;
}

ExitStatus Process::wait() {
  while (running()) {
    int status = 0;
    const pid_t pid = ::waitpid(pid_, &status, 0);
    if (pid == pid_) {
      status_ = decode(status);
    } else if (pid < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "waiting for a child process");
    }
  }
  return *status_;
}

CapturedRun run_captured(ProcessOptions options) {
  options.output = ProcessOptions::Output::kPipe;
  Process process = Process::start(options);
  CapturedRun result;
  char buffer[4096];
  for (ssize_t n; (n = ::read(process.output_fd(), buffer, sizeof buffer)) != 0;) {
    if (n > 0) result.output.append(buffer, static_cast<size_t>(n));
    if (n < 0 && errno != EINTR) break;
  }
  result.code = process.wait().shell_code();
  return result;
}

double resident_bytes(pid_t pid) {
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) * 1024;
  }
  return 0;
}

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace kiln
