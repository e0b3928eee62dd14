#include "core/store/runs/speed_records.h"

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

namespace {

constexpr size_t kMaxLabelLength = 64;

// The columns of bench_results after label and recorded_at, in the order both the insert binds
// and the select reads them.
constexpr const char* kColumns =
    "git_commit, experiment, config_hash, cpu_model, cpus, cpu_features, device, threads, blas, "
    "steps, warmup, tokens_per_sec, step_ms, data_ms, forward_ms, backward_ms, communication_ms, "
    "optimizer_ms, logging_ms, achieved_flops, hardware_peak_flops, measured_peak_flops, mfu, "
    "mfu_of_measured_peak, peak_memory_mb, parameters, active_parameters";
constexpr int kColumnCount = 27;

bool is_label_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

BenchRecord read_record(const Statement& row) {
  BenchRecord r;
  r.label = row.text(0);
  r.recorded_at = row.text(1);
  int i = 2;
  r.git_commit = row.text(i++);
  r.experiment = row.text(i++);
  r.config_hash = row.text(i++);
  r.machine.cpu_model = row.text(i++);
  r.machine.cpus = row.integer(i++);
  r.machine.cpu_features = row.text(i++);
  r.machine.device = row.text(i++);
  r.machine.threads = row.integer(i++);
  r.blas = row.text(i++);
  r.steps = row.integer(i++);
  r.warmup = row.integer(i++);
  r.tokens_per_sec = row.real(i++);
  for (double* phase : {&r.ms.step, &r.ms.data, &r.ms.forward, &r.ms.backward, &r.ms.communication,
                        &r.ms.optimizer, &r.ms.logging}) {
    *phase = row.real(i++);
  }
  r.achieved_flops = row.real(i++);
  r.hardware_peak_flops = row.maybe_real(i++);
  r.measured_peak_flops = row.real(i++);
  r.mfu = row.maybe_real(i++);
  r.mfu_of_measured_peak = row.real(i++);
  r.peak_memory_mb = row.real(i++);
  r.parameters = row.maybe_real(i++);
  r.active_parameters = row.maybe_real(i++);
  return r;
}

}  // namespace

void check_bench_label(const std::string& label) {
  bool valid =
      !label.empty() && label.size() <= kMaxLabelLength && label[0] != '-' && label[0] != '.';
  for (char c : label)
    valid = valid && is_label_char(c);
  if (!valid) {
    throw UserError(fmt::format(
        "bench label '{}' is not valid: use 1 to {} letters, digits, '.', '_' or '-', starting "
        "with a letter or digit (e.g. --record baseline)",
        label.substr(0, 80), kMaxLabelLength));
  }
}

void require_free_bench_label(Connection& db, const std::string& label) {
  Statement existing(db, "SELECT recorded_at FROM bench_results WHERE label = ?", {label});
  if (existing.step()) {
    throw UserError(fmt::format(
        "a bench result labelled '{}' is already in '{}' (recorded {}): results are kept, not "
        "replaced: pick another label",
        label, db.path(), existing.text(0)));
  }
}

void insert_bench_record(Connection& db, const BenchRecord& record) {
  check_bench_label(record.label);
  Transaction write(db);
  require_free_bench_label(db, record.label);
  std::string placeholders = "?";
  for (int i = 0; i < kColumnCount; ++i)
    placeholders += ", ?";
  Statement insert(
      db, fmt::format("INSERT INTO bench_results (label, {}) VALUES ({})", kColumns, placeholders));
  const BenchRecord& r = record;
  insert.bind(1, r.label).bind_text_or_null(2, r.git_commit).bind(3, r.experiment);
  insert.bind(4, r.config_hash).bind(5, r.machine.cpu_model).bind(6, r.machine.cpus);
  insert.bind(7, r.machine.cpu_features).bind(8, r.machine.device).bind(9, r.machine.threads);
  insert.bind(10, r.blas).bind(11, r.steps).bind(12, r.warmup).bind(13, r.tokens_per_sec);
  insert.bind(14, r.ms.step).bind(15, r.ms.data).bind(16, r.ms.forward).bind(17, r.ms.backward);
  insert.bind(18, r.ms.communication).bind(19, r.ms.optimizer).bind(20, r.ms.logging);
  insert.bind(21, r.achieved_flops).bind(22, r.hardware_peak_flops);
  insert.bind(23, r.measured_peak_flops).bind(24, r.mfu).bind(25, r.mfu_of_measured_peak);
  insert.bind(26, r.peak_memory_mb).bind(27, r.parameters).bind(28, r.active_parameters);
  insert.step();
  write.commit();
}

std::optional<BenchRecord> find_bench_record(Connection& db, const std::string& label) {
  Statement select(
      db, fmt::format("SELECT label, recorded_at, {} FROM bench_results WHERE label = ?", kColumns),
      {label});
  if (!select.step()) return std::nullopt;
  return read_record(select);
}

std::vector<std::string> bench_labels(Connection& db) {
  std::vector<std::string> labels;
  Statement select(db, "SELECT label FROM bench_results ORDER BY recorded_at, label");
  while (select.step())
    labels.push_back(select.text(0));
  return labels;
}

}  // namespace kiln
