// Helpers shared by the tests: scratch directories, running the kiln binary, reading SQLite.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln::testing {

using TempDir = kiln::ScratchDir;

// True once `ready()` holds, asked every 10 ms; false after `limit`.
inline bool wait_for(const std::function<bool()>& ready, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// A TCP port on 127.0.0.1 that was free when asked (the kernel picks it), for a server a test
// starts.
inline int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), length);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

inline void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// The message of the UserError that `fn` throws, or "(no error)" when it throws none.
inline std::string user_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// `path`'s lines, without their line ends.
inline std::vector<std::string> read_lines(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// Sets (or with nullptr, unsets) an environment variable for the scope, then puts back what
// was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* was = std::getenv(name)) was_ = was;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { was_ ? setenv(name_, was_->c_str(), 1) : unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> was_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// What `sh -c command` printed on stdout (and stderr, where the command sends it there with
// 2>&1), and how it exited.
inline CommandResult run_shell(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0)
    result.output.append(buf, n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// Runs `kiln ARGS` as a user would: in `cwd` when given, else in the test's directory.
inline CommandResult run_kiln(const std::string& args, const std::string& cwd = "") {
  const std::string in = cwd.empty() ? "" : "cd '" + cwd + "' && ";
  return run_shell(in + "'" + KILN_BINARY + "' " + args + " 2>&1");
}

// A kiln command that failed as a user's mistake should: exit 2, its whole output one
// `kiln: error: ` line that contains `expected`. `args` names the command in a failure (its first
// 300 characters: some tests pass generated arguments of megabytes).
inline void expect_one_error_line(const CommandResult& result, const std::string& args,
                                  const std::string& expected) {
  const std::string what = "kiln " + args.substr(0, 300) + "\n" + result.output;
  EXPECT_EQ(result.exit_code, 2) << what;
  EXPECT_EQ(result.output.rfind("kiln: error: ", 0), 0u) << what;
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << what;
  EXPECT_NE(result.output.find(expected), std::string::npos) << what;
}

// The words of the first line of `output` that starts with `first` and a space: a row of a
// printed table, whatever its padding.
inline std::vector<std::string> words_of_line(const std::string& output, const std::string& first) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(first + " ", 0) != 0) continue;
    std::istringstream in(line);
    std::vector<std::string> words;
    for (std::string word; in >> word;)
      words.push_back(word);
    return words;
  }
  return {};
}

// The working directory changed for a while, put back when this is destroyed.
class InDirectory {
 public:
  explicit InDirectory(const std::string& dir) : before_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  ~InDirectory() { std::filesystem::current_path(before_); }
  InDirectory(const InDirectory&) = delete;
  InDirectory& operator=(const InDirectory&) = delete;

 private:
  std::filesystem::path before_;
};

struct Outcome {
  bool killed = false;  // by SIGKILL, from the fault point or from us
  int exit_code = -1;
};

// How a background kiln starts: in `cwd` (empty: this process's), with KILN_FAULT = `fault`
// (empty: unset), its output replacing `log` or appended to it.
struct StartOptions {
  std::string cwd;
  std::string fault;
  bool append_log = false;
};

// `kiln ARGS...` started in the background, stdout and stderr into `log`.
inline pid_t start_kiln(const std::vector<std::string>& args, const std::string& log,
                        const StartOptions& options = {}) {
  std::fflush(stdout);  // or the child would print what the parent has buffered
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv = {const_cast<char*>(KILN_BINARY)};
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) ::_exit(126);
    if (options.fault.empty()) {
      ::unsetenv("KILN_FAULT");
    } else {
      ::setenv("KILN_FAULT", options.fault.c_str(), 1);
    }
    if (!std::freopen(log.c_str(), options.append_log ? "a" : "w", stdout)) ::_exit(126);
    ::dup2(::fileno(stdout), ::fileno(stderr));
    ::execv(KILN_BINARY, argv.data());
    ::_exit(127);
  }
  return pid;
}

// Runs `kiln ARGS...` (output to `log`) with KILN_FAULT = `fault` (if not empty), SIGKILLing it
// as soon as `kill_now()` says so (asked every 5 ms) unless it ended first.
inline Outcome run_child_until(const std::vector<std::string>& args, const std::string& log,
                               const std::string& fault, const std::function<bool()>& kill_now) {
  const pid_t pid = start_kiln(args, log, {"", fault, false});
  int status = 0;
  bool waited = false;
  while (!kill_now()) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      waited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!waited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  Outcome outcome;
  outcome.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
  return outcome;
}

// The same, SIGKILLing it after `kill_after`.
inline Outcome run_child(const std::vector<std::string>& args, const std::string& log,
                         const std::string& fault = "",
                         std::chrono::milliseconds kill_after = std::chrono::minutes(10)) {
  const auto deadline = std::chrono::steady_clock::now() + kill_after;
  return run_child_until(args, log, fault,
                         [deadline] { return std::chrono::steady_clock::now() >= deadline; });
}

// Every row of a query, each column as text ("NULL" for null).
inline std::vector<std::vector<std::string>> query(const std::string& db_path,
                                                   const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  // A kiln process ending its run may hold the store's lock for a moment (its last commit, a
  // checkpoint of the WAL): wait for it, rather than read nothing.
  sqlite3_busy_timeout(db, 10000);
  std::vector<std::vector<std::string>> rows;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK) {
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
        auto* text = sqlite3_column_text(stmt, i);
        row.emplace_back(text ? reinterpret_cast<const char*>(text) : "NULL");
      }
      rows.push_back(std::move(row));
    }
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return rows;
}

// The first column of every row as a double, exactly as stored (no text round trip).
inline std::vector<double> query_doubles(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_busy_timeout(db, 10000);  // as query() does
  std::vector<double> out;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK) {
    while (sqlite3_step(stmt) == SQLITE_ROW)
      out.push_back(sqlite3_column_double(stmt, 0));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

// The first column of the first row, or "" when the query returns nothing (or no db exists).
inline std::string scalar(const std::string& db_path, const std::string& sql) {
  auto rows = query(db_path, sql);
  return rows.empty() || rows[0].empty() ? "" : rows[0][0];
}

}  // namespace kiln::testing
