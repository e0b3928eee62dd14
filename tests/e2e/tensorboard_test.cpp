// TensorBoard event files through the real binary: written during training ([metrics]
// tensorboard), across a kill and a resume, and by `kiln runs export --format tensorboard`. Every
// file is read with the test's own reader (support/event_file_reader.h) and compared, value by
// value, with the store's rows as SQLite returns them.
#include <sqlite3.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "event_file_reader.h"
#include "tiny_run.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::DecodedEvent;
using testing::read_event_file;
using testing::run_kiln;
using TensorBoard = testing::TinyRun;

// tag -> step -> value: what TensorBoard shows of a run's folder. It reads the files in name
// order, and a point at step s of a tag drops the points of that tag at steps >= s read before
// (its "preemption" of what a restarted job logged again).
using Series = std::map<std::string, std::map<int64_t, float>>;

Series series_of(const std::vector<std::string>& files) {
  Series out;
  for (const auto& file : files) {
    for (const DecodedEvent& e : read_event_file(file)) {
      for (const auto& v : e.values) {
        if (!v.simple_value) continue;
        auto& points = out[v.tag];
        points.erase(points.lower_bound(e.step), points.end());
        points[e.step] = *v.simple_value;
      }
    }
  }
  return out;
}

std::vector<std::string> event_files(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(folder))
    out.push_back(entry.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Every column of every row, as the doubles SQLite holds (no text round trip); NULL is none.
std::vector<std::vector<std::optional<double>>> numbers(const std::string& db,
                                                        const std::string& sql) {
  sqlite3* handle = nullptr;
  sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* stmt = nullptr;
  std::vector<std::vector<std::optional<double>>> rows;
  if (sqlite3_prepare_v2(handle, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK) {
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      auto& row = rows.emplace_back();
      for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
        row.push_back(sqlite3_column_type(stmt, i) == SQLITE_NULL
                          ? std::nullopt
                          : std::optional<double>(sqlite3_column_double(stmt, i)));
      }
    }
  }
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  return rows;
}

bool same_float(float written, std::optional<double> stored) {
  // NULL: a NaN the store could not keep as a number.
  const float expected = static_cast<float>(stored.value_or(std::nan("")));
  return std::isnan(written) ? std::isnan(expected)
                             : std::memcmp(&written, &expected, sizeof written) == 0;
}

// The store's rows of `run`, as TensorBoard should show them: train/<column> per metrics row,
// train/<name> per layer measure, <split>/loss per eval made in training, snapshot/<split>/loss
// per `kiln eval` row.
Series expected_series(const std::string& db, const std::string& run) {
  const char* const columns[] = {"loss",         "lr",          "grad_norm",  "tokens_per_sec",
                                 "dt_ms",        "tokens_seen", "loss_scale", "skipped",
                                 "rank_skew_ms", "bubble"};
  const std::string of_run = " where run_id = (select id from runs where name = '" + run + "')";
  Series out;
  for (const auto& row :
       numbers(db,
               "select step, loss, lr, grad_norm, tokens_per_sec, dt_ms, tokens_seen, "
               "loss_scale, skipped, rank_skew_ms, bubble from metrics" +
                   of_run)) {
    for (size_t i = 0; i < std::size(columns); ++i) {
      const bool optional = i >= 8;  // rank_skew_ms and bubble only where the row has them
      if (optional && !row[i + 1]) continue;
      out[std::string("train/") + columns[i]][static_cast<int64_t>(*row[0])] =
          static_cast<float>(row[i + 1].value_or(std::nan("")));
    }
  }
  const auto layer_names = testing::query(db, "select name from layer_metrics" + of_run);
  const auto layer_values = numbers(db, "select step, value from layer_metrics" + of_run);
  for (size_t i = 0; i < layer_names.size(); ++i) {
    out["train/" + layer_names[i][0]][static_cast<int64_t>(*layer_values[i][0])] =
        static_cast<float>(*layer_values[i][1]);
  }
  const std::string order = " order by step, split, checkpoint";
  const auto names = testing::query(db, "select split, checkpoint from evals" + of_run + order);
  const auto values = numbers(db, "select step, loss from evals" + of_run + order);
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string tag = (names[i][1].empty() ? "" : "snapshot/") + names[i][0] + "/loss";
    out[tag][static_cast<int64_t>(*values[i][0])] = static_cast<float>(*values[i][1]);
  }
  return out;
}

