#include "core/app/presentation/provenance.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/app/presentation/run_tables.h"
#include "core/store/runs/inputs.h"
#include "core/store/runs/run_environment.h"
#include "core/store/runs/sources.h"

namespace kiln {

namespace {

// Each "key = value" of a section padded to the section's widest, then "# source".
std::string section_lines(const ResolvedConfig& config, const Section& section) {
  std::vector<std::pair<std::string, std::string>> lines;  // "key = value", source
  auto add = [&](const std::string& key, const ParamValue& value) {
    lines.emplace_back(key + " = " + format_value(value),
                       config.source_of(section.name + "." + key).str());
  };
  if (!section.type.empty()) add("type", section.type);
  for (const auto& [key, value] : section.params.values())
    add(key, value);
  size_t width = 0;
  for (const auto& line : lines)
    width = std::max(width, line.first.size());
  std::string out = "[" + section.name + "]\n";
  for (const auto& [assignment, source] : lines)
    out += fmt::format("{:<{}}  # {}\n", assignment, width, source);
  return out;
}

}  // namespace

std::string describe_config(const ResolvedConfig& config) {
  std::string out = fmt::format(
      "# {}: config hash {}\n# read from (in the order applied: a later file's keys win, and "
      "--set wins over all):\n",
      config.experiment, config.hash());
  size_t width = 0;
  for (const auto& file : config.sources())
    width = std::max(width, file.path.size());
  for (const auto& file : config.sources())
    out += fmt::format("#   {:<{}}  sha256 {}\n", file.path, width, file.sha256);
  out += "# after each key: where its value came from (file:line, --set, or a default)\n";
  for (const auto& section : config.sections) {
    out += '\n';
    out += section_lines(config, section);
  }
  return out;
}

Table run_files_table(HistoryDb& db, int64_t run_id) {
  Table t{{"path", "sha256"}, {}, {false, false}};
  for (const auto& file : read_run_files(db.connection(), run_id))
    t.rows.push_back({file.path, file.sha256});
  return t;
}

Table run_inputs_table(HistoryDb& db, int64_t run_id) {
  Table t{{"key", "given", "read from", "files", "bytes"}, {}, {false, false, false, true, true}};
  for (const RunInput& in : read_inputs(db.connection(), run_id)) {
    int64_t bytes = 0;
    for (const auto& file : in.files)
      bytes += file.size;
    t.rows.push_back(
        {in.key, in.given, in.resolved, std::to_string(in.files.size()), std::to_string(bytes)});
  }
  return t;
}

std::string diff_report(HistoryDb& db, const RunRecord& a, const RunRecord& b) {
  const auto differing = differing_config({a, b});
  const std::string environment = environment_differences(
      read_run_environment(db.connection(), a.id), read_run_environment(db.connection(), b.id));
  const std::string ran_with =
      environment.empty() ? "" : fmt::format("and they ran with {}\n", environment);
  if (differing.empty()) {
    return fmt::format("{} and {}: no config key differs besides run.name\n{}", a.name, b.name,
                       ran_with);
  }
  const auto sources_a = read_key_sources(db.connection(), a.id);
  const auto sources_b = read_key_sources(db.connection(), b.id);
  auto source = [](const std::map<std::string, std::string>& sources, const std::string& key) {
    auto it = sources.find(key);
    return it == sources.end() ? std::string("unknown") : it->second;
  };
  Table t{{"key", a.name, "from", b.name, "from"}, {}, {false, true, false, true, false}};
  for (const auto& [key, values] : differing)
    t.rows.push_back({key, values[0], source(sources_a, key), values[1], source(sources_b, key)});
  return fmt::format("{} and {}: {} config key{} differ{}\n", a.name, b.name, differing.size(),
                     differing.size() == 1 ? "" : "s", differing.size() == 1 ? "s" : "") +
         render_text_table(t) + ran_with;
}

}  // namespace kiln
