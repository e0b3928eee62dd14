// `kiln serve` started by a test on a free port (--port 0: it prints the port it got), and a raw
// HTTP/1.1 client over a socket, written here so that what a request's path holds (`/../`,
// encoded dots) reaches the server exactly as written: no client library normalises it first.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/store/runs/writer.h"
#include "test_util.h"

namespace kiln::testing {

struct HttpReply {
  int status = 0;  // 0: no answer
  std::string head, body;
};

// One request on a fresh connection (Connection: close), its answer read to the end.
inline HttpReply http_request(int port, const std::string& target,
                              const std::string& method = "GET", const std::string& host = "") {
  HttpReply reply;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return reply;
  }
  const std::string request = method + " " + target + " HTTP/1.1\r\nHost: " +
                              (host.empty() ? "127.0.0.1:" + std::to_string(port) : host) +
                              "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) {
    ::close(fd);
    return reply;
  }
  std::string raw;
  char buffer[65536];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;)
    raw.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  const size_t end_of_head = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || end_of_head == std::string::npos) return reply;
  reply.status = std::stoi(raw.substr(9, 3));
  reply.head = raw.substr(0, end_of_head);
  reply.body = raw.substr(end_of_head + 4);
  return reply;
}

// `kiln serve --db DB --port 0 EXTRA...`, its output in LOG, stopped with SIGTERM when destroyed.
class ServeProcess {
 public:
  ServeProcess(const std::string& db, const std::string& log,
               const std::vector<std::string>& extra = {})
      : log_(log) {
    std::vector<std::string> args = {"serve", "--db", db, "--port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = start_kiln(args, log);
    const std::regex listening(R"(kiln serve: http://[^ ]*:([0-9]+)/)");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch found;
      const std::string output = read_file(log);
      if (std::regex_search(output, found, listening)) {
        port_ = std::stoi(found[1]);
        return;
      }
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~ServeProcess() { stop(); }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // SIGTERM, as Ctrl-C would: the exit code, or -1 when it was not running.
  int stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  int port() const { return port_; }  // 0 until it listens
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }
  std::string output() const { return read_file(log_); }
  HttpReply get(const std::string& target) const { return http_request(port_, target); }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// A store of `runs` made-up runs of `steps` steps each, written with SQL in one transaction (a
// million rows in seconds): run r's loss at step n is 2 + 1/n + r/1000, its val loss every 100
// steps the same plus 0.1.
inline void fill_big_store(const std::string& db_path, int runs, int steps) {
  {
    RunStore store(db_path);
    for (int r = 1; r <= runs; ++r) {
      NewRun run;
      run.name = fmt::format("big{:03}", r);
      run.sweep = "big";
      run.config_toml = fmt::format("[run]\nname = \"{}\"\nseed = {}\n\n[optimizer]\nlr = {}\n",
                                    run.name, r % 4, 1e-3 * (1 + r % 5));
      run.config_hash = fmt::format("{:016x}", r % 5);
      run.planned_steps = steps;
      store.finish_run(store.create_run(run), "completed");
    }
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  const std::string fill = fmt::format(R"sql(
      BEGIN;
      WITH RECURSIVE n(step) AS (SELECT 1 UNION ALL SELECT step + 1 FROM n WHERE step < {0})
      INSERT INTO metrics (run_id, step, loss, lr, grad_norm, tokens_per_sec, dt_ms, tokens_seen)
      SELECT runs.id, step, 2.0 + 1.0 / step + runs.id / 1000.0, 1e-3, 0.5, 1000.0, 10.0,
             step * 512 FROM runs, n;
      WITH RECURSIVE n(step) AS (SELECT 100 UNION ALL SELECT step + 100 FROM n WHERE step < {0})
      INSERT INTO evals (run_id, step, split, loss)
      SELECT runs.id, step, 'val', 2.1 + 1.0 / step + runs.id / 1000.0 FROM runs, n;
      COMMIT;)sql",
                                       steps);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, fill.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

}  // namespace kiln::testing
