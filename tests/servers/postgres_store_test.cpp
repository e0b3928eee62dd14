// What only a PostgreSQL run store has to show: many processes on one fresh database (each
// migration applied once, no lost row), and the refusals of a URL a user got wrong, with the
// password never printed. The store is read back through libpq, not through Kiln.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "postgres_server.h"
#include "server_unavailable.h"
#include "test_util.h"
#include "tiny_run.h"

namespace kiln::testing {
namespace {

class PostgresStore : public TinyRun {
 protected:
  void SetUp() override {
    if (!server_.skip_reason().empty()) {
      KILN_SERVER_UNAVAILABLE("no PostgreSQL server: " + server_.skip_reason());
    }
    TinyRun::SetUp();
  }

  // The tiny experiment with run.db = `url`.
  std::string exp_on(const std::string& url) {
    const std::string path = experiment();
    std::string text = read_file(path);
    const std::string line = fmt::format("db = \"{}\"", db());
    text.replace(text.find(line), line.size(), fmt::format("db = \"{}\"", url));
    write_text(path, text);
    return path;
  }

  PostgresServer server_{"s3cret-pw"};
};

// Four `kiln run` at once on a database no run store is in yet, and a reader listing the runs
// all the while: the schema is made once, and every run has every step, once.
TEST_F(PostgresStore, FourRunsAndAReaderOnOneDatabaseLoseNoRow) {
  const std::string url = server_.new_database("shared");
  ::setenv("PGPASSWORD", "s3cret-pw", 1);
  const std::string e = exp_on(url);
  std::vector<pid_t> runs;
  for (int i = 0; i < 4; ++i) {
    runs.push_back(start_kiln(
        {"run", e, "--name", fmt::format("r{}", i), "--set", fmt::format("run.seed={}", i + 1)},
        dir_ / fmt::format("r{}.log", i)));
  }
  int reads = 0, failed_reads = 0;
  auto running = [&] {
    for (pid_t pid : runs) {
      if (::waitpid(pid, nullptr, WNOHANG) == 0) return true;
    }
    return false;
  };
  std::vector<int> statuses;
  while (running()) {
    const auto list = run_kiln("runs list --db " + url);
    ++reads;
    // Before the first run made the schema, the reader finds no store yet: that is an answer.
    if (list.exit_code != 0 && list.output.find("no runs table") == std::string::npos &&
        list.output.find("is not a Kiln run store") == std::string::npos) {
      ++failed_reads;
      ADD_FAILURE() << list.output;
    }
  }
  for (pid_t pid : runs) {
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  for (int i = 0; i < 4; ++i) {
    const std::string log = dir_ / fmt::format("r{}.log", i);
    const std::string name = fmt::format("r{}", i);
    EXPECT_EQ(store_scalar(url, "SELECT status FROM runs WHERE name = '" + name + "'"), "completed")
        << read_file(log);
    EXPECT_EQ(store_scalar(url,
                           "SELECT count(DISTINCT step) FROM metrics m JOIN runs r ON "
                           "r.id = m.run_id WHERE r.name = '" +
                               name + "'"),
              "30");
  }
  EXPECT_EQ(store_scalar(url, "SELECT count(*) FROM metrics"), "120");
  EXPECT_EQ(store_scalar(url, "SELECT count(*) FROM kiln_schema"), "1");
  EXPECT_GT(reads, 0);
  EXPECT_EQ(failed_reads, 0);
  ::unsetenv("PGPASSWORD");
}

// Ordered reads order by key columns, never by physical order (not SQLite's rowid translated
// to PostgreSQL's ctid, which an UPDATE moves). Two resumes of one run, given the
// same time and the first then rewritten and the table vacuumed, still list in resume order.
TEST_F(PostgresStore, ResumesListInTheirOrderAfterAnUpdateAndAVacuum) {
  const std::string url = server_.new_database("ordered");
  ::setenv("PGPASSWORD", "s3cret-pw", 1);
  const std::string e = exp_on(url);
  ASSERT_EQ(
      run_kiln("run " + e + " --name r --set train.steps=4 --set checkpoint.every=2").exit_code, 0);
  for (const char* steps : {"6", "8"}) {
    auto resumed = run_kiln(fmt::format("resume r --db {} --set train.steps={}", url, steps));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  }
  store_query(url, "UPDATE resumes SET created_at = '2026-01-01T00:00:00.000Z'");
  store_query(url, "UPDATE resumes SET changes = changes WHERE from_step = 4");
  store_query(url, "VACUUM FULL resumes");
  // Physically the resume from step 4 now comes second.
  EXPECT_EQ(store_scalar(url, "SELECT from_step FROM resumes ORDER BY ctid LIMIT 1"), "6");
  const auto shown = run_kiln("runs show r --db " + url);
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  // The resumes block's rows, each starting with its from step.
  std::vector<std::string> from_steps;
  std::istringstream lines(shown.output.substr(shown.output.find("resumes")));
  const std::regex row(R"(^\s+(\d+)\s+train\.steps)");
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, row)) from_steps.push_back(match[1]);
  }
  EXPECT_EQ(from_steps, (std::vector<std::string>{"4", "6"})) << shown.output;
  ::unsetenv("PGPASSWORD");
}

