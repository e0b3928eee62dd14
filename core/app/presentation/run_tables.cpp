#include "core/app/presentation/run_tables.h"

#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/app/presentation/layer_metrics_table.h"
#include "core/app/presentation/provenance.h"
#include "core/app/presentation/run_export.h"
#include "core/config/canonical.h"
#include "core/store/runs/run_environment.h"
#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

namespace {

std::string fixed(const std::optional<double>& v, int decimals) {
  return v && std::isfinite(*v) ? fmt::format("{:.{}f}", *v, decimals) : "-";
}

std::string or_dash(const std::string& s) {
  return s.empty() ? "-" : s;
}

// "2024-05-01T12:00:00.123Z" -> "2024-05-01 12:00:00"
std::string short_time(const std::string& iso) {
  if (iso.size() < 19) return or_dash(iso);
  std::string s = iso.substr(0, 19);
  s[10] = ' ';
  return s;
}

std::string duration_text(const std::optional<double>& seconds) {
  return seconds ? format_duration(*seconds) : "-";
}

// Each line two spaces in; the text's final newline does not become an extra empty line.
std::string indent(const std::string& text) {
  std::vector<std::string> lines = split(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::string out;
  for (const auto& line : lines)
    out += line.empty() ? "\n" : "  " + line + "\n";
  return out;
}

// A titled block of `kiln runs show`.
std::string block(const std::string& title, const Table& table) {
  if (table.rows.empty()) return fmt::format("\n{}: none\n", title);
  return fmt::format("\n{}\n{}", title, indent(render_text_table(table)));
}

Table evals_table(HistoryDb& db, int64_t run_id) {
  Table t{
      {"step", "split", "checkpoint", "loss", "perplexity"}, {}, {true, false, false, true, true}};
  for (const auto& e : run_evals(db, run_id)) {
    t.rows.push_back({std::to_string(e.step), e.split, or_dash(e.checkpoint), fixed(e.loss, 6),
                      fixed(e.perplexity, 4)});
  }
  return t;
}

Table tasks_table(HistoryDb& db, int64_t run_id) {
  Table t{{"step", "task", "metric", "checkpoint", "value", "stderr", "items", "cut", "rules"},
          {},
          {true, false, false, false, true, true, true, true, true}};
  for (const auto& s : read_task_scores(db.connection(), run_id)) {
    t.rows.push_back({std::to_string(s.step), s.task, s.metric, or_dash(s.checkpoint),
                      fixed(s.value, 4), fixed(s.stderr_, 4), std::to_string(s.items),
                      std::to_string(s.truncated), std::to_string(s.rules)});
  }
  return t;
}

Table snapshots_table(HistoryDb& db, int64_t run_id) {
  Table t{{"label", "step", "path", "created"}, {}, {false, true, false, false}};
  for (const auto& s : run_snapshots(db, run_id))
    t.rows.push_back({s.label, std::to_string(s.step), s.path, short_time(s.created_at)});
  return t;
}

Table resumes_table(HistoryDb& db, int64_t run_id) {
  Table t{{"from step", "changes", "at"}, {}, {true, false, false}};
  for (const auto& r : run_resumes(db, run_id))
    t.rows.push_back({std::to_string(r.from_step), or_dash(r.changes), short_time(r.created_at)});
  return t;
}

std::string key_values(const std::vector<std::pair<std::string, std::string>>& lines) {
  std::string out;
  for (const auto& [label, value] : lines) {
    if (!value.empty()) out += fmt::format("{:<12} {}\n", label, value);
  }
  return out;
}

std::string identity_lines(const RunRecord& r) {
  return key_values({{"experiment", r.experiment},
                     {"created", short_time(r.created_at) + " UTC"},
                     {"finished", r.finished_at.empty() ? "-" : short_time(r.finished_at) + " UTC"},
                     {"duration", duration_text(r.duration_s)},
                     {"git commit", r.git_commit},
                     {"host", r.host},
                     {"config hash", r.config_hash},
                     {"sweep", r.sweep},
                     {"error", r.error}});
}

// "ran with: precision bf16, threads 2": what the run's config left to the machine.
std::string environment_line(HistoryDb& db, const RunRecord& r) {
  std::vector<std::string> parts;
  for (const auto& [key, value] : read_run_environment(db.connection(), r.id))
    parts.push_back(key + " " + value);
  return key_values({{"ran with", join(parts, ", ")}});
}

std::string last_step_line(HistoryDb& db, const RunRecord& r) {
  const auto m = last_metrics(db, r.id);
  if (!m) return "none yet";
  return fmt::format(
      "step {}/{} | loss {} | lr {:.3e} | norm {:.4f} | {} tok/s | {:.1f} ms | {} tokens", m->step,
      r.planned_steps, fixed(m->loss, 6), m->lr.value_or(NAN), m->grad_norm.value_or(NAN),
      fixed(m->tokens_per_sec, 0), m->dt_ms.value_or(NAN), m->tokens_seen.value_or(0));
}

// "2.345678 at step 120 (perplexity 10.437)": the lowest loss and where it was reached.
std::string best_line(const std::optional<StepLoss>& best) {
  if (!best) return "-";
  return fmt::format("{} at step {} (perplexity {:.3f})", fixed(best->loss, 6), best->step,
                     std::exp(best->loss.value_or(NAN)));
}

// "29 of 30 updates (...)": steps whose update was not applied; empty when none was skipped.
std::string skipped_line(HistoryDb& db, const RunRecord& r) {
  const UpdateCount updates = count_updates(db.connection(), r.id, db.has_skipped_column());
  if (updates.skipped == 0) return "";
  return fmt::format("{} of {} updates (their gradients were not finite: not applied)",
                     updates.skipped, updates.steps);
}

std::string metric_lines(HistoryDb& db, const RunRecord& r) {
  return key_values(
      {{"last", last_step_line(db, r)},
       {"skipped", skipped_line(db, r)},
       {"best loss", best_line(best_train_loss(db, r.id))},
       {"best val", best_line(best_val_loss(db, r.id))},
       {"tokens/s", r.tokens_per_sec ? fixed(r.tokens_per_sec, 0) + " (mean after step 1)" : ""}});
}

std::string curve_line(const RunRecord& a, const RunRecord& b, const CurveComparison& c,
                       const std::string& environment) {
  const std::string pair = fmt::format("{} and {} (config {})", a.name, b.name, a.config_hash);
  if (c.identical) {
    return fmt::format("{}: loss curves identical over {} steps", pair, c.common_steps);
  }
  auto loss = [](const std::optional<double>& v) { return v ? fmt::format("{}", *v) : "no row"; };
  // One config, two curves: what the config left to the machine is the first suspect.
  const std::string why = environment.empty()
                              ? "; they ran with the same recorded threads and precision"
                              : "; they ran with " + environment;
  return fmt::format(
      "{}: loss curves first differ at step {} ({} vs {}), after {} identical steps{}", pair,
      c.first_difference, loss(c.loss_a), loss(c.loss_b), c.common_steps, why);
}

std::string curve_lines(HistoryDb& db, const std::vector<RunRecord>& runs) {
  std::string out;
  for (size_t i = 0; i < runs.size(); ++i) {
    for (size_t j = i + 1; j < runs.size(); ++j) {
      if (runs[i].config_hash != runs[j].config_hash) continue;
      const RunEnvironment a = read_run_environment(db.connection(), runs[i].id);
      const RunEnvironment b = read_run_environment(db.connection(), runs[j].id);
      const std::string environment = environment_differences(a, b);
      if (a.count("precision") && b.count("precision") && a.at("precision") != b.at("precision")) {
        // precision "auto" chose differently: one hash, two configurations in effect.
        out += fmt::format(
            "  {} and {} (config {}): not one configuration in effect: they ran with {}; their "
            "curves are not compared as one config's\n",
            runs[i].name, runs[j].name, runs[i].config_hash, environment);
        continue;
      }
      out += "  " +
             curve_line(runs[i], runs[j], compare_loss_curves(db, runs[i].id, runs[j].id),
                        environment) +
             "\n";
    }
  }
  return out.empty() ? "  no two of these runs share a config hash\n" : out;
}

Table summary_side_by_side(HistoryDb& db, const std::vector<RunRecord>& runs) {
  Table t;
  t.header.push_back("");
  for (const auto& r : runs)
    t.header.push_back(r.name);
  t.numeric.assign(t.header.size(), true);
  t.numeric[0] = false;
  auto row = [&](const std::string& label, auto cell) {
    std::vector<std::string> cells{label};
    for (const auto& r : runs)
      cells.push_back(cell(r));
    t.rows.push_back(std::move(cells));
  };
  row("status", [](const RunRecord& r) { return r.status; });
  row("steps", [](const RunRecord& r) { return fmt::format("{}/{}", r.steps, r.planned_steps); });
  row("final loss", [](const RunRecord& r) { return fixed(r.final_loss, 6); });
  row("best loss", [](const RunRecord& r) { return fixed(r.best_loss, 6); });
  row("best val", [](const RunRecord& r) { return fixed(r.best_val, 6); });
  row("tokens/s", [](const RunRecord& r) { return fixed(r.tokens_per_sec, 0); });
  row("duration", [](const RunRecord& r) { return duration_text(r.duration_s); });
  row("config hash", [](const RunRecord& r) { return r.config_hash; });
  std::map<int64_t, RunEnvironment> environments;
  std::set<std::string> keys;
  for (const auto& r : runs) {
    environments[r.id] = read_run_environment(db.connection(), r.id);
    for (const auto& entry : environments[r.id])
      keys.insert(entry.first);
  }
  for (const std::string& key : keys) {
    row("ran with " + key, [&](const RunRecord& r) {
      const auto found = environments[r.id].find(key);
      return found == environments[r.id].end() ? std::string("-") : found->second;
    });
  }
  return t;
}

}  // namespace

Table data_mixture_table(HistoryDb& db, const RunRecord& r) {
  std::map<std::string, std::string> weights;  // as the config writes them
  double total_weight = 0;
  const std::string prefix = "data.sources.", suffix = ".weight";
  for (const auto& [key, value] : flatten_config(r.config)) {
    if (key.rfind(prefix, 0) != 0 || key.size() <= prefix.size() + suffix.size() ||
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string name = key.substr(prefix.size(), key.size() - prefix.size() - suffix.size());
    weights[name] = value;
    total_weight += std::stod(value);
  }
  std::map<std::string, int64_t> tokens;
  int64_t total_tokens = 0;
  for (const MetricRow& row : run_metric_rows(db, r.id)) {
    if (row.source_tokens.empty()) continue;
    const nlohmann::json step = nlohmann::json::parse(row.source_tokens);
    for (const auto& [name, count] : step.items()) {
      tokens[name] += count.get<int64_t>();
      total_tokens += count.get<int64_t>();
    }
  }
  Table t{{"source", "weight", "asked", "tokens", "realised"}, {}, {false, true, true, true, true}};
  if (total_tokens == 0) return t;
  for (const auto& [name, weight] : weights) {
    const int64_t taken = tokens.count(name) ? tokens.at(name) : 0;
    t.rows.push_back({name, weight, fmt::format("{:.2f}%", 100 * std::stod(weight) / total_weight),
                      std::to_string(taken),
                      fmt::format("{:.2f}%", 100.0 * static_cast<double>(taken) /
                                                 static_cast<double>(total_tokens))});
  }
  return t;
}

Table run_list_table(const std::vector<RunRecord>& runs) {
  Table t{{"id", "name", "status", "sweep", "created", "steps", "final_loss", "best_loss",
           "best_val", "tok/s", "duration"},
          {},
          {true, false, false, false, false, true, true, true, true, true, true}};
  for (const auto& r : runs) {
    t.rows.push_back({std::to_string(r.id), r.name, r.status, or_dash(r.sweep),
                      short_time(r.created_at), fmt::format("{}/{}", r.steps, r.planned_steps),
                      fixed(r.final_loss, 4), fixed(r.best_loss, 4), fixed(r.best_val, 4),
                      fixed(r.tokens_per_sec, 0), duration_text(r.duration_s)});
  }
  return t;
}

std::string format_run_list(const std::vector<RunRecord>& runs, const std::string& format) {
  if (format == "csv") return runs_csv(runs);
  if (format == "json") return runs_json(runs);
  if (format != "table") {
    throw UserError(
        fmt::format("--format {} is not a list format: use table, csv or json", format));
  }
  return runs.empty() ? "no runs\n" : render_text_table(run_list_table(runs));
}

std::string describe_run(HistoryDb& db, const RunRecord& run) {
  std::string out = fmt::format("run {} (id {}): {}\n", run.name, run.id, run.status);
  out += identity_lines(run) + environment_line(db, run) + metric_lines(db, run);
  const Table files = run_files_table(db, run.id);
  out += files.rows.empty()
             ? "\nfiles: not recorded (the run is older than Kiln's record of them)\n"
             : block("files, in the order applied (a later file's keys win)", files);
  const Table inputs = run_inputs_table(db, run.id);
  if (!inputs.rows.empty()) out += block("inputs, the files the run reads", inputs);
  const Table mixture = data_mixture_table(db, run);
  if (!mixture.rows.empty()) {
    out += block(
        "data mixture: each source's share asked (its weight) and the share of the "
        "tokens its steps took",
        mixture);
  }
  out += block("evals", evals_table(db, run.id));
  const Table tasks = tasks_table(db, run.id);
  if (!tasks.rows.empty()) {
    out += block("task scores (stderr: of the mean over items; rules: the scoring rules' version)",
                 tasks);
    const std::string note = older_rules_note(db.connection(), {run.id}, "");
    if (!note.empty()) out += note + "\n";
  }
  const Table layers = layer_metrics_table(db, run.id);
  if (!layers.rows.empty()) out += block("layer metrics, per step (docs/moe.md)", layers);
  out += block("snapshots", snapshots_table(db, run.id));
  out += block("resumes", resumes_table(db, run.id));
  return out + "\nconfig\n" + indent(run.config);
}

std::vector<std::pair<std::string, std::vector<std::string>>> differing_config(
    const std::vector<RunRecord>& runs) {
  std::vector<FlatConfig> configs;
  for (const auto& r : runs)
    configs.push_back(flatten_config(r.config));
  return differing_keys(configs);
}

Table differing_config_table(const std::vector<RunRecord>& runs) {
  Table t;
  t.header.push_back("key");
  for (const auto& r : runs)
    t.header.push_back(r.name);
  t.numeric.assign(t.header.size(), true);
  t.numeric[0] = false;
  for (const auto& [key, values] : differing_config(runs)) {
    t.rows.push_back({key});
    t.rows.back().insert(t.rows.back().end(), values.begin(), values.end());
  }
  return t;
}

std::string compare_report(HistoryDb& db, const std::vector<RunRecord>& runs) {
  Table config = differing_config_table(runs);
  std::string out = config.rows.empty()
                        ? "config keys that differ: none besides run.name\n"
                        : "config keys that differ\n" + indent(render_text_table(config));
  out += "\nresults\n" + indent(render_text_table(summary_side_by_side(db, runs)));
  return out + "\nloss curves of runs sharing a config hash\n" + curve_lines(db, runs);
}

}  // namespace kiln
