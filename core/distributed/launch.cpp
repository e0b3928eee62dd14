#include "core/distributed/launch.h"

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/process.h"
#include "core/util/stop_signal.h"

namespace kiln {

namespace {

struct Worker {
  int rank = 0;
  Process process;      // stdout + stderr into a pipe, read through process.output_fd()
  std::string partial;  // output after the last newline
  std::string error;    // the worker's last `kiln: error: ` line, without the prefix
};

constexpr const char* kErrorPrefix = "kiln: error: ";

void print_line(Worker& w, const std::string& line,
                const std::function<void(const std::string&)>& print) {
  if (line.rfind(kErrorPrefix, 0) == 0) w.error = line.substr(std::strlen(kErrorPrefix));
  print(fmt::format("[rank {}] {}", w.rank, line));
}

// The environment a rank expects, as torchrun sets it.
std::vector<std::pair<std::string, std::string>> rank_environment(const LaunchOptions& o, int rank,
                                                                  int local_rank, int attempt) {
  const int world = o.nnodes * o.nproc_per_node;
  return {{"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(local_rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
          {"GROUP_RANK", std::to_string(o.node_rank)},
          {"MASTER_ADDR", o.master_addr},
          {"MASTER_PORT", std::to_string(o.master_port)},
          {"TORCHELASTIC_RESTART_COUNT", std::to_string(attempt)}};
}

Worker spawn(const LaunchOptions& o, int local_rank, int attempt,
             const std::vector<std::string>& command) {
  const int rank = o.node_rank * o.nproc_per_node + local_rank;
  ProcessOptions options;
  options.program = "/proc/self/exe";
  options.argv = {"kiln"};
  options.argv.insert(options.argv.end(), command.begin(), command.end());
  options.extra_env = rank_environment(o, rank, local_rank, attempt);
  options.output = ProcessOptions::Output::kPipe;
  // The launcher forwards Ctrl-C once, rather than the terminal to every rank.
  options.own_process_group = true;
  options.what = fmt::format("rank {}", rank);
  return Worker{rank, Process::start(options), "", ""};
}

void drain(Worker& w, const std::function<void(const std::string&)>& print) {
  char buf[4096];
  ssize_t n = ::read(w.process.output_fd(), buf, sizeof buf);
  if (n <= 0) {
    if (!w.partial.empty()) print_line(w, w.partial, print);
    w.process.close_output();
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
  auto stop_all = [&](int signal) {
    for (auto& w : workers)
      w.process.signal(signal);
  };
  try {
    for (int local = 0; local < o.nproc_per_node; ++local) {
      workers.push_back(spawn(o, local, attempt, command));
      print(fmt::format("launch: attempt {}: rank {} is pid {}", attempt, workers.back().rank,
                        workers.back().process.pid()));
    }
  } catch (const ProcessStartError&) {
    stop_all(SIGTERM);  // the ranks already started would wait for the missing one forever
    throw;
  }
  int failure = 0, forwarded = 0;
  Worker* failed = nullptr;
  std::chrono::steady_clock::time_point kill_deadline{};
  while (true) {
    std::vector<pollfd> fds;
    std::vector<Worker*> owners;
    for (auto& w : workers) {
      if (w.process.output_fd() >= 0) {
        fds.push_back({w.process.output_fd(), POLLIN, 0});
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
    if (StopSignal::requested() && forwarded != StopSignal::received()) {
      forwarded = StopSignal::received();
      stop_all(forwarded);
    }
    bool any_running = false;
    for (auto& w : workers) {
      if (!w.process.running()) continue;
      if (const std::optional<ExitStatus> status = w.process.try_wait()) {
        const int code = status->shell_code();
        if (code != 0 && failure == 0) {
          failure = code;
          failed = &w;
          print(fmt::format("launch: rank {} exited with code {}: stopping the other ranks", w.rank,
                            code));
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
        open = open || w.process.output_fd() >= 0;
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
  int code = 0;
  std::string error;
  {
    const StopSignal stop;  // a Ctrl-C is forwarded to the ranks, once
    for (int attempt = 0; attempt <= o.max_restarts; ++attempt) {
      code = run_attempt(o, attempt, command, print, error);
      // A mistake in the command (exit 2) fails the same way every time: no restart.
      if (code == 0 || code == kExitUsage || StopSignal::requested()) break;
      if (attempt < o.max_restarts) {
        print(fmt::format("launch: restarting every rank ({} of {} restarts)", attempt + 1,
                          o.max_restarts));
      }
    }
  }
  if (code == kExitUsage) {
    // The rank's own error line, as `kiln` itself would print it (main adds the prefix).
    throw UserError(error.empty() ? std::string("a rank stopped with exit code 2 (a mistake in "
                                                "the command): its output above says what")
                                  : error);
  }
  return code;
}

}  // namespace kiln