TEST_F(PostgresStore, AWrongPasswordIsOneLineThatNamesTheStoreAndNotThePassword) {
  const std::string url = server_.new_database("guarded");
  ::setenv("PGPASSWORD", "not-the-password", 1);
  const std::string e = exp_on(url);
  auto run = run_kiln("run " + e + " --name r");
  expect_one_error_line(run, "run with a wrong password", "password authentication failed");
  EXPECT_NE(run.output.find(url), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("not-the-password"), std::string::npos) << run.output;
  ::setenv("PGPASSWORD", "s3cret-pw", 1);
  EXPECT_EQ(store_scalar(url, "SELECT count(*) FROM pg_tables WHERE tablename = 'runs'"), "0");
  // A password in the URL is refused before anything connects, and never echoed.
  const std::string with_password =
      fmt::format("postgresql://kiln:s3cret-pw@127.0.0.1:{}/guarded", server_.port());
  auto listed = run_kiln("runs list --db " + with_password);
  expect_one_error_line(listed, "a password in the URL", "carries a password");
  EXPECT_EQ(listed.output.find("s3cret-pw"), std::string::npos) << listed.output;
  // The right one, from the environment as libpq reads it: the run is stored.
  auto good = run_kiln("run " + e + " --name r");
  EXPECT_EQ(good.exit_code, 0) << good.output;
  EXPECT_EQ(store_scalar(url, "SELECT count(*) FROM metrics"), "30");
  EXPECT_EQ(store_scalar(url, "SELECT config_json -> 'optimizer' ->> 'lr' FROM runs"), "0.01");
  ::unsetenv("PGPASSWORD");
}

