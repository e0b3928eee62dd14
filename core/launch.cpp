#include "core/launch.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

namespace kiln {

namespace {

std::atomic<int> g_launch_signal{0};
void on_launch_signal(int signal) {
  g_launch_signal = signal;
}

struct Worker {
  int rank = 0;
  pid_t pid = 0;
  int out = -1;         // read end of the worker's stdout + stderr
  std::string partial;  // output after the last newline
  bool running = true;
  int exit_code = 0;
  std::string error;  // the worker's last `kiln: error: ` line, without the prefix
};

constexpr const char* kErrorPrefix = "kiln: error: ";

void print_line(Worker& w, const std::string& line,
                const std::function<void(const std::string&)>& print) {
  if (line.rfind(kErrorPrefix, 0) == 0) w.error = line.substr(std::strlen(kErrorPrefix));
  print(fmt::format("[rank {}] {}", w.rank, line));
}

Worker spawn(const LaunchOptions& o, int local_rank, int attempt,
             const std::vector<std::string>& command) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) throw UserError(fmt::format("pipe: {}", std::strerror(errno)));
  Worker w;
  w.rank = o.node_rank * o.nproc_per_node + local_rank;
  w.pid = ::fork();
  if (w.pid == 0) {
    ::setpgid(0, 0);  // the launcher forwards Ctrl-C once, rather than the terminal to all
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    const int world = o.nnodes * o.nproc_per_node;
    ::setenv("RANK", std::to_string(w.rank).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(local_rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    ::setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node).c_str(), 1);
    ::setenv("GROUP_RANK", std::to_string(o.node_rank).c_str(), 1);
    ::setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
    ::setenv("MASTER_PORT", std::to_string(o.master_port).c_str(), 1);
    ::setenv("TORCHELASTIC_RESTART_COUNT", std::to_string(attempt).c_str(), 1);
    std::vector<char*> argv = {const_cast<char*>("kiln")};
    for (const auto& a : command)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  w.out = pipe_fds[0];
  return w;
}

void drain(Worker& w, const std::function<void(const std::string&)>& print) {
  char buf[4096];
  ssize_t n = ::read(w.out, buf, sizeof buf);
  if (n <= 0) {
    if (!w.partial.empty()) print_line(w, w.partial, print);
    ::close(w.out);
    w.out = -1;
    return;
  }
  w.partial.append(buf, static_cast<size_t>(n));
  size_t newline;
  while ((newline = w.partial.find('\n')) != std::string::npos) {
    print_line(w, w.partial.substr(0, newline), print);
    w.partial.erase(0, newline + 1);
  }
}

// Runs one attempt to the end; returns the first failing worker's exit code, or 0, and that
// worker's error line in `error`.
int run_attempt(const LaunchOptions& o, int attempt, const std::vector<std::string>& command,
                const std::function<void(const std::string&)>& print, std::string& error) {
  std::vector<Worker> workers;
  for (int local = 0; local < o.nproc_per_node; ++local) {
    workers.push_back(spawn(o, local, attempt, command));
    print(fmt::format("launch: attempt {}: rank {} is pid {}", attempt, workers.back().rank,
                      workers.back().pid));
  }
  int failure = 0, forwarded = 0;
  Worker* failed = nullptr;
  auto stop_all = [&](int signal) {
    for (auto& w : workers) {
      if (w.running) ::kill(w.pid, signal);
    }
  };
  std::chrono::steady_clock::time_point kill_deadline{};
  while (true) {
    std::vector<pollfd> fds;
    std::vector<Worker*> owners;
    for (auto& w : workers) {
      if (w.out >= 0) {
        fds.push_back({w.out, POLLIN, 0});
        owners.push_back(&w);
      }
    }
    if (!fds.empty() && ::poll(fds.data(), fds.size(), 200) > 0) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) drain(*owners[i], print);
      }
    } else if (fds.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (g_launch_signal && forwarded != g_launch_signal) {
      forwarded = g_launch_signal;
      stop_all(forwarded);
    }
    bool any_running = false;
    for (auto& w : workers) {
      if (!w.running) continue;
      int status = 0;
      if (::waitpid(w.pid, &status, WNOHANG) == w.pid) {
        w.running = false;
        w.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (w.exit_code != 0 && failure == 0) {
          failure = w.exit_code;
          failed = &w;
          print(fmt::format("launch: rank {} exited with code {}: stopping the other ranks", w.rank,
                            w.exit_code));
          stop_all(SIGTERM);  // survivors snapshot if they can; SIGKILL after a grace period
          kill_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        }
      } else {
        any_running = true;
      }
    }
    if (failure && any_running && std::chrono::steady_clock::now() > kill_deadline) {
      stop_all(SIGKILL);
    }
    if (!any_running) {
      bool open = false;
      for (auto& w : workers)
        open = open || w.out >= 0;
      if (!open) break;
    }
  }
  // Read after the loop: the failed worker's last lines may arrive after its exit is seen.
  if (failed) error = failed->error;
  return failure;
}

}  // namespace

int launch(const LaunchOptions& o, const std::vector<std::string>& command,
           const std::function<void(const std::string&)>& print) {
  if (command.empty())
    throw UserError("kiln launch needs a command after --, e.g. -- run EXP.toml");
  if (o.nproc_per_node < 1 || o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes ||
      o.max_restarts < 0 || o.master_port < 1 || o.master_port > 65535) {
    throw UserError(
        "kiln launch: --nproc-per-node and --nnodes must be >= 1, --node-rank in "
        "[0, nnodes), --max-restarts >= 0 and --master-port a TCP port");
  }
  struct sigaction action {
  }, old_int{}, old_term{};
  action.sa_handler = on_launch_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  int code = 0;
  std::string error;
  for (int attempt = 0; attempt <= o.max_restarts; ++attempt) {
    code = run_attempt(o, attempt, command, print, error);
    // A mistake in the command (exit 2) fails the same way every time: no restart.
    if (code == 0 || code == kExitUsage || g_launch_signal) break;
    if (attempt < o.max_restarts) {
      print(fmt::format("launch: restarting every rank ({} of {} restarts)", attempt + 1,
                        o.max_restarts));
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (code == kExitUsage) {
    // The rank's own error line, as `kiln` itself would print it (main adds the prefix).
    throw UserError(error.empty() ? std::string("a rank stopped with exit code 2 (a mistake in "
                                                "the command): its output above says what")
                                  : error);
  }
  return code;
}

}  // namespace kiln
