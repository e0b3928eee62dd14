// TensorBoard event files (core/store/tensorboard/event_file.h, core/store/tensorboard/run_log.h),
// read back with the independent reader of support/event_file_reader.h: the CRC against its
// published check value, every value of every row against the rows given to the store, and the file
// written at each store commit.
#include "core/store/tensorboard/event_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <regex>

#include "core/config/config.h"
#include "core/store/runs/writer.h"
#include "core/store/tensorboard/run_log.h"
#include "core/util/error.h"
#include "core/util/process.h"
#include "event_file_reader.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::DecodedEvent;
using testing::read_event_file;
using testing::TempDir;

// Bit for bit, NaN included: what a float32 simple_value holds of `value`.
bool same_float(float written, double value) {
  const float expected = static_cast<float>(value);
  return std::memcmp(&written, &expected, sizeof written) == 0;
}

std::vector<std::string> files_in(const std::string& folder) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(folder))
    out.push_back(entry.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// tag -> value of one scalars event.
std::map<std::string, float> scalars_of(const DecodedEvent& event) {
  std::map<std::string, float> out;
  for (const auto& v : event.values) {
    EXPECT_TRUE(v.simple_value.has_value()) << v.tag;
    out[v.tag] = v.simple_value.value_or(0);
  }
  return out;
}

void expect_row(const DecodedEvent& event, const MetricRow& row) {
  EXPECT_EQ(event.step, row.step);
  std::map<std::string, double> expected = {{"train/loss", row.loss},
                                            {"train/lr", row.lr},
                                            {"train/grad_norm", row.grad_norm},
                                            {"train/tokens_per_sec", row.tokens_per_sec},
                                            {"train/dt_ms", row.dt_ms},
                                            {"train/tokens_seen", double(row.tokens_seen)},
                                            {"train/loss_scale", row.loss_scale},
                                            {"train/skipped", row.skipped ? 1.0 : 0.0}};
  if (row.rank_skew_ms) expected["train/rank_skew_ms"] = *row.rank_skew_ms;
  if (row.bubble) expected["train/bubble"] = *row.bubble;
  const auto written = scalars_of(event);
  ASSERT_EQ(written.size(), expected.size()) << "step " << row.step;
  for (const auto& [tag, value] : expected) {
    ASSERT_TRUE(written.count(tag)) << tag << " missing at step " << row.step;
    EXPECT_TRUE(same_float(written.at(tag), value))
        << tag << " at step " << row.step << ": " << written.at(tag) << " vs " << value;
  }
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    lines.push_back(text.substr(start, end - start));
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

void expect_opening(const std::vector<DecodedEvent>& events, int64_t step,
                    const std::string& config) {
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(events[0].values.empty());
  ASSERT_EQ(events[1].values.size(), 1u);
  const auto& text = events[1].values[0];
  EXPECT_EQ(events[1].step, step);
  EXPECT_EQ(text.tag, "config");
  EXPECT_EQ(text.plugin_name, "text");
  EXPECT_EQ(text.data_class, 2u);  // DATA_CLASS_TENSOR
  EXPECT_EQ(text.dtype, 7u);       // DT_STRING
  EXPECT_TRUE(text.has_shape);
  ASSERT_EQ(text.string_val.size(), 1u);
  std::string as_code;  // markdown: every line indented four spaces
  for (const auto& line : lines_of(config))
    as_code += "    " + line + "\n";
  EXPECT_EQ(text.string_val[0], as_code);
}

// Metric events in a decoded file: those with a train/ tag.
size_t metric_events(const std::vector<DecodedEvent>& events) {
  size_t n = 0;
  for (const auto& e : events)
    n += !e.values.empty() && e.values[0].tag == "train/loss";
  return n;
}

TEST(EventFile, Crc32cMatchesThePublishedCheckValue) {
  EXPECT_EQ(testing::crc32c_bitwise("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  std::string bytes;
  for (int i = 0; i < 1000; ++i) {
    bytes += static_cast<char>((i * 131) & 0xff);
    ASSERT_EQ(crc32c(bytes), testing::crc32c_bitwise(bytes)) << i;
    ASSERT_EQ(masked_crc32c(bytes), testing::tfrecord_mask(testing::crc32c_bitwise(bytes)));
  }
}

TEST(EventFile, StepsAndValuesAtTheEdgesOfTheirRanges) {
  TempDir dir;
  const int64_t big_step = (int64_t{1} << 40) + 3;  // a six-byte varint
  const std::vector<ScalarValue> values = {
      {"a", 0.0}, {"b", -1.5}, {"c", 1e300}, {"d", std::numeric_limits<double>::quiet_NaN()}};
  testing::write_text(dir / "f", tfrecord(file_version_event(1.5)) +
                                     tfrecord(scalars_event(1e9 + 0.25, big_step, values)) +
                                     tfrecord(scalars_event(2.0, 0, {{"step/zero", 7}})));
  const auto events = read_event_file(dir / "f");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].wall_time, 1.5);
  EXPECT_EQ(events[1].wall_time, 1e9 + 0.25);
  EXPECT_EQ(events[1].step, big_step);
  ASSERT_EQ(events[1].values.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(events[1].values[i].tag, values[i].tag);
    EXPECT_TRUE(same_float(*events[1].values[i].simple_value, values[i].value)) << i;
  }
  EXPECT_TRUE(std::isinf(*events[1].values[2].simple_value));  // 1e300 past float32: inf
  EXPECT_EQ(events[2].step, 0);
  EXPECT_EQ(*events[2].values[0].simple_value, 7.0f);
}

TEST(EventFile, TheLogWritesWhatTheStoreCommitsWhenItCommits) {
  TempDir dir;
  const std::string db = dir / "kiln.db";
  RunStore store(db);
  const int64_t id = store.create_run(NewRun{"sweep/m", "exp.toml", "[run]\n", "0123456789abcdef",
                                             7, 1, 5, "", "host", "", "", ""});
  const int64_t other = store.create_run(
      NewRun{"other", "exp.toml", "[run]\n", "0123456789abcdef", 7, 1, 5, "", "host", "", "", ""});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<MetricRow> rows = {
      {1, 4.25, 3e-4, 6.5, 1151.18, 17.79, 2048, 1, false, std::nullopt, std::nullopt, std::nullopt,
       ""},
      {2, nan, 3e-4, -nan, 1200.5, 16.5, 4096, 65536, true, 0.75, std::nullopt, std::nullopt, ""},
      {3, 3.125, 2.5e-4, 1.0 / 3, 1e7, 0.001, (int64_t{1} << 40) + 1, 32768, false, std::nullopt,
       0.375, std::nullopt, ""},
  };
  std::vector<std::string> warnings;
  const std::string config = "[optimizer]\nlr = 0.003\n";
  {
    TensorBoardLog log(store, id, dir / "tb", "sweep/m", config, 0,
                       [&](const std::string& w) { warnings.push_back(w); });
    const auto files = files_in(dir / "tb/sweep/m");
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(files[0], log.path());
    EXPECT_TRUE(std::regex_match(
        fs::path(log.path()).filename().string(),
        std::regex(R"(events\.out\.tfevents\.\d{10}\.)" + host_name() + R"(\.kiln)")))
        << log.path();
    expect_opening(read_event_file(log.path()), 0, config);
    for (const auto& row : rows) {
      store.add_metric(id, row);
      store.add_metric(other, row);  // another run's rows are not this file's
      // Only what the store committed is in the file, whenever the store commits (at most a
      // second after the rows came, or at 64 rows).
      const auto committed =
          testing::scalar(db, "select count(*) from metrics where run_id = " + std::to_string(id));
      EXPECT_EQ(std::to_string(metric_events(read_event_file(log.path()))), committed);
    }
    store.add_eval(id, EvalRow{2, "val", 3.5, "", std::nullopt});
    store.add_eval(id, EvalRow{3, "val", 3.25, "best", std::nullopt});  // as `kiln eval` records
    store.flush();
    const auto events = read_event_file(log.path());
    ASSERT_EQ(events.size(), 2 + rows.size() + 2);
    for (size_t i = 0; i < rows.size(); ++i)
      expect_row(events[2 + i], rows[i]);
    const auto& val = events[2 + rows.size()];
    EXPECT_EQ(val.step, 2);
    EXPECT_EQ(scalars_of(val), (std::map<std::string, float>{{"val/loss", 3.5f}}));
    const auto& snapshot_eval = events[3 + rows.size()];
    EXPECT_EQ(snapshot_eval.step, 3);
    EXPECT_EQ(scalars_of(snapshot_eval),
              (std::map<std::string, float>{{"snapshot/val/loss", 3.25f}}));
    double last = 0;
    for (const auto& e : events) {  // each row at the time it came, in order
      EXPECT_GE(e.wall_time, last);
      EXPECT_LE(e.wall_time, wall_time_now());
      last = e.wall_time;
    }
  }
  store.add_metric(
      id, MetricRow{4, 3.0, 0, 0, 0, 0, 0, 1, false, std::nullopt, std::nullopt, std::nullopt, ""});
  store.flush();  // the log is gone: nothing more in its file
  EXPECT_EQ(metric_events(read_event_file(files_in(dir / "tb/sweep/m")[0])), rows.size());

  // A resumed session: a new file that sorts after the first, opening at the step it resumes
  // after, even when made within the same second.
  TensorBoardLog resumed(store, id, dir / "tb", "sweep/m", config, 3,
                         [&](const std::string& w) { warnings.push_back(w); });
  const auto files = files_in(dir / "tb/sweep/m");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[1], resumed.path());
  expect_opening(read_event_file(resumed.path()), 3, config);
  EXPECT_TRUE(warnings.empty());
}

TEST(EventFile, FoldersThatCannotTakeEventFilesAreRefused) {
  TempDir dir;
  testing::write_text(dir / "a_file", "x");
  testing::write_text(dir / "kiln.db", "");
  const std::string db = dir / "kiln.db";
  const std::string folder = dir / "runs/a@12345678";  // a run's folder, with its marker
  const std::string snapshots = folder + "/snapshots";
  std::filesystem::create_directories(snapshots);
  testing::write_text(folder + "/run.json", "{}");
  auto error_of = [&](const std::string& folder) {
    try {
      check_tensorboard_dir(folder, "metrics.tensorboard", db);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of(""), "");
  EXPECT_EQ(error_of(dir / "tb"), "");
  EXPECT_EQ(error_of(dir / "runs"), "");  // beside the runs' folders, in none of them
  EXPECT_NE(error_of(folder).find("that is inside the run folder '" + folder + "'"),
            std::string::npos);
  EXPECT_NE(error_of(dir / "a_file")
                .find("metrics.tensorboard " + (dir / "a_file") + ": '" + (dir / "a_file") +
                      "' is a file, not a folder"),
            std::string::npos)
      << error_of(dir / "a_file");
  EXPECT_NE(error_of(dir / "a_file/tb/x").find("'" + (dir / "a_file") + "' is a file"),
            std::string::npos);
  EXPECT_NE(error_of(db).find("that is the run store"), std::string::npos);
  EXPECT_NE(error_of(snapshots + "/../snapshots/tb")
                .find("that is inside the run folder '" + folder + "'"),
            std::string::npos)
      << error_of(snapshots + "/../snapshots/tb");
  // A folder that cannot be made is refused when the log opens, with nothing left behind.
  RunStore store(dir / "store.db");
  const int64_t id = store.create_run(
      NewRun{"a", "exp.toml", "[run]\n", "0123456789abcdef", 7, 1, 5, "", "host", "", "", ""});
  EXPECT_THROW(TensorBoardLog(store, id, dir / "a_file", "a", "", 0, nullptr), UserError);
}

// The [metrics] section holds only unhashed keys: a config hashes as it did before the section
// existed (the value below is what kiln printed for this experiment before it).
TEST(MetricsSection, LeavesTheConfigHashAsItWas) {
  const std::string experiment = R"([run]
db = "/tmp/tbhash/kiln.db"
out_dir = "/tmp/tbhash/runs"
threads = 1

[model]
type = "gpt"
n_layer = 2
n_head = 2
n_embd = 32
block_size = 32
vocab_size = 64

[data]
train = "/tmp/tbhash/data/train_*.bin"
val = "/tmp/tbhash/data/val_*.bin"

[train]
steps = 3
micro_batch = 8
seq_len = 32

[optimizer]
lr = 1e-2
)";
  const ResolvedConfig plain = load_config_text(experiment, "tiny.toml", {});
  EXPECT_EQ(plain.hash(), "422934c4fcd5ba42");
  EXPECT_EQ(load_config_text(experiment, "tiny.toml", {"metrics.tensorboard=/tmp/tb"}).hash(),
            "422934c4fcd5ba42");
  EXPECT_NE(plain.to_toml().find("[metrics]\ntensorboard = \"\"\n"), std::string::npos)
      << plain.to_toml();
}

}  // namespace
}  // namespace kiln
