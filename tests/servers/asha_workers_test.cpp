// An asha sweep shared by two workers with no controller (core/store/runs/sweep_claims.h), on
// both run stores: an SQLite file and a PostgreSQL database on a real server
// (tests/support/postgres_server.h). One worker is SIGKILLed while it holds a promotion; two others
// take the member over once the claim's heartbeat is stale, and finish the search together. The
// store is read back through SQLite's and libpq's own APIs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <utility>

#include <fmt/format.h>

#include "each_store.h"
#include "test_util.h"

namespace kiln::testing {
namespace {

class AshaWorkers : public EachStore {
 protected:
  // Under "postgresql_repeatable_read" every session of the test's database starts in repeatable
  // read (a server whose administrator chose it): Kiln states its isolation itself, so the
  // workers must not notice.
  void SetUp() override {
    EachStore::SetUp();
    if (IsSkipped() || GetParam() != "postgresql_repeatable_read") return;
    const std::string database = store_.substr(store_.rfind('/') + 1);
    store_scalar(store_, "ALTER DATABASE " + database +
                             " SET default_transaction_isolation = 'repeatable read'");
    ASSERT_EQ(sql("SHOW default_transaction_isolation"), "repeatable read");
  }

  // 9 trials over the tiny experiment, rungs 3, 9, 27; TPE proposes after 4 random ones, so the
  // workers share proposals through the store too.
  std::string sweep_file() {
    const std::string path = dir_ / "w.toml";
    write_text(path, fmt::format(R"(base = "{}"
name = "w"
[set]
train.steps = 27
[search]
type = "asha"
sampler = "tpe"
startup = 4
trials = 9
seed = 5
metric = "val_loss"
min_steps = 3
[space]
optimizer.lr = {{ log_uniform = [1e-4, 3e-1] }}
)",
                                 experiment()));
    return path;
  }
};

TEST_P(AshaWorkers, AWorkerKilledWhileHoldingAPromotionLosesNothing) {
  const ScopedEnv timeout("KILN_SWEEP_CLAIM_TIMEOUT", "2");
  const std::string file = sweep_file();
  const std::vector<std::string> args = {"sweep", file, "--db", store_};
  // Worker A alone until its first promotion, where it dies (SIGKILL) holding the claim, before
  // its member starts; then B and C, which wait out the claim and finish the search.
  const pid_t a = start_kiln(args, dir_ / "a.log", {"", "sweep.promotion_claimed", false});
  int status = 0;
  ASSERT_EQ(::waitpid(a, &status, 0), a);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << read_file(dir_ / "a.log");
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string worker_a = fmt::format("{}:{}", host, a);
  const std::string held = sql("SELECT member FROM sweep_claims WHERE worker = '" + worker_a + "'");
  ASSERT_FALSE(held.empty()) << read_file(dir_ / "a.log");
  EXPECT_EQ(sql("SELECT action FROM sweep_decisions WHERE worker = '" + worker_a +
                "' AND member = '" + held + "' ORDER BY position DESC LIMIT 1"),
            "promote");
  const std::string rung_steps =
      sql("SELECT max(m.step) FROM metrics m JOIN runs r ON r.id = m.run_id WHERE r.name = '" +
          held + "'");
  // Then B and C together: they share the rest of the search.
  const pid_t b = start_kiln(args, dir_ / "b.log");
  const pid_t c = start_kiln(args, dir_ / "c.log");
  for (const auto& [worker, log] : {std::pair(b, "b.log"), std::pair(c, "c.log")}) {
    ASSERT_EQ(::waitpid(worker, &status, 0), worker);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir_ / log);
  }
  EXPECT_EQ(sql("SELECT count(DISTINCT worker) FROM sweep_decisions"), "3")
      << "A, B and C each decided something";
  // Nothing lost: every trial ran, no claim or running run is left, and the member A held went
  // past the rung it was promoted from, decided again by B once A's claim was stale.
  EXPECT_EQ(sql("SELECT count(*) FROM sweep_proposals WHERE sweep = 'w'"), "5");
  EXPECT_EQ(sql("SELECT count(*) FROM runs WHERE sweep = 'w'"), "9")
      << read_file(dir_ / "b.log") + read_file(dir_ / "c.log");
  EXPECT_EQ(sql("SELECT count(*) FROM runs WHERE sweep = 'w' AND status = 'running'"), "0");
  EXPECT_EQ(sql("SELECT count(*) FROM sweep_claims"), "0");
  EXPECT_GT(std::stoll(sql("SELECT max(m.step) FROM metrics m JOIN runs r ON r.id = m.run_id "
                           "WHERE r.name = '" +
                           held + "'")),
            std::stoll(rung_steps))
      << read_file(dir_ / "b.log") + read_file(dir_ / "c.log");
  EXPECT_NE(sql("SELECT count(*) FROM sweep_decisions WHERE member = '" + held +
                "' AND worker <> '" + worker_a + "'"),
            "0");
  EXPECT_GE(std::stoi(sql("SELECT count(*) FROM runs WHERE sweep = 'w' AND status = "
                          "'completed'")),
            1);
  // Every member stopped at a rung or at the end.
  EXPECT_EQ(sql("SELECT count(*) FROM (SELECT max(m.step) AS s FROM metrics m JOIN runs r ON "
                "r.id = m.run_id WHERE r.sweep = 'w' GROUP BY r.id) t WHERE s NOT IN (3, 9, 27)"),
            "0");
  auto shown = run_kiln("sweep status " + file + " --db " + store_);
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_NE(shown.output.find("rung 1 of 3: step 3, 9 member(s), the best 3 go on"),
            std::string::npos)
      << shown.output;
}

INSTANTIATE_TEST_SUITE_P(Stores, AshaWorkers,
                         ::testing::Values("sqlite", "postgresql", "postgresql_repeatable_read"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kiln::testing