void expect_same_series(const Series& written, const Series& expected, const std::string& what) {
  ASSERT_EQ(written.size(), expected.size()) << what;
  for (const auto& [tag, points] : expected) {
    ASSERT_TRUE(written.count(tag)) << what << ": no " << tag;
    const auto& got = written.at(tag);
    ASSERT_EQ(got.size(), points.size()) << what << ": " << tag;
    for (const auto& [step, value] : points) {
      ASSERT_TRUE(got.count(step)) << what << ": " << tag << " lacks step " << step;
      EXPECT_TRUE(same_float(got.at(step), value))
          << what << ": " << tag << " at step " << step << ": " << got.at(step) << " vs " << value;
    }
  }
}

// The file's opening: the version, then the run's config (as the store holds it) as markdown
// code at `step`.
void expect_opening(const std::string& file, const std::string& config, int64_t step) {
  const auto events = read_event_file(file);
  ASSERT_GE(events.size(), 2u) << file;
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  ASSERT_EQ(events[1].values.size(), 1u);
  EXPECT_EQ(events[1].step, step);
  EXPECT_EQ(events[1].values[0].tag, "config");
  EXPECT_EQ(events[1].values[0].plugin_name, "text");
  ASSERT_EQ(events[1].values[0].string_val.size(), 1u);
  const std::string& text = events[1].values[0].string_val[0];
  size_t lines = 0;
  for (size_t start = 0; start < config.size(); ++lines) {
    const size_t end = config.find('\n', start);
    ASSERT_NE(text.find("    " + config.substr(start, end - start) + "\n"), std::string::npos);
    start = end == std::string::npos ? config.size() : end + 1;
  }
  EXPECT_EQ(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')), lines);
}

TEST_F(TensorBoard, TrainingWritesTheStoresRowsAndExportWritesThemAgain) {
  const std::string tb = dir_ / "tb";
  ASSERT_EQ(
      run_kiln("run " + experiment("[metrics]\ntensorboard = \"\"\n") + " --name plain").exit_code,
      0);
  EXPECT_FALSE(fs::exists(tb));  // "" writes none
  const auto live =
      run_kiln("run " + experiment("[metrics]\ntensorboard = \"" + tb + "\"\n") + " --name live");
  ASSERT_EQ(live.exit_code, 0) << live.output;
  EXPECT_NE(live.output.find("tensorboard: " + tb + "/live/"), std::string::npos) << live.output;
  const auto files = event_files(tb + "/live");
  ASSERT_EQ(files.size(), 1u);
  expect_opening(files[0], testing::scalar(db(), "select config from runs where name = 'live'"), 0);
  const Series trained = series_of(files);
  EXPECT_EQ(trained.at("train/loss").size(), 30u);
  EXPECT_EQ(trained.at("val/loss").size(), 3u);  // eval.every = 10
  expect_same_series(trained, expected_series(db(), "live"), "trained");

  const std::string out = dir_ / "exported";
  const auto exported =
      run_kiln("runs export live plain --format tensorboard -o " + out + " --db " + db());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  for (const std::string run : {"live", "plain"}) {
    const auto written = event_files(out + "/" + run);
    ASSERT_EQ(written.size(), 1u) << run;
    EXPECT_NE(exported.output.find("wrote " + written[0]), std::string::npos) << exported.output;
    expect_opening(written[0],
                   testing::scalar(db(), "select config from runs where name = '" + run + "'"), 0);
    expect_same_series(series_of(written), expected_series(db(), run), "exported " + run);
    double last = 0;  // the run's start plus its step times: in order, and after 2020
    for (const auto& e : read_event_file(written[0])) {
      EXPECT_GE(e.wall_time, std::max(last, 1.58e9)) << run;
      last = e.wall_time;
    }
  }
  expect_same_series(series_of(event_files(out + "/live")), trained, "exported vs trained");

  // Exporting over files already there, or over the store, is refused, and nothing changes.
  testing::expect_one_error_line(
      run_kiln("runs export live --format tensorboard -o " + out + " --db " + db()), "again",
      "holds event files already");
  EXPECT_EQ(event_files(out + "/live").size(), 1u);
  testing::expect_one_error_line(
      run_kiln("runs export 'l*' --format tensorboard -o " + db() + " --db " + db()), "over db",
      "that is the run store");
  const std::string folder = testing::scalar(db(), "select folder from runs where name = 'live'");
  const std::string snapshots = folder + "/snapshots";
  testing::expect_one_error_line(
      run_kiln("runs export live --format tensorboard -o " + snapshots + "/tb --db " + db()),
      "into snapshots", "that is inside the run folder '" + folder + "'");
  EXPECT_FALSE(fs::exists(snapshots + "/tb"));
}

// A mixture of experts' layer measures are scalars as a row's columns are, train/moe_L.NAME, in
// the file written in training and in the export.
TEST_F(TensorBoard, LayerMeasuresAreScalarsBesideTheRowsColumns) {
  const std::string tb = dir_ / "tb";
  const std::string moe =
      " --set model.type=llama --set model.moe_experts=4 --set model.moe_top_k=2 "
      "--set train.steps=5 --set eval.every=0";
  const auto trained = run_kiln("run " + experiment("[metrics]\ntensorboard = \"" + tb + "\"\n") +
                                " --name moe" + moe);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const Series live = series_of(event_files(tb + "/moe"));
  for (const char* name : {"aux_loss", "z_loss", "load_imbalance", "dropped_fraction"}) {
    for (const char* layer : {"moe_0.", "moe_1."}) {
      const std::string tag = std::string("train/") + layer + name;
      ASSERT_TRUE(live.count(tag)) << tag;
      EXPECT_EQ(live.at(tag).size(), 5u) << tag;
    }
  }
  expect_same_series(live, expected_series(db(), "moe"), "trained");
  const std::string out = dir_ / "exported";
  ASSERT_EQ(run_kiln("runs export moe --format tensorboard -o " + out + " --db " + db()).exit_code,
            0);
  expect_same_series(series_of(event_files(out + "/moe")), live, "exported vs trained");
}

TEST_F(TensorBoard, AResumedRunAppendsAFileThatReadsAsTheStoresRows) {
  const std::string tb = dir_ / "tb";
  const std::string exp =
      experiment("[checkpoint]\nevery = 70\n\n[metrics]\ntensorboard = \"" + tb + "\"\n");
  // Killed while writing its first snapshot, after the store committed 64 rows (it commits at 64
  // rows if a second has not passed first): those steps are in the first file, and the resume,
  // which has no snapshot to start from, trains and logs them again with new step times.
  const auto killed = testing::run_child(
      {"run", exp, "--name", "r", "--set", "train.steps=100", "--set", "eval.every=0"},
      dir_ / "r.log", "snapshot.partial:1");
  ASSERT_TRUE(killed.killed) << testing::read_file(dir_ / "r.log");
  const auto resumed = run_kiln("resume r --db " + db());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(testing::scalar(db(), "select from_step from resumes"), "0");
  const auto files = event_files(tb + "/r");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_GE(series_of({files[0]}).at("train/loss").size(), 64u);
  const std::string config = testing::scalar(db(), "select config from runs where name = 'r'");
  expect_opening(files[1], config, 0);
  // The step times differ between the two attempts: only the later file's points are the store's.
  const Series shown = series_of(files);
  EXPECT_EQ(shown.at("train/loss").size(), 100u);
  expect_same_series(shown, expected_series(db(), "r"), "resumed");
}

}  // namespace
}  // namespace kiln
