#include "core/app/speed/compare.h"

#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/table.h"
#include "core/util/text.h"

namespace kiln {

namespace {

constexpr size_t kLabelsListed = 10;

std::string ratio_text(double current, double recorded) {
  if (!(recorded > 0) || !std::isfinite(current)) return "-";
  return fmt::format("{:.3f}", current / recorded);
}

// "no bench result 'X' in 'DB': ..." with what the store has instead.
std::string unknown_label_line(Connection& db, const std::string& label) {
  const std::vector<std::string> labels = bench_labels(db);
  if (labels.empty()) {
    return fmt::format(
        "no bench result '{}' in '{}': none is recorded there yet; `kiln bench EXPERIMENT "
        "--record {}` records one",
        label, db.path(), label);
  }
  const std::string guess = nearest(label, labels);
  const size_t first = labels.size() > kLabelsListed ? labels.size() - kLabelsListed : 0;
  return fmt::format("no bench result '{}' in '{}': {}recorded labels{}: {}", label, db.path(),
                     guess.empty() ? "" : "did you mean '" + guess + "'? ",
                     first > 0 ? " (the last 10)" : "",
                     join({labels.begin() + static_cast<long>(first), labels.end()}, ", "));
}

}  // namespace

std::string resolve_bench_label(const std::string& requested, const std::string& git_commit,
                                const std::string& config_hash) {
  if (requested != kDefaultBenchLabel) {
    check_bench_label(requested);
    return requested;
  }
  const std::string hash = config_hash.substr(0, 8);
  return git_commit.empty() ? hash : git_commit.substr(0, 7) + "-" + hash;
}

std::vector<std::string> bench_mismatches(const BenchRecord& recorded, const BenchRecord& current) {
  std::vector<std::string> differences;
  const BenchMachine& was = recorded.machine;
  const BenchMachine& is = current.machine;
  auto differ = [&](const std::string& what, const std::string& then, const std::string& now) {
    if (then != now)
      differences.push_back(fmt::format("{} '{}' recorded, '{}' here", what, then, now));
  };
  differ("CPU", was.cpu_model, is.cpu_model);
  differ("CPU count", std::to_string(was.cpus), std::to_string(is.cpus));
  differ("CPU features", was.cpu_features, is.cpu_features);
  differ("device", was.device, is.device);
  differ("threads", std::to_string(was.threads), std::to_string(is.threads));
  differ("config hash", recorded.config_hash, current.config_hash);
  return differences;
}

BenchRecord require_bench_baseline(Connection& db, const std::string& label,
                                   const BenchRecord& current, bool allow_mismatch) {
  std::optional<BenchRecord> recorded = find_bench_record(db, label);
  if (!recorded) throw UserError(unknown_label_line(db, label));
  const std::vector<std::string> differences = bench_mismatches(*recorded, current);
  if (!differences.empty() && !allow_mismatch) {
    throw UserError(fmt::format(
        "bench result '{}' was measured on another machine or config ({}): its ratios would "
        "not measure a change of Kiln; compare on the machine and config it was recorded with "
        "(experiment {}), or pass --allow-mismatch",
        label, join(differences, "; "), recorded->experiment));
  }
  return *recorded;
}

std::string format_bench_comparison(const BenchRecord& recorded, const BenchRecord& current) {
  std::string out = fmt::format(
      "against '{}' (recorded {}{}; {})\n", recorded.label, recorded.recorded_at,
      recorded.git_commit.empty() ? "" : " at commit " + recorded.git_commit.substr(0, 7),
      recorded.blas);
  for (const std::string& difference : bench_mismatches(recorded, current))
    out += "  compared across a difference: " + difference + "\n";
  Table table;
  table.header = {"", "this run", "recorded", "this/recorded"};
  table.numeric = {false, true, true, true};
  auto row = [&](const std::string& name, double now, double then, const char* format) {
    table.rows.push_back({name, fmt::format(fmt::runtime(format), now),
                          fmt::format(fmt::runtime(format), then), ratio_text(now, then)});
  };
  row("tokens/s", current.tokens_per_sec, recorded.tokens_per_sec, "{:.0f}");
  row("step ms", current.ms.step, recorded.ms.step, "{:.3f}");
  const std::pair<const char*, double BenchPhases::*> phases[] = {
      {"  data", &BenchPhases::data},           {"  forward", &BenchPhases::forward},
      {"  backward", &BenchPhases::backward},   {"  communication", &BenchPhases::communication},
      {"  optimizer", &BenchPhases::optimizer}, {"  logging", &BenchPhases::logging}};
  for (const auto& [name, phase] : phases)
    row(name, current.ms.*phase, recorded.ms.*phase, "{:.3f}");
  if (current.mfu && recorded.mfu) {
    row("MFU %", 100.0 * *current.mfu, 100.0 * *recorded.mfu, "{:.1f}");
  }
  row("MFU % of matmul", 100.0 * current.mfu_of_measured_peak,
      100.0 * recorded.mfu_of_measured_peak, "{:.1f}");
  row("peak memory MB", current.peak_memory_mb, recorded.peak_memory_mb, "{:.0f}");
  out += render_text_table(table);
  out +=
      "this/recorded: above 1 is faster for tokens/s and MFU; below 1 is faster for ms and "
      "smaller for memory\n";
  return out;
}

}  // namespace kiln