// The server stops mid-run and comes back 3 s later: training goes on, the rows made meanwhile
// wait in memory, and every step is stored exactly once.
TEST_F(PostgresStore, AServerRestartMidRunLosesAndDuplicatesNoRow) {
  const std::string url = server_.new_database("restarted");
  ::setenv("PGPASSWORD", "s3cret-pw", 1);
  const std::string e = exp_on(url);
  const std::string log = dir_ / "run.log";
  const pid_t run = start_kiln({"run", e, "--name", "r", "--set", "train.steps=600", "--set",
                                "checkpoint.every=300", "--set", "eval.every=100"},
                               log);
  auto stored = [&] {
    return std::atoll(store_scalar(url, "SELECT count(*) FROM metrics").c_str());
  };
  for (int i = 0; i < 3000 && stored() < 40; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(stored(), 40) << read_file(log);
  server_.stop();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(::waitpid(run, nullptr, WNOHANG), 0) << "the run ended while the server was away\n"
                                                 << read_file(log);
  server_.start();
  int status = 0;
  ::waitpid(run, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(log);
  EXPECT_EQ(store_scalar(url, "SELECT status FROM runs"), "completed");
  EXPECT_EQ(store_scalar(url, "SELECT count(*) FROM metrics"), "600");
  EXPECT_EQ(store_scalar(url, "SELECT count(DISTINCT step) FROM metrics"), "600");
  EXPECT_EQ(store_scalar(url, "SELECT min(step) || '-' || max(step) FROM metrics"), "1-600");
  EXPECT_EQ(store_scalar(url, "SELECT count(*) FROM evals WHERE split = 'val'"), "6");
  EXPECT_EQ(
      store_scalar(url, "SELECT count(DISTINCT step) FROM snapshots WHERE step IN (300, 600)"),
      "2");
  ::unsetenv("PGPASSWORD");
}

// The server stops mid-run and stays away past the (shortened) wait: the run stops with one
// line naming the unstored-rows file beside its snapshots and the command that loads it; once
// the server is back that import merges the rows into the run, and every step is there once.
TEST_F(PostgresStore, ARunWhoseServerNeverReturnsKeepsItsRowsInAFileThatImportMerges) {
  const std::string url = server_.new_database("abandoned");
  ::setenv("PGPASSWORD", "s3cret-pw", 1);
  ::setenv("KILN_SERVER_WAIT_SECONDS", "2", 1);
  const std::string e = exp_on(url);
  const std::string log = dir_ / "run.log";
  const pid_t run = start_kiln({"run", e, "--name", "r", "--set", "train.steps=600", "--set",
                                "checkpoint.every=300", "--set", "eval.every=100"},
                               log);
  auto stored = [&] {
    return std::atoll(store_scalar(url, "SELECT count(*) FROM metrics").c_str());
  };
  for (int i = 0; i < 3000 && stored() < 40; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(stored(), 40) << read_file(log);
  server_.stop();
  int status = 0;
  ::waitpid(run, &status, 0);
  ::unsetenv("KILN_SERVER_WAIT_SECONDS");
  const std::string output = read_file(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << output;
  // The one line: the file, and the command that loads it.
  const std::string marker = "rows of this run are in '";
  const size_t at = output.find(marker);
  ASSERT_NE(at, std::string::npos) << output;
  const size_t from = at + marker.size();
  const std::string file = output.substr(from, output.find('\'', from) - from);
  EXPECT_EQ(std::filesystem::path(file).filename(), "unstored-rows.db") << output;
  EXPECT_NE(output.find(fmt::format("`kiln runs import {} --db {}`", file, url)), std::string::npos)
      << output;
  // The file holds the rows the server never took: the last steps, up to the snapshot (after
  // an eval, the best so far) whose wait gave up.
  const int64_t kept = std::atoll(store_scalar(file, "SELECT count(*) FROM metrics").c_str());
  const int64_t last = std::atoll(store_scalar(file, "SELECT max(step) FROM metrics").c_str());
  EXPECT_GT(kept, 0);
  EXPECT_EQ(last % 100, 0) << "a snapshot's step";
  EXPECT_EQ(store_scalar(file, "SELECT status FROM runs WHERE name = 'r'"), "failed");
  server_.start();
  ASSERT_TRUE(server_.skip_reason().empty()) << server_.skip_reason();
  const int64_t before = stored();
  EXPECT_GE(before + kept, last) << "steps neither the server nor the file has";
  auto merged = run_kiln("runs import " + file + " --db " + url);
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_NE(merged.output.find(
                fmt::format("merged run 'r' into the same run 'r': {} new metrics", last - before)),
            std::string::npos)
      << merged.output;
  const std::string n = std::to_string(last);
  EXPECT_EQ(store_scalar(url, "SELECT count(*) FROM runs"), "1");
  EXPECT_EQ(store_scalar(url, "SELECT count(*) FROM metrics"), n);
  EXPECT_EQ(store_scalar(url, "SELECT count(DISTINCT step) FROM metrics"), n);
  EXPECT_EQ(store_scalar(url, "SELECT min(step) || '-' || max(step) FROM metrics"), "1-" + n);
  EXPECT_EQ(store_scalar(url, "SELECT count(*) FROM evals WHERE split = 'val'"),
            std::to_string(last / 100));
  EXPECT_EQ(store_scalar(url, "SELECT status FROM runs"), "failed");
  // Imported again: nothing the run lacks, so nothing added.
  auto again = run_kiln("runs import " + file + " --db " + url);
  EXPECT_NE(again.output.find("0 new metrics rows, 0 new evals"), std::string::npos)
      << again.output;
  EXPECT_EQ(store_scalar(url, "SELECT count(*) FROM metrics"), n);
  ::unsetenv("PGPASSWORD");
}

}  // namespace
}  // namespace kiln::testing
