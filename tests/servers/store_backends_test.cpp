// Every command that reads or writes runs, on both run stores: an SQLite file and a PostgreSQL
// database on a real server (tests/support/postgres_server.h). The store is read back through
// SQLite's and libpq's own APIs, never through Kiln's store layer.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "each_store.h"
#include "test_util.h"

namespace kiln::testing {
namespace {

class StoreBackends : public EachStore {
 protected:
  // The tiny experiment, its run.db this test's store.
  std::string exp(const std::string& extra = "") {
    const std::string path = experiment(extra);
    std::string text = read_file(path);
    const std::string line = fmt::format("db = \"{}\"", db());
    text.replace(text.find(line), line.size(), fmt::format("db = \"{}\"", store_));
    write_text(path, text);
    return path;
  }

  std::string rows_of(const std::string& run, const char* table = "metrics") {
    return sql(
        fmt::format("SELECT count(*) FROM {} WHERE run_id = (SELECT id FROM runs WHERE "
                    "name = '{}')",
                    table, run));
  }
  std::string distinct_steps(const std::string& run) {
    return sql(
        fmt::format("SELECT count(DISTINCT step) FROM metrics WHERE run_id = (SELECT id "
                    "FROM runs WHERE name = '{}')",
                    run));
  }
  CommandResult kiln(const std::string& args) { return run_kiln(args + " --db " + store_); }
};

TEST_P(StoreBackends, RunEvalAndEveryRunsCommand) {
  const std::string e = exp("\n[checkpoint]\nevery = 30\n");
  auto a = run_kiln("run " + e + " --name a");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = run_kiln("run " + e + " --name b --set optimizer.lr=2e-3 --set run.seed=2");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(rows_of("a"), "30");
  EXPECT_EQ(distinct_steps("a"), "30");
  EXPECT_EQ(sql("SELECT status FROM runs WHERE name = 'b'"), "completed");
  // eval.every 10 over 30 steps: val at 10, 20, 30 (and the test split at the end).
  EXPECT_EQ(sql("SELECT count(*) FROM evals WHERE split = 'val' AND run_id = (SELECT id FROM "
                "runs WHERE name = 'a')"),
            "3");

  auto eval = kiln("eval a --steps 2");
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_EQ(sql("SELECT count(*) FROM evals WHERE checkpoint <> ''"), "1");

  auto by_lr = kiln("runs list --format csv --where 'optimizer.lr < 5e-3'");
  ASSERT_EQ(by_lr.exit_code, 0) << by_lr.output;
  EXPECT_NE(by_lr.output.find(",b,"), std::string::npos) << by_lr.output;
  EXPECT_EQ(by_lr.output.find(",a,"), std::string::npos) << by_lr.output;
  auto glob = kiln("runs list --format csv --where \"name ~ 'a*' and best_loss < 100\"");
  EXPECT_NE(glob.output.find(",a,"), std::string::npos) << glob.output;
  EXPECT_EQ(glob.output.find(",b,"), std::string::npos) << glob.output;
  auto sorted = kiln("runs list --format csv --sort -optimizer.lr");
  ASSERT_EQ(sorted.exit_code, 0) << sorted.output;
  EXPECT_LT(sorted.output.find(",a,"), sorted.output.find(",b,")) << sorted.output;
  // A value is a bound parameter: this is a name no run has, not SQL.
  auto injected = kiln("runs list --format csv --where \"name = 'x'' or 1=1 --'\"");
  ASSERT_EQ(injected.exit_code, 0) << injected.output;
  EXPECT_EQ(injected.output.find(",a,"), std::string::npos) << injected.output;

  EXPECT_EQ(kiln("runs show a").exit_code, 0);
  auto compare = kiln("runs compare a b");
  EXPECT_EQ(compare.exit_code, 0) << compare.output;
  const std::string csv = dir_ / "a.csv", svg = dir_ / "a.svg", html = dir_ / "r.html";
  ASSERT_EQ(kiln("runs export a -o " + csv).exit_code, 0);
  EXPECT_NE(read_file(csv).find("\na,metric,30,"), std::string::npos);
  ASSERT_EQ(kiln("runs plot 'a*' -o " + svg).exit_code, 0);
  EXPECT_NE(read_file(svg).find("<svg"), std::string::npos);
  ASSERT_EQ(kiln("report a b -o " + html).exit_code, 0);
  EXPECT_NE(read_file(html).find("<!DOCTYPE html>"), std::string::npos);

  const std::string id_of_a = sql("SELECT id FROM runs WHERE name = 'a'");
  auto rm = kiln("runs rm a --yes");
  ASSERT_EQ(rm.exit_code, 0) << rm.output;
  EXPECT_EQ(sql("SELECT count(*) FROM runs WHERE name = 'a'"), "0");
  EXPECT_EQ(sql("SELECT count(*) FROM metrics WHERE run_id = " + id_of_a), "0");
}

// Evaluation tasks (docs/tasks.md): the scores during training and of a snapshot, read back by
// --where and runs plot, and gone with the run.
TEST_P(StoreBackends, TaskScoresDuringTrainingAndOfASnapshot) {
  std::string items;
  for (int i = 0; i < 14; ++i) {
    items += fmt::format(
        "{{\"context\": \"the word number {}, and the word was\", \"choices\": [\"light.\", "
        "\"good.\"], \"label\": {}}}\n",
        i, i % 7 == 0 ? 0 : 1);
  }
  write_text(dir_ / "words.jsonl", items);
  write_text(dir_ / "words.toml", "kind = \"choice\"\nitems = \"words.jsonl\"\n");
  const std::string e = exp("\n[checkpoint]\nevery = 30\n");
  auto a = run_kiln("run " + e + " --name a --set eval.tasks=" + (dir_ / "words.toml"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(rows_of("a", "task_scores"), "9");  // acc, acc_norm, acc_bytes at steps 10, 20, 30
  auto scored = kiln("eval a --task words");
  ASSERT_EQ(scored.exit_code, 0) << scored.output;
  EXPECT_EQ(sql("SELECT count(*) FROM task_scores WHERE checkpoint = 'step_000030'"), "3");
  auto listed =
      kiln("runs list --format csv --where 'words.acc@step=30 >= 0 and max(words.acc_norm) >= 0'");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find(",a,"), std::string::npos) << listed.output;
  const std::string svg = dir_ / "acc.svg";
  ASSERT_EQ(kiln("runs plot a --metric words.acc -o " + svg).exit_code, 0);
  EXPECT_NE(read_file(svg).find("<svg"), std::string::npos);
  ASSERT_EQ(kiln("runs rm a --yes").exit_code, 0);
  EXPECT_EQ(sql("SELECT count(*) FROM task_scores"), "0");
}

// Killed mid-commit and between a snapshot's files and its row: the resume re-does the steps
// after the snapshot, and every step ends up stored exactly once.
TEST_P(StoreBackends, ResumeAfterAKillKeepsEveryStepOnce) {
  const std::string e = exp("\n[checkpoint]\nevery = 10\n");
  for (const std::string fault : {"store.uncommitted:2", "snapshot.published:2"}) {
    const std::string name = fault.substr(0, fault.find('.'));
    const std::string log = dir_ / (name + ".log");
    Outcome killed = run_child({"run", e, "--name", name}, log, fault);
    ASSERT_TRUE(killed.killed) << fault << ": " << read_file(log);
    auto resumed = kiln("resume " + name);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_EQ(rows_of(name), "30") << fault;
    EXPECT_EQ(distinct_steps(name), "30") << fault;
    EXPECT_EQ(sql("SELECT count(*) FROM resumes"), name == "store" ? "1" : "2");
  }
}

TEST_P(StoreBackends, SweepMembersFromSeveralProcesses) {
  const std::string e = exp();
  auto sweep = run_kiln("sweep " + e +
                        " --name g --grid optimizer.lr=1e-3,1e-2 --grid run.seed=1,2 "
                        "--set train.steps=8 --set eval.every=0 --jobs 2");
  ASSERT_EQ(sweep.exit_code, 0) << sweep.output;
  EXPECT_EQ(sql("SELECT count(*) FROM runs WHERE sweep = 'g' AND status = 'completed'"), "4");
  EXPECT_EQ(sql("SELECT count(*) FROM metrics"), "32");
  auto members = kiln("runs list --format csv --where 'sweep = g and optimizer.lr = 1e-2'");
  size_t listed = 0;
  for (size_t at = members.output.find("\"g/optimizer.lr=1e-2,"); at != std::string::npos;
       at = members.output.find("\"g/optimizer.lr=1e-2,", at + 1))
    ++listed;
  EXPECT_EQ(listed, 2u) << members.output;
}

// `kiln runs import` to the other backend: every row comes along; the same run twice is merged
// (no row twice); another run with a name the target has is refused (exit 2, nothing written)
// unless --rename.
TEST_P(StoreBackends, ImportCopiesRunsToTheOtherBackend) {
  if (!server_->skip_reason().empty()) KILN_SERVER_UNAVAILABLE(server_->skip_reason());
  const std::string e = exp("\n[checkpoint]\nevery = 10\n");
  ASSERT_EQ(run_kiln("run " + e + " --name a").exit_code, 0);
  auto resumed = kiln("resume a --set train.steps=40");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const std::string other = postgres()
                                ? std::string(dir_ / "other.db")
                                : server_->new_database(fmt::format("other{}", ++databases_));
  auto imported = run_kiln("runs import " + store_ + " --db " + other);
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  for (const char* table : {"metrics", "evals", "snapshots", "resumes", "run_key_sources"}) {
    const std::string count = fmt::format("SELECT count(*) FROM {}", table);
    EXPECT_EQ(store_scalar(other, count), sql(count)) << table;
  }
  EXPECT_EQ(store_scalar(other, "SELECT count(DISTINCT step) FROM metrics"), "40");
  for (const char* column : {"status", "config", "config_hash", "uuid", "created_at"}) {
    const std::string value = fmt::format("SELECT {} FROM runs WHERE name = 'a'", column);
    EXPECT_EQ(store_scalar(other, value), sql(value)) << column;
  }
  // The same run again (its uuid): merged, and it lacks no row, so none is added.
  auto again = run_kiln("runs import " + store_ + " --db " + other);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("merged run 'a' into the same run 'a': 0 new metrics rows, 0 new "
                              "evals"),
            std::string::npos)
      << again.output;
  for (const char* table : {"metrics", "evals", "snapshots", "resumes"}) {
    const std::string count = fmt::format("SELECT count(*) FROM {}", table);
    EXPECT_EQ(store_scalar(other, count), sql(count)) << table;
  }
  // Another run named a, in a third store: refused, then imported as a-2.
  const std::string third = dir_ / "third.db";
  ASSERT_EQ(run_kiln("run " + e + " --name a --set run.db=" + third +
                     " --set run.out_dir=" + (dir_ / "runs3"))
                .exit_code,
            0);
  expect_one_error_line(run_kiln("runs import " + third + " --db " + other), "a name clash",
                        "pass --rename");
  auto renamed = run_kiln("runs import " + third + " --db " + other + " --rename");
  ASSERT_EQ(renamed.exit_code, 0) << renamed.output;
  EXPECT_EQ(store_scalar(other,
                         "SELECT count(*) FROM metrics m JOIN runs r ON r.id = m.run_id "
                         "WHERE r.name = 'a-2'"),
            "30");
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreBackends, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kiln::testing
