// `kiln serve` over HTTP: every /api/ endpoint against a store whose numbers the test knows
// (tests/support/fake_runs.h) or reads itself with SQL, the --where errors against the command
// line's own, and the requests that must reach nothing: traversal, injection, writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/store/runs/layer_metrics.h"
#include "core/store/runs/sweep_claims.h"
#include "core/store/runs/writer.h"
#include "dashboard_server.h"
#include "fake_runs.h"
#include "test_util.h"

namespace kiln::testing {
namespace {

using Json = nlohmann::json;

std::string url_encode(const std::string& text) {
  std::string out;
  for (unsigned char c : text)
    out += std::isalnum(c) || c == '-' || c == '_' || c == '.'
               ? std::string(1, static_cast<char>(c))
               : fmt::format("%{:02X}", c);
  return out;
}

class DashboardHttp : public FakeRuns {
 protected:
  void SetUp() override {
    FakeRuns::SetUp();
    server_ = std::make_unique<ServeProcess>(db_path(), dir_ / "serve.log");
    ASSERT_GT(server_->port(), 0) << server_->output();
  }

  Json get_json(const std::string& target, int expected_status = 200) {
    const HttpReply reply = server_->get(target);
    EXPECT_EQ(reply.status, expected_status) << target << "\n" << reply.body;
    EXPECT_NE(reply.head.find("Content-Type: application/json"), std::string::npos) << reply.head;
    return Json::parse(reply.body);
  }

  int64_t id_of(const std::string& name) {
    return std::stoll(scalar(db_path(), "select id from runs where name = '" + name + "'"));
  }

  std::vector<std::string> names(const Json& runs) {
    std::vector<std::string> out;
    for (const auto& run : runs)
      out.push_back(run["name"]);
    return out;
  }

