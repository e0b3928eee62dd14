// Starting kiln on several ranks of one machine, as torchrun would, for the tests that train
// over real c10d process groups.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::testing {

// A MASTER_PORT for one test's ranks: random in [20000, 40000), so tests running side by side
// rarely meet on one.
inline int random_master_port() {
  return 20000 + static_cast<int>(std::random_device{}() % 20000);
}

// Starts `world` ranks of `kiln ARGS` with torchrun's environment and waits for them all;
// returns their exit codes. Rank r's output goes to `log_prefix`r.log when one is given.
inline std::vector<int> run_ranks(int world, const std::string& args,
                                  const std::string& log_prefix = "") {
  const int port = random_master_port();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      const std::string log =
          log_prefix.empty() ? "/dev/null" : log_prefix + std::to_string(rank) + ".log";
      const std::string command =
          std::string("'") + KILN_BINARY + "' " + args + " > '" + log + "' 2>&1";
      ::execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

// The figures of a "<marker>  114176, 114176 bytes per rank (...)" line that `kiln bench`
// prints (peak gradients, training state) -> {114176, 114176}; {} when there is none.
inline std::vector<int64_t> bytes_per_rank(const std::string& output, const std::string& marker) {
  const auto at = output.find(marker + "  ");
  if (at == std::string::npos) return {};
  const auto from = at + marker.size() + 2;
  std::vector<int64_t> bytes;
  std::istringstream in(output.substr(from, output.find(" bytes", at) - from));
  for (std::string item; std::getline(in, item, ',');)
    bytes.push_back(std::stoll(item));
  return bytes;
}

}  // namespace kiln::testing
