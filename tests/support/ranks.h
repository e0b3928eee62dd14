// Starting kiln on several ranks of one machine, as torchrun would, for the tests that train
// over real c10d process groups.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace kiln::testing {

// How the ranks of one run_ranks() ended: each rank's exit code, and its output, which a failed
// comparison prints (PrintTo), so the reason a rank stopped is never lost.
struct RankExits {
  std::vector<int> codes;
  std::vector<std::string> logs;
};

inline bool operator==(const RankExits& exits, const std::vector<int>& codes) {
  return exits.codes == codes;
}
inline bool operator==(const std::vector<int>& codes, const RankExits& exits) {
  return exits.codes == codes;
}

// What gtest prints for a RankExits: the codes, then the last 40 lines of every rank's output.
inline void PrintTo(const RankExits& exits, std::ostream* out) {
  *out << "exit codes {";
  for (size_t rank = 0; rank < exits.codes.size(); ++rank)
    *out << (rank ? ", " : " ") << exits.codes[rank];
  *out << " }";
  for (size_t rank = 0; rank < exits.logs.size(); ++rank) {
    std::vector<std::string> lines;
    std::istringstream in(exits.logs[rank]);
    for (std::string line; std::getline(in, line);)
      lines.push_back(line);
    const size_t first = lines.size() > 40 ? lines.size() - 40 : 0;
    *out << "\n--- rank " << rank << " (exit " << exits.codes[rank] << "), last "
         << lines.size() - first << " lines of its output ---";
    for (size_t i = first; i < lines.size(); ++i)
      *out << "\n" << lines[i];
  }
}

// Starts `world` ranks of `kiln ARGS` with torchrun's environment and waits for them all, at
// most `deadline` (then every rank still running is SIGKILLed: exit 137, its log kept). Rank r's
// output goes to `log_prefix`r.log when one is given, else to a scratch file; either way it is
// returned beside the exit codes.
inline RankExits run_ranks(int world, const std::string& args, const std::string& log_prefix = "",
                           std::chrono::seconds deadline = std::chrono::seconds(900)) {
  const int port = free_local_port();  // free on loopback when asked: no two tests meet on one
  std::string prefix = log_prefix;
  std::string scratch;
  if (prefix.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln_ranks_XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) scratch = pattern;
    prefix = scratch + "/rank";
  }
  std::fflush(stdout);  // or each child would print what the parent has buffered
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      const std::string log = prefix + std::to_string(rank) + ".log";
      const std::string command =
          std::string("'") + KILN_BINARY + "' " + args + " > '" + log + "' 2>&1";
      ::execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  RankExits exits;
  exits.codes.assign(pids.size(), -1);
  const auto stop_at = std::chrono::steady_clock::now() + deadline;
  for (size_t left = pids.size(); left > 0;) {
    const bool late = std::chrono::steady_clock::now() >= stop_at;
    for (size_t rank = 0; rank < pids.size(); ++rank) {
      if (exits.codes[rank] >= 0) continue;
      int status = 0;
      if (late) ::kill(pids[rank], SIGKILL);
      if (::waitpid(pids[rank], &status, late ? 0 : WNOHANG) == pids[rank]) {
        exits.codes[rank] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int rank = 0; rank < world; ++rank) {
    std::ifstream in(prefix + std::to_string(rank) + ".log");
    std::ostringstream text;
    text << in.rdbuf();
    exits.logs.push_back(text.str());
  }
  if (!scratch.empty()) std::filesystem::remove_all(scratch);
  return exits;
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

// The run header's "optimizer state per rank: 0.05, 0.04 MiB" -> {0.05, 0.04}; {} without one.
inline std::vector<double> optimizer_state_mib(const std::string& output) {
  const std::string marker = "optimizer state per rank: ";
  const auto at = output.find(marker);
  if (at == std::string::npos) return {};
  std::vector<double> sizes;
  std::istringstream in(output.substr(at + marker.size(), output.find(" MiB", at) - at));
  for (std::string item; std::getline(in, item, ',');)
    sizes.push_back(std::stod(item));
  return sizes;
}

}  // namespace kiln::testing
