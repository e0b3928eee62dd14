#include "core/store/tensorboard/run_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "core/store/runs/output_guard.h"
#include "core/util/error.h"
#include "core/util/process.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;

constexpr const char* kOption = "metrics.tensorboard";

// TensorBoard's text plugin renders markdown; four spaces make every line of the TOML code.
std::string config_markdown(const std::string& config_toml) {
  std::string out;
  for (size_t start = 0; start < config_toml.size();) {
    const size_t end = std::min(config_toml.find('\n', start), config_toml.size());
    out += "    " + config_toml.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

// The nearest part of `path` that exists, when that is not a folder.
std::optional<fs::path> file_in_the_way(const fs::path& path) {
  std::error_code ec;
  for (fs::path at = fs::absolute(path, ec); !at.empty(); at = at.parent_path()) {
    if (fs::exists(at, ec)) {
      if (fs::is_directory(at, ec)) return std::nullopt;
      return at;
    }
    if (at == at.parent_path()) break;
  }
  return std::nullopt;
}

}  // namespace

std::vector<ScalarValue> metric_scalars(const MetricRow& row) {
  std::vector<ScalarValue> out = {{"train/loss", row.loss},
                                  {"train/lr", row.lr},
                                  {"train/grad_norm", row.grad_norm},
                                  {"train/tokens_per_sec", row.tokens_per_sec},
                                  {"train/dt_ms", row.dt_ms},
                                  {"train/tokens_seen", static_cast<double>(row.tokens_seen)},
                                  {"train/loss_scale", row.loss_scale},
                                  {"train/skipped", row.skipped ? 1.0 : 0.0}};
  if (row.rank_skew_ms) out.push_back({"train/rank_skew_ms", *row.rank_skew_ms});
  if (row.bubble) out.push_back({"train/bubble", *row.bubble});
  for (const auto& [name, value] : row.layer_measures)
    out.push_back({"train/" + name, value});
  return out;
}

ScalarValue eval_scalar(const EvalRow& row) {
  return {(row.checkpoint.empty() ? "" : "snapshot/") + row.split + "/loss", row.loss};
}

ScalarValue task_scalar(const TaskScoreRow& row) {
  return {(row.checkpoint.empty() ? "" : "snapshot/") + ("task/" + row.task + "/" + row.metric),
          row.value};
}

std::string opening_records(double wall_time, int64_t step, const std::string& config_toml) {
  return tfrecord(file_version_event(wall_time)) +
         tfrecord(text_event(wall_time, step, "config", config_markdown(config_toml)));
}

std::string metric_record(double wall_time, const MetricRow& row) {
  return tfrecord(scalars_event(wall_time, row.step, metric_scalars(row)));
}

std::string eval_record(double wall_time, const EvalRow& row) {
  return tfrecord(scalars_event(wall_time, row.step, {eval_scalar(row)}));
}

std::string task_record(double wall_time, const TaskScoreRow& row) {
  return tfrecord(scalars_event(wall_time, row.step, {task_scalar(row)}));
}

std::string tensorboard_run_folder(const std::string& dir, const std::string& run_name) {
  return (fs::path(dir) / run_name).string();
}

void check_tensorboard_dir(const std::string& dir, const std::string& option,
                           const std::string& db) {
  if (dir.empty()) return;  // none written
  check_output_path(dir, db, option);
  if (auto file = file_in_the_way(dir)) {
    throw UserError(fmt::format(
        "{} {}: '{}' is a file, not a folder: name a folder for the event files (it is made "
        "when missing)",
        option, dir, file->string()));
  }
}

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TensorBoardLog::TensorBoardLog(RunStore& store, int64_t run_id, const std::string& dir,
                               const std::string& run_name, const std::string& config_toml,
                               int64_t start_step, std::function<void(const std::string&)> warn)
    : store_(store), run_id_(run_id), warn_(std::move(warn)) {
  auto cannot = [&](const std::string& what, const std::string& why) {
    return UserError(fmt::format(
        "{} {}: cannot write '{}': {}: set {} to a folder this user may write, or \"\" for none",
        kOption, dir, what, why, kOption));
  };
  const std::string folder = tensorboard_run_folder(dir, run_name);
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw cannot(folder, ec.message());
  path_ = new_event_file_path(folder, host_name());
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 || !(file_ = ::fdopen(fd, "wb"))) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    throw cannot(path_, std::strerror(err));
  }
  if (const int err = append(opening_records(wall_time_now(), start_step, config_toml))) {
    ::unlink(path_.c_str());
    throw cannot(path_, std::strerror(err));
  }
  store_.set_listener(this);
}

TensorBoardLog::~TensorBoardLog() {
  store_.set_listener(nullptr);
  if (file_) std::fclose(file_);
}

void TensorBoardLog::metric_added(int64_t run_id, const MetricRow& row) {
  if (file_ && run_id == run_id_) metrics_.emplace_back(wall_time_now(), row);
}

void TensorBoardLog::eval_added(int64_t run_id, const EvalRow& row) {
  if (file_ && run_id == run_id_) evals_.emplace_back(wall_time_now(), row);
}

void TensorBoardLog::task_score_added(int64_t run_id, const TaskScoreRow& row) {
  if (file_ && run_id == run_id_) tasks_.emplace_back(wall_time_now(), row);
}

void TensorBoardLog::committed() {
  if (!file_ || (metrics_.empty() && evals_.empty() && tasks_.empty())) return;
  std::string records;
  for (const auto& [wall_time, row] : metrics_)
    records += metric_record(wall_time, row);
  for (const auto& [wall_time, row] : evals_)
    records += eval_record(wall_time, row);
  for (const auto& [wall_time, row] : tasks_)
    records += task_record(wall_time, row);
  const int64_t first_step = !metrics_.empty() ? metrics_.front().second.step
                             : !evals_.empty() ? evals_.front().second.step
                                               : tasks_.front().second.step;
  metrics_.clear();
  evals_.clear();
  tasks_.clear();
  if (const int err = append(records)) {
    warn_(fmt::format(
        "{}: writing '{}' failed ({}), so it ends before step {}; the run store has every "
        "step, and `kiln runs export RUN --format tensorboard -o DIR` writes them all",
        kOption, path_, std::strerror(err), first_step));
  }
}

int TensorBoardLog::append(const std::string& records) {
  errno = 0;
  if (std::fwrite(records.data(), 1, records.size(), file_) == records.size() &&
      std::fflush(file_) == 0) {
    return 0;
  }
  const int err = errno ? errno : EIO;
  std::fclose(file_);
  file_ = nullptr;
  return err;
}

}  // namespace kiln
