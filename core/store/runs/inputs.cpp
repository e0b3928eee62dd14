#include "core/store/runs/inputs.h"

#include <map>

#include <fmt/format.h>

#include "core/store/runs/lookup.h"

namespace kiln {

std::vector<RunInput> inputs_of(const ResolvedConfig& config) {
  std::vector<RunInput> inputs;
  for (const auto& section : config.sections) {
    for (const auto& [key, value] : section.params.values()) {
      const ParamSpec* spec = declared_param(section.name, section.type, key);
      if (!spec || !spec->names_files || section.params.text(key).empty()) continue;
      const std::string resolved = section.params.path(key);
      inputs.push_back({section.name + "." + key, section.params.text(key), resolved,
                        fingerprint_files(resolved)});
    }
  }
  return inputs;
}

void write_inputs(Connection& db, int64_t run_id, const std::vector<RunInput>& inputs) {
  Statement input(db,
                  "INSERT OR REPLACE INTO run_inputs (run_id, key, given, resolved) "
                  "VALUES (?, ?, ?, ?)");
  Statement forget(db, "DELETE FROM run_input_files WHERE run_id = ? AND key = ?");
  Statement file(db,
                 "INSERT INTO run_input_files (run_id, key, position, path, size, checksum) "
                 "VALUES (?, ?, ?, ?, ?, ?)");
  for (const RunInput& in : inputs) {
    input.bind(1, run_id).bind(2, in.key).bind(3, in.given).bind(4, in.resolved);
    input.step();
    input.reset();
    forget.bind(1, run_id).bind(2, in.key);
    forget.step();
    forget.reset();
    for (size_t i = 0; i < in.files.size(); ++i) {
      const FileFingerprint& f = in.files[i];
      file.bind(1, run_id).bind(2, in.key).bind(3, static_cast<int64_t>(i)).bind(4, f.path);
      file.bind(5, f.size).bind(6, f.checksum);
      file.step();
      file.reset();
    }
  }
}

std::vector<RunInput> read_inputs(Connection& db, int64_t run_id) {
  if (!has_table(db, "run_inputs")) return {};
  std::vector<RunInput> inputs;
  std::map<std::string, size_t> at;
  Statement q(db, "SELECT key, given, resolved FROM run_inputs WHERE run_id = ? ORDER BY key",
              {run_id});
  while (q.step()) {
    at[q.text(0)] = inputs.size();
    inputs.push_back({q.text(0), q.text(1), q.text(2), {}});
  }
  Statement files(db,
                  "SELECT key, path, size, checksum FROM run_input_files WHERE run_id = ? "
                  "ORDER BY key, position",
                  {run_id});
  while (files.step()) {
    const auto input = at.find(files.text(0));
    if (input == at.end()) continue;
    inputs[input->second].files.push_back({files.text(1), files.integer(2), files.text(3)});
  }
  return inputs;
}

void use_recorded_inputs(ResolvedConfig& config, const std::vector<RunInput>& recorded) {
  for (const RunInput& in : recorded) {
    const auto dot = in.key.find('.');
    for (auto& section : config.sections) {
      if (section.name != in.key.substr(0, dot)) continue;
      const std::string key = in.key.substr(dot + 1);
      if (section.params.has(key) && section.params.text(key) == in.given) {
        section.params.resolve_path(key, in.resolved);
      }
    }
  }
}

std::vector<std::string> changed_inputs(const std::vector<RunInput>& recorded,
                                        const std::vector<RunInput>& now) {
  std::map<std::string, const RunInput*> current;
  for (const RunInput& in : now)
    current[in.key] = &in;
  std::vector<std::string> lines;
  for (const RunInput& in : recorded) {
    const auto found = current.find(in.key);
    const std::vector<FileFingerprint> none;
    const auto& files = found == current.end() ? none : found->second->files;
    std::string difference = fingerprint_difference(in.files, files);
    if (difference.empty()) continue;
    if (files.empty()) difference = "no file matches it now";
    lines.push_back(fmt::format("{} ({}): {}", in.key, in.resolved, difference));
  }
  return lines;
}

}  // namespace kiln
