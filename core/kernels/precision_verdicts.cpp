#include "core/kernels/precision_verdicts.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/kernels/kernel_cpuinfo.h"
#include "core/util/env.h"
#include "core/util/error.h"
#include "core/util/fs.h"

namespace kiln {
namespace {

// "format" in the file; a newer Kiln's file is refused, not misread. An older one is read as
// empty, and the next measurement replaces it: format 1 kept one verdict per CPU class, whatever
// model was timed (a tiny model's 0.83x was overruled by a wide one's 2.88x); format 2 keyed a
// workload by its thread count, which sweeps and launches divide, and without its adapter and
// parallel cut (core/train/precision_workload.h).
constexpr int kFormat = 3;

// Why a file of an older format holds nothing Kiln reads; "" for another format.
std::string outdated_format(const nlohmann::json& file) {
  if (!file.is_object()) return "";
  switch (file.value("format", 0)) {
    case 1: return "format 1 kept one verdict per CPU class, whatever was timed";
    case 2: return "format 2 keyed a workload by its thread count";
    default: return "";
  }
}

nlohmann::json parse_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json();
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

nlohmann::json empty_verdicts() {
  return {{"format", kFormat}, {"verdicts", nlohmann::json::object()}};
}

nlohmann::json read_verdicts(const std::string& path) {
  if (!std::filesystem::exists(path)) return empty_verdicts();
  const auto refuse = [&](const std::string& why) {
    return UserError(
        fmt::format("{}: {}; it only caches `kiln bench` measurements for precision "
                    "\"auto\": delete it and run `kiln bench EXPERIMENT --set "
                    "precision.type=auto` again",
                    path, why));
  };
  nlohmann::json file = parse_file(path);
  if (file.is_discarded()) throw refuse("not valid JSON");
  if (!outdated_format(file).empty()) return empty_verdicts();
  if (!file.is_object() || !file.contains("format") || file["format"] != kFormat ||
      !file.contains("verdicts") || !file["verdicts"].is_object()) {
    throw refuse(fmt::format("not a format-{} precision verdict file", kFormat));
  }
  for (const auto& [name, entry] : file["verdicts"].items()) {
    const bool valid = entry.is_object() && entry.contains("fp32_tokens_per_sec") &&
                       entry["fp32_tokens_per_sec"].is_number() &&
                       entry.contains("bf16_tokens_per_sec") &&
                       entry["bf16_tokens_per_sec"].is_number();
    if (!valid) throw refuse(fmt::format("the entry for '{}' lacks its two figures", name));
  }
  return file;
}

}  // namespace

std::string cpu_class(const CpuFeatures& cpu) {
  return cpu_display_name(cpu.model_name, cpu.kernel_model_name) + " | " + feature_summary(cpu);
}

std::string precision_verdicts_path() {
  if (const auto cache = env_text("XDG_CACHE_HOME"); cache && !cache->empty()) {
    return *cache + "/kiln/precision.json";
  }
  if (const auto home = env_text("HOME"); home && !home->empty()) {
    return *home + "/.cache/kiln/precision.json";
  }
  return "";
}

std::string precision_verdict_key(const std::string& cpu_class, const std::string& workload) {
  return cpu_class + " || " + workload;
}

std::string outdated_precision_verdicts() {
  const std::string path = precision_verdicts_path();
  if (path.empty()) return "";
  const std::string why = outdated_format(parse_file(path));
  return why.empty() ? "" : fmt::format("{} holds none Kiln reads ({})", path, why);
}

std::optional<PrecisionVerdict> find_precision_verdict(const std::string& key) {
  const std::string path = precision_verdicts_path();
  if (path.empty()) return std::nullopt;
  const nlohmann::json file = read_verdicts(path);
  const auto& verdicts = file["verdicts"];
  if (!verdicts.contains(key)) return std::nullopt;
  const auto& e = verdicts[key];
  PrecisionVerdict v;
  v.fp32_tokens_per_sec = e["fp32_tokens_per_sec"].get<double>();
  v.bf16_tokens_per_sec = e["bf16_tokens_per_sec"].get<double>();
  v.experiment = e.value("experiment", "");
  v.threads = e.value("threads", 0);
  v.measured_at = e.value("measured_at", "");
  return v;
}

void record_precision_verdict(const std::string& key, const PrecisionVerdict& verdict) {
  const std::string path = precision_verdicts_path();
  if (path.empty()) {
    throw UserError(
        "cannot keep the precision measurement: neither XDG_CACHE_HOME nor HOME is set");
  }
  nlohmann::json file = read_verdicts(path);
  file["verdicts"][key] = {{"fp32_tokens_per_sec", verdict.fp32_tokens_per_sec},
                           {"bf16_tokens_per_sec", verdict.bf16_tokens_per_sec},
                           {"experiment", verdict.experiment},
                           {"threads", verdict.threads},
                           {"measured_at", verdict.measured_at}};
  ensure_parent_dir(path);
  write_file_atomic(path, file.dump(2) + "\n");
}

}  // namespace kiln