  std::unique_ptr<ServeProcess> server_;
};

TEST_F(DashboardHttp, RunsTableCarriesEachRunsSummary) {
  const Json body = get_json("/api/runs");
  ASSERT_EQ(body["runs"].size(), 5u) << body;
  const Json& lr1 = body["runs"][0];
  EXPECT_EQ(lr1["name"], "lr1");
  EXPECT_EQ(lr1["status"], "completed");
  EXPECT_EQ(lr1["steps"], 4);
  EXPECT_EQ(lr1["final_loss"].get<double>(), 2.0);  // the fixture's last loss
  EXPECT_EQ(lr1["best_loss"].get<double>(), 2.0);
  EXPECT_EQ(lr1["best_val"].get<double>(), 2.2);
  EXPECT_EQ(lr1["tokens_per_sec"].get<double>(), 100.0);  // the slow first step left out
  EXPECT_EQ(body["runs"][4]["status"], "interrupted");
  EXPECT_FALSE(body["store"].get<std::string>().empty());
}

TEST_F(DashboardHttp, FilterAndSortAreTheWhereLanguage) {
  Json body = get_json("/api/runs?where=" + url_encode("optimizer.lr > 2e-3 and best_val < 1.8"));
  EXPECT_EQ(names(body["runs"]), (std::vector<std::string>{"lr3", "lr3-rerun"}));
  // By final loss, highest first, against the fixture's last losses: lr3-short 2.1, lr1 2.0,
  // then the three at 1.5 in id order.
  body = get_json("/api/runs?sort=" + url_encode("-final_loss"));
  EXPECT_EQ(names(body["runs"]),
            (std::vector<std::string>{"lr3-short", "lr1", "lr3", "lr3-rerun", "lr3-drift"}));
}

TEST_F(DashboardHttp, MalformedFilterIsTheCommandLinesErrorLine) {
  for (const std::string where :
       {"optimizer.lr < and steps > 10", "optimzer.lr < 1e-3", "loss@epoch=3 < 2", "((("}) {
    const Json body = get_json("/api/runs?where=" + url_encode(where), 400);
    const CommandResult cli =
        run_kiln(fmt::format("runs list --db {} --where '{}'", db_path(), where));
    ASSERT_EQ(cli.exit_code, 2) << cli.output;
    EXPECT_EQ(body["error"].get<std::string>() + "\n", cli.output) << where;
  }
  const Json sort = get_json("/api/runs?sort=" + url_encode("-nope"), 400);
  EXPECT_EQ(sort["error"].get<std::string>().rfind("kiln: error: ", 0), 0u) << sort;
}

TEST_F(DashboardHttp, InjectionIsOnlyAValue) {
  Json body = get_json("/api/runs?where=" + url_encode("name = \"x' or 1=1 --\""));
  EXPECT_TRUE(body["runs"].empty()) << body;
  body = get_json("/api/runs?where=" + url_encode("name = lr1; DROP TABLE runs"), 400);
  get_json("/api/runs?sort=" + url_encode("id; DROP TABLE runs"), 400);
  get_json("/api/metrics?run=" + url_encode("1 or 1=1"), 400);
  EXPECT_EQ(scalar(db_path(), "select count(*) from runs"), "5");
}

TEST_F(DashboardHttp, MetricsAfterAStepAreOnlyTheNewerRows) {
  const int64_t lr3 = id_of("lr3");
  Json body = get_json(fmt::format("/api/metrics?run={}&after=2&evals_after=2", lr3));
  EXPECT_EQ(body["rows"]["step"], Json::parse("[3,4]"));
  EXPECT_EQ(body["rows"]["loss"], Json::parse("[2.1,1.5]"));
  EXPECT_EQ(body["rows"]["tokens"], Json::parse("[3000,4000]"));
  EXPECT_EQ(body["rows"]["dt_ms"], Json::parse("[250,250]"));
  EXPECT_EQ(body["evals"]["step"], Json::parse("[4]"));  // the eval at step 2 is not after 2
  EXPECT_EQ(body["evals"]["loss"], Json::parse("[1.7]"));
  EXPECT_EQ(body["resumes"], 0);
  EXPECT_EQ(body["more"], false);
  body = get_json(fmt::format("/api/metrics?run={}&after=4", lr3));
  EXPECT_TRUE(body["rows"]["step"].empty());
  body = get_json(fmt::format("/api/metrics?run={}", lr3));
  EXPECT_EQ(body["rows"]["loss"], Json::parse("[4.0,2.8,2.1,1.5]"));
  get_json("/api/metrics?run=abc", 400);
  get_json("/api/metrics", 400);
}

// Task scores (TASK.METRIC) come with every answer, all of them: the page draws a chart per
// metric. kiln eval's scores of a snapshot are not the training curve's.
TEST_F(DashboardHttp, MetricsCarryTheTaskScoresOfTraining) {
  const int64_t lr3 = id_of("lr3");
  {
    RunStore store(db_path());
    store.add_task_scores(lr3, {{2, "cloze", "acc", "", 0.25, 0.1, 20, 0},
                                {4, "cloze", "acc", "", 0.5, 0.11, 20, 0},
                                {4, "cloze", "acc", "step_4", 0.75, 0.1, 20, 0},
                                {4, "arith", "exact_match", "", 0.125, 0.05, 8, 2}});
  }
  const Json body = get_json(fmt::format("/api/metrics?run={}&after=4&evals_after=4", lr3));
  EXPECT_EQ(body["tasks"]["cloze.acc"]["step"], Json::parse("[2,4]"));
  EXPECT_EQ(body["tasks"]["cloze.acc"]["value"], Json::parse("[0.25,0.5]"));
  EXPECT_EQ(body["tasks"]["arith.exact_match"]["value"], Json::parse("[0.125]"));
  EXPECT_EQ(body["tasks"].size(), 2u);
  EXPECT_TRUE(get_json(fmt::format("/api/metrics?run={}", id_of("lr1")))["tasks"].empty());
}

// A layer's measures (moe_1.aux_loss) come by name with the steps of the rows they were stored
// with, and compare offers them and groups them as any metric: here lr3 and its rerun, 0.5 apart.
TEST_F(DashboardHttp, MetricsAndCompareCarryTheLayerMeasures) {
  const int64_t lr3 = id_of("lr3"), rerun = id_of("lr3-rerun");
  {
    RunStore store(db_path());
    for (const int64_t run : {lr3, rerun}) {
      for (int64_t step = 1; step <= 4; ++step) {
        const double aux = 2.0 + static_cast<double>(step) / 4 + (run == rerun ? 0.5 : 0.0);
        write_layer_metrics(store.connection(), run, step,
                            {{"moe_1.aux_loss", aux}, {"moe_1.load_imbalance", 1.0 + step}});
      }
    }
  }
  Json body = get_json(fmt::format("/api/metrics?run={}&after=2", lr3));
  EXPECT_EQ(body["layers"]["moe_1.aux_loss"]["step"], Json::parse("[3,4]"));
  EXPECT_EQ(body["layers"]["moe_1.aux_loss"]["value"], Json::parse("[2.75,3.0]"));
  EXPECT_EQ(body["layers"]["moe_1.load_imbalance"]["value"], Json::parse("[4.0,5.0]"));
  EXPECT_EQ(body["layers"].size(), 2u);
  EXPECT_TRUE(get_json(fmt::format("/api/metrics?run={}&after=4", lr3))["layers"].empty());
  EXPECT_TRUE(get_json(fmt::format("/api/metrics?run={}", id_of("lr1")))["layers"].empty());

  body = get_json(fmt::format("/api/compare?runs={}&group_by=optimizer.lr&metric=moe_1.aux_loss",
                              url_encode(fmt::format("{},{}", lr3, rerun))));
  EXPECT_EQ(body["layer_measures"], Json::parse(R"(["moe_1.aux_loss","moe_1.load_imbalance"])"));
  ASSERT_EQ(body["groups"].size(), 1u) << body;
  EXPECT_EQ(body["groups"][0]["x"], Json::parse("[1,2,3,4]"));
  EXPECT_EQ(body["groups"][0]["mean"], Json::parse("[2.5,2.75,3.0,3.25]"));
}

TEST_F(DashboardHttp, RunPageHasConfigEvalsSnapshotsAndResumes) {
  const Json body = get_json(fmt::format("/api/run?run={}", id_of("lr3")));
  EXPECT_EQ(body["run"]["name"], "lr3");
  EXPECT_NE(body["config"].get<std::string>().find("lr = 0.003"), std::string::npos) << body;
  ASSERT_EQ(body["evals"].size(), 2u);
  EXPECT_EQ(body["evals"][0]["step"], 2);
  EXPECT_EQ(body["evals"][0]["loss"].get<double>(), 1.9);
  EXPECT_EQ(body["best_val"]["step"], 4);
  EXPECT_TRUE(body["snapshots"].empty());
  EXPECT_TRUE(body["resumes"].empty());
  EXPECT_EQ(body["git_commit"], "abc123");
}

// A blend's run page sets each source's asked share (its weight over the weights' sum) against
// the share of the tokens its steps took, numbers this test writes and works out itself.
TEST_F(DashboardHttp, RunPageShowsABlendsMixtureAgainstItsWeights) {
  {
    RunStore store(db_path());
    const int64_t id = store.create_run(
        NewRun{"blend", "exp.toml",
               "[data]\ntype = \"blend\"\nsources.code.weight = 1.0\nsources.web.weight = 3.0\n",
               "00000000000000bb", 2, 1, 2, "", "host", "", "", ""});
    MetricRow row;
    row.step = 1;
    row.source_tokens = R"({"code": 100, "web": 300})";
    store.add_metric(id, row);
    row.step = 2;
    row.source_tokens = R"({"code": 300, "web": 300})";
    store.add_metric(id, row);
    store.finish_run(id, "completed");
  }
  const Json body = get_json(fmt::format("/api/run?run={}", id_of("blend")));
  ASSERT_EQ(body["mixture"].size(), 2u) << body;
  EXPECT_EQ(body["mixture"][0]["source"], "code");
  EXPECT_EQ(body["mixture"][0]["asked"], "25.00%");
  EXPECT_EQ(body["mixture"][0]["tokens"], "400");
  EXPECT_EQ(body["mixture"][0]["realised"], "40.00%");  // 400 of 1,000
  EXPECT_EQ(body["mixture"][1]["realised"], "60.00%");
  EXPECT_TRUE(get_json(fmt::format("/api/run?run={}", id_of("lr3")))["mixture"].empty());
}

TEST_F(DashboardHttp, CompareShowsDifferingKeysAndGroupMeans) {
  const std::string ids = fmt::format("{},{},{}", id_of("lr3"), id_of("lr3-rerun"), id_of("lr1"));
  Json body = get_json("/api/compare?runs=" + url_encode(ids));
  std::vector<std::string> keys;
  for (const auto& d : body["differing"])
    keys.push_back(d["key"]);
  EXPECT_EQ(keys, (std::vector<std::string>{"model.n_layer", "optimizer.lr"}));
  EXPECT_FALSE(body.contains("groups"));
  body = get_json("/api/compare?runs=" + url_encode(ids) + "&group_by=optimizer.lr");
  ASSERT_EQ(body["groups"].size(), 2u) << body;
  // lr3 and its rerun have the same losses: their mean is those losses, the band has no width.
  const Json& seeds = body["groups"][0];
  EXPECT_EQ(seeds["x"], Json::parse("[1,2,3,4]"));
  EXPECT_EQ(seeds["mean"], Json::parse("[4.0,2.8,2.1,1.5]"));
  EXPECT_EQ(seeds["low"], seeds["mean"]);
  const Json& single = body["groups"][1];
  EXPECT_EQ(single["low"], Json::parse("[null,null,null,null]"));  // one run: no band
  EXPECT_NE(body["report"].get<std::string>().find("optimizer.lr=0.003"), std::string::npos);
  get_json("/api/compare?runs=" + url_encode(ids) + "&group_by=optimizer.lr&x=time", 400);
  get_json("/api/compare?runs=", 400);
}

TEST_F(DashboardHttp, DeletedRunAndReplacedStoreAreSaid) {
  const int64_t lr1 = id_of("lr1");
  const std::string before = get_json("/api/runs")["store"];
  ASSERT_EQ(run_kiln(fmt::format("runs rm lr1 --yes --db {}", db_path())).exit_code, 0);
  Json body = get_json(fmt::format("/api/metrics?run={}", lr1), 404);
  EXPECT_EQ(body["gone"], true);
  EXPECT_NE(body["error"].get<std::string>().find("deleted"), std::string::npos) << body;
  get_json(fmt::format("/api/run?run={}", lr1), 404);
  // Another store moved over the store's path: a new identity, and the new file's runs. Each
  // copy is VACUUM INTO, which includes what is still in the source's WAL file.
  auto copy_store = [](const std::string& from, const std::string& to) {
    sqlite3* source = nullptr;
    ASSERT_EQ(sqlite3_open_v2(from.c_str(), &source, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(source, fmt::format("VACUUM INTO '{}'", to).c_str(), nullptr, nullptr,
                           nullptr),
              SQLITE_OK);
    sqlite3_close(source);
  };
  copy_store(db_path(), dir_ / "other.db");
  ASSERT_EQ(run_kiln(fmt::format("runs rm lr3 --yes --db {}", dir_ / "other.db")).exit_code, 0);
  copy_store(dir_ / "other.db", dir_ / "replacement.db");
  // The old store's WAL goes with it: SQLite would read its frames into any file at that path.
  std::filesystem::remove(db_path() + "-wal");
  std::filesystem::remove(db_path() + "-shm");
  std::filesystem::rename(dir_ / "replacement.db", db_path());
  body = get_json("/api/runs");
  EXPECT_NE(body["store"], before);
  EXPECT_EQ(body["runs"].size(), 3u);
  std::filesystem::remove(db_path());
  body = get_json("/api/runs", 503);
  EXPECT_NE(body["error"].get<std::string>().find("no run store at"), std::string::npos) << body;
}

TEST_F(DashboardHttp, OnlyTheEmbeddedPageIsServed) {
  for (const auto& [target, file] : std::vector<std::pair<std::string, std::string>>{
           {"/", "web/index.html"},
           {"/app.js", "web/app.js"},
           {"/style.css", "web/style.css"},
           {"/uPlot.iife.min.js", "web/vendor/uPlot.iife.min.js"}}) {
    const HttpReply reply = server_->get(target);
    EXPECT_EQ(reply.status, 200) << target;
    EXPECT_EQ(reply.body, read_file(std::string(KILN_SOURCE_DIR) + "/" + file)) << target;
  }
  const std::vector<std::string> refused = {"/../../../../etc/passwd",
                                            "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
                                            "/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
                                            "/..%2f..%2f..%2fetc%2fpasswd",
                                            "/.%2e/.%2e/CMakeLists.txt",
                                            "//etc/passwd",
                                            "/etc/passwd",
                                            "http://127.0.0.1/etc/passwd",
                                            "/app.js/../../CMakeLists.txt",
                                            "/web/index.html",
                                            "/vendor/uPlot.min.css",
                                            "/index.html%00.js",
                                            "/%2fetc%2fpasswd",
                                            "/..\\..\\CMakeLists.txt",
                                            "/api/../CMakeLists.txt",
                                            "/api/runs/../../../etc/passwd"};
  for (const auto& target : refused) {
    const HttpReply reply = server_->get(target);
    EXPECT_TRUE(reply.status == 404 || reply.status == 400) << target << ": " << reply.status;
    EXPECT_EQ(reply.body.find("root:"), std::string::npos) << target;
    EXPECT_EQ(reply.body.find("cmake_minimum_required"), std::string::npos) << target;
  }
}

// An asha sweep's ladder, rungs at steps 1, 2 and 4 with reduction_factor 2, from four runs whose
// values this test chose: each rung's members best first, the best half going on.
TEST_F(DashboardHttp, LadderOfAnAshaSweepRanksEachRungsMembers) {
  RunStore store(db_path());
  SweepClaims(store, "lad", "test:1", std::chrono::seconds(60))
      .record_ladder_shape({"val_loss", false, 2, {1, 2, 4}});
  struct Member {
    const char* name;
    std::vector<double> val;  // at steps 1, 2, 4
    int64_t steps;
    const char* status;
  };
  for (const Member& m :
       {Member{"lad/a", {3.0, 2.5, 2.0}, 4, "completed"}, Member{"lad/b", {3.5}, 1, "interrupted"},
        Member{"lad/c", {3.2, 2.8}, 2, "interrupted"}, Member{"lad/d", {4.0}, 1, "failed"}}) {
    NewRun created;
    created.name = m.name;
    created.config_toml = "[run]\nname = \"x\"\n";
    created.config_hash = "h";
    created.planned_steps = 4;
    created.sweep = "lad";
    const int64_t id = store.create_run(created);
    for (int64_t step = 1; step <= m.steps; ++step) {
      MetricRow row;
      row.step = step;
      row.loss = 4.0;
      store.add_metric(id, row);
    }
    const int64_t rung_steps[] = {1, 2, 4};
    for (size_t j = 0; j < m.val.size(); ++j)
      store.add_eval(id, EvalRow{rung_steps[j], "val", m.val[j], "", std::nullopt});
    store.finish_run(id, m.status);
  }
  store.flush();
  const Json body = get_json("/api/ladder?sweep=lad");
  ASSERT_EQ(body["rungs"].size(), 3u) << body;
  auto members = [&](size_t rung) {
    std::vector<std::string> out;
    for (const auto& m : body["rungs"][rung]["members"])
      out.push_back(m["name"].get<std::string>() + " " + m["state"].get<std::string>());
    return out;
  };
  EXPECT_EQ(members(0), (std::vector<std::string>{"lad/a promoted", "lad/c promoted",
                                                  "lad/b paused", "lad/d failed"}));
  EXPECT_EQ(body["rungs"][0]["keep"], 2);
  EXPECT_EQ(members(1), (std::vector<std::string>{"lad/a promoted", "lad/c paused"}));
  EXPECT_EQ(body["rungs"][1]["keep"], 1);
  EXPECT_EQ(members(2), (std::vector<std::string>{"lad/a completed"}));
  EXPECT_EQ(body["rungs"][1]["members"][1]["value"].get<double>(), 2.8);
  EXPECT_EQ(body["metric"], "val_loss");
  const Json none = get_json("/api/ladder?sweep=nope", 400);
  EXPECT_NE(none["error"].get<std::string>().find("sweep 'nope' has no rung ladder"),
            std::string::npos)
      << none;
}

TEST_F(DashboardHttp, NothingWritesAndOnlyLoopbackHostsAreAnswered) {
  const std::string bytes = read_file(db_path());
  for (const std::string method : {"POST", "PUT", "DELETE", "PATCH"}) {
    for (const std::string target : {"/api/runs", "/api/metrics?run=1", "/"}) {
      const int status = http_request(server_->port(), target, method).status;
      EXPECT_TRUE(status >= 400 && status < 500) << method << " " << target << ": " << status;
    }
  }
  EXPECT_EQ(read_file(db_path()), bytes);
  // A page elsewhere that points its own name at 127.0.0.1 (DNS rebinding) is refused.
  EXPECT_EQ(http_request(server_->port(), "/api/runs", "GET", "attacker.example:80").status, 403);
  EXPECT_EQ(http_request(server_->port(), "/api/runs", "GET", "localhost:1").status, 200);
}

// Request limits: every other method is 405 saying GET is allowed, a compare of too
// many runs is 400 with its message, a long target 414, and a runs answer says when it is cut.
TEST_F(DashboardHttp, OtherMethodsTooManyIdsAndLongTargetsAreRefusedWithAStatusAndAMessage) {
  for (const std::string method : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    const HttpReply reply = http_request(server_->port(), "/api/runs", method);
    EXPECT_EQ(reply.status, 405) << method << "\n" << reply.head;
    EXPECT_NE(reply.head.find("Allow: GET"), std::string::npos) << method << "\n" << reply.head;
    EXPECT_NE(reply.body.find("only reads"), std::string::npos) << method << "\n" << reply.body;
  }
  std::string ids = "1";
  for (int i = 2; i <= 201; ++i)
    ids += "," + std::to_string(i);
  const HttpReply many = server_->get("/api/compare?runs=" + ids);
  EXPECT_EQ(many.status, 400) << many.body;
  EXPECT_NE(many.body.find("runs= names 201 runs; a compare takes at most 200"), std::string::npos)
      << many.body;
  EXPECT_EQ(server_->get("/api/runs?where=" + std::string(10000, 'x')).status, 414);
  const HttpReply runs = server_->get("/api/runs");
  EXPECT_EQ(runs.status, 200);
  EXPECT_NE(runs.body.find("\"more\":false"), std::string::npos) << runs.body;
}

TEST_F(DashboardHttp, StopsOnSigtermAndWarnsOffLoopback) {
  const std::string port = std::to_string(server_->port());
  expect_one_error_line(run_kiln(fmt::format("serve --db {} --port {}", db_path(), port)), "serve",
                        "cannot listen on 127.0.0.1:" + port + ": Address already in use");
  EXPECT_EQ(server_->stop(), 0);
  ServeProcess open(db_path(), dir_ / "open.log", {"--host", "0.0.0.0"});
  ASSERT_GT(open.port(), 0) << open.output();
  EXPECT_NE(open.output().find("kiln: warning: --host 0.0.0.0 makes the dashboard reachable"),
            std::string::npos)
      << open.output();
  const CommandResult missing = run_kiln("serve --port 0 --db " + dir_ / "none.db");
  expect_one_error_line(missing, "serve", "no run store at");
}

}  // namespace
}  // namespace kiln::testing
