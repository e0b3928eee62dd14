// An asha sweep shared by two workers with no controller (core/store/runs/sweep_claims.h), on
// both run stores: an SQLite file and a PostgreSQL database on a real server
// (tests/support/postgres_server.h). One worker is SIGKILLed while it holds a promotion; two others
// take the member over once the claim's heartbeat is stale, and finish the search together. The
// store is read back through SQLite's and libpq's own APIs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

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

  // Each promotion's "Nth of M" names M members scored at its rung. M must lie between what
  // the store's decisions, read in their order, prove and allow. Timestamps cannot say which
  // evals a decision saw, but positions can:
  // - at least the member promoted and every member that an earlier decision promoted from that
  //   rung (it had its score there) counts;
  // - at most every member that an earlier decision sent as far as that rung.
  // A worker that ranks only the trials it proposed itself falls below the first bound once
  // another worker's members have been promoted.
  void expect_whole_ladders(const std::vector<int64_t>& rungs) {
    const auto decisions = store_query(
        store_,
        "SELECT position, action, member, until_step, reason FROM sweep_decisions WHERE "
        "sweep = 'w' ORDER BY position");
    const std::regex ranked(R"(at step (\d+) is \d+(st|nd|rd|th) of (\d+) )");
    std::map<std::string, int64_t> sent;  // member -> the furthest step a decision sent it
    std::map<int64_t, std::set<std::string>> promoted_from;  // rung step -> members
    int checked = 0;
    for (const auto& d : decisions) {
      const std::string& member = d[2];
      const int64_t until = std::stoll(d[3]) == 0 ? rungs.back() : std::stoll(d[3]);
      std::smatch m;
      if (d[1] == "promote" && std::regex_search(d[4], m, ranked)) {
        const int64_t rung = std::stoll(m[1]);
        const size_t of = std::stoul(m[3]);
        std::set<std::string> scored = promoted_from[rung];
        scored.insert(member);
        size_t reached = 0;
        for (const auto& [name, step] : sent)
          reached += step >= rung;
        EXPECT_GE(of, scored.size()) << "position " << d[0] << ": " << d[4];
        EXPECT_LE(of, reached) << "position " << d[0] << ": " << d[4];
        ++checked;
      }
      if (d[1] == "promote") {
        const auto at = std::find(rungs.begin(), rungs.end(), until);
        if (at != rungs.begin() && at != rungs.end()) promoted_from[*(at - 1)].insert(member);
      }
      sent[member] = std::max(sent[member], until);
    }
    EXPECT_GT(checked, 0) << "no promotion ranked a member";
  }
};

TEST_P(AshaWorkers, AWorkerKilledWhileHoldingAPromotionLosesNothing) {
  // A killed worker on this host loses its claims at once (its pid is gone); the timeout is for
  // workers on other hosts, and one as short as 2 s could take claims from a live worker stalled
  // on a busy machine. Below the default (120 s), so that a claim left behind shows as a slow test.
  const ScopedEnv timeout("KILN_SWEEP_CLAIM_TIMEOUT", "30");
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
  expect_whole_ladders({3, 9, 27});
  auto shown = run_kiln("sweep status " + file + " --db " + store_);
  EXPECT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_NE(shown.output.find("rung 1 of 3: step 3, 9 member(s), the best 3 go on"),
            std::string::npos)
      << shown.output;
}

// The two remedies for short-horizon bias on each store, two workers at once: rungs scored by
// cooldown probes of a wsd schedule (every member's probe recorded at the first rung), and
// schedule-free AdamW, whose rungs need none.
TEST_P(AshaWorkers, CooldownProbesAndScheduleFreeRungsShareTheStore) {
  const std::string wsd = dir_ / "wsd.toml";
  std::filesystem::copy_file(experiment("[schedule]\ntype = \"wsd\"\ndecay_fraction = 0.2\n"), wsd);
  std::string free_text = read_file(experiment("[schedule]\ntype = \"constant\"\n"));
  free_text.replace(free_text.find("[optimizer]\n"), 12,
                    "[optimizer]\ntype = \"schedule_free_adamw\"\n");
  const std::string free = dir_ / "free.toml";
  write_text(free, free_text);
  for (const auto& [name, base, extra] :
       {std::tuple("cool", wsd, "rung_cooldown = 0.2\n"), std::tuple("free", free, "")}) {
    SCOPED_TRACE(name);
    const std::string file = dir_ / (std::string(name) + "_sweep.toml");
    write_text(file, fmt::format(R"(base = "{}"
name = "{}"
[set]
train.steps = 27
[search]
type = "asha"
trials = 4
seed = 1
metric = "val_loss"
min_steps = 3
{}[space]
optimizer.lr = {{ log_uniform = [1e-4, 3e-2] }}
)",
                                 base, name, extra));
    const std::vector<std::string> args = {"sweep", file, "--db", store_};
    const pid_t a = start_kiln(args, dir_ / "a.log");
    const pid_t b = start_kiln(args, dir_ / "b.log");
    for (const auto& [worker, log] : {std::pair(a, "a.log"), std::pair(b, "b.log")}) {
      int status = 0;
      ASSERT_EQ(::waitpid(worker, &status, 0), worker);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir_ / log);
    }
    const std::string sweep = "'" + std::string(name) + "'";
    EXPECT_EQ(sql("SELECT count(*) FROM runs WHERE sweep = " + sweep), "4");
    EXPECT_EQ(sql("SELECT count(*) FROM runs WHERE sweep = " + sweep +
                  " AND status = "
                  "'completed'"),
              "1");
    EXPECT_EQ(sql("SELECT count(*) FROM rung_probes p JOIN runs r ON r.id = p.run_id WHERE "
                  "r.sweep = " +
                  sweep + " AND p.step = 3 AND p.cooldown_steps = 1"),
              std::string(name) == "cool" ? "4" : "0");
    auto shown = run_kiln("sweep status " + file + " --db " + store_);
    EXPECT_EQ(shown.exit_code, 0) << shown.output;
    EXPECT_NE(shown.output.find("rung 1 of 3: step 3, 4 member(s), the best 1 go on"),
              std::string::npos)
        << shown.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, AshaWorkers,
                         ::testing::Values("sqlite", "postgresql", "postgresql_repeatable_read"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kiln::testing
