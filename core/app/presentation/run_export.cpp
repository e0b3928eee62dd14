// Run history for programs (core/app/presentation/run_export.h): csv, json and jsonl, every digit
// kept.
#include "core/app/presentation/run_export.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/store/history/queries.h"
#include "core/store/runs/task_scores.h"
#include "core/util/error.h"

namespace kiln {

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Every digit that identifies the double (shortest round trip); "" when unknown.
std::string exact(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? fmt::format("{}", *v) : "";
}

nlohmann::ordered_json json_number(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

std::string export_csv(HistoryDb& db, const RunRecord& run) {
  std::string out =
      "run,kind,step,loss,lr,grad_norm,tokens_per_sec,dt_ms,tokens_seen,split,checkpoint,"
      "perplexity\n";
  for (const auto& m : run_metrics(db, run.id)) {
    out += fmt::format("{},metric,{},{},{},{},{},{},{},,,\n", csv_field(run.name), m.step,
                       exact(m.loss), exact(m.lr), exact(m.grad_norm), exact(m.tokens_per_sec),
                       exact(m.dt_ms), m.tokens_seen ? std::to_string(*m.tokens_seen) : "");
  }
  for (const auto& e : run_evals(db, run.id)) {
    out += fmt::format("{},eval,{},{},,,,,,{},{},{}\n", csv_field(run.name), e.step, exact(e.loss),
                       csv_field(e.split), csv_field(e.checkpoint), exact(e.perplexity));
  }
  return out;
}

std::string export_jsonl(HistoryDb& db, const RunRecord& run) {
  std::string out;
  for (const auto& m : run_metrics(db, run.id)) {
    nlohmann::ordered_json row = {
        {"kind", "metric"},
        {"run", run.name},
        {"step", m.step},
        {"loss", json_number(m.loss)},
        {"lr", json_number(m.lr)},
        {"grad_norm", json_number(m.grad_norm)},
        {"tokens_per_sec", json_number(m.tokens_per_sec)},
        {"dt_ms", json_number(m.dt_ms)},
        {"tokens_seen",
         m.tokens_seen ? nlohmann::ordered_json(*m.tokens_seen) : nlohmann::ordered_json(nullptr)}};
    out += row.dump() + "\n";
  }
  for (const auto& e : run_evals(db, run.id)) {
    nlohmann::ordered_json row = {{"kind", "eval"},
                                  {"run", run.name},
                                  {"step", e.step},
                                  {"loss", json_number(e.loss)},
                                  {"split", e.split},
                                  {"checkpoint", e.checkpoint},
                                  {"perplexity", json_number(e.perplexity)}};
    out += row.dump() + "\n";
  }
  for (const auto& s : read_task_scores(db.connection(), run.id)) {
    nlohmann::ordered_json row = {{"kind", "task"},
                                  {"run", run.name},
                                  {"step", s.step},
                                  {"task", s.task},
                                  {"metric", s.metric},
                                  {"value", json_number(s.value)},
                                  {"stderr", json_number(s.stderr_)},
                                  {"items", s.items},
                                  {"truncated", s.truncated},
                                  {"checkpoint", s.checkpoint},
                                  {"rules", s.rules}};
    out += row.dump() + "\n";
  }
  return out;
}
}  // namespace

std::string runs_csv(const std::vector<RunRecord>& runs) {
  std::string out =
      "id,name,status,sweep,created_at,finished_at,steps,planned_steps,final_loss,best_loss,"
      "best_val,tokens_per_sec,duration_s,config_hash\n";
  for (const auto& r : runs) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.id, csv_field(r.name),
                       r.status, csv_field(r.sweep), r.created_at, r.finished_at, r.steps,
                       r.planned_steps, exact(r.final_loss), exact(r.best_loss), exact(r.best_val),
                       exact(r.tokens_per_sec), exact(r.duration_s), r.config_hash);
  }
  return out;
}

std::string runs_json(const std::vector<RunRecord>& runs) {
  auto out = nlohmann::ordered_json::array();
  for (const auto& r : runs) {
    out.push_back({{"id", r.id},
                   {"name", r.name},
                   {"status", r.status},
                   {"sweep", r.sweep},
                   {"created_at", r.created_at},
                   {"finished_at", r.finished_at.empty() ? nlohmann::ordered_json(nullptr)
                                                         : nlohmann::ordered_json(r.finished_at)},
                   {"steps", r.steps},
                   {"planned_steps", r.planned_steps},
                   {"final_loss", json_number(r.final_loss)},
                   {"best_loss", json_number(r.best_loss)},
                   {"best_val", json_number(r.best_val)},
                   {"tokens_per_sec", json_number(r.tokens_per_sec)},
                   {"duration_s", json_number(r.duration_s)},
                   {"config_hash", r.config_hash}});
  }
  return out.dump(2) + "\n";
}

std::string export_run(HistoryDb& db, const RunRecord& run, const std::string& format) {
  if (format == "csv") return export_csv(db, run);
  if (format == "jsonl") return export_jsonl(db, run);
  throw UserError(fmt::format("--format {} is not an export format: use csv or jsonl", format));
}

}  // namespace kiln
