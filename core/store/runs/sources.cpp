#include "core/store/runs/sources.h"

#include "core/store/runs/lookup.h"

namespace kiln {

std::map<std::string, std::string> key_source_lines(const ResolvedConfig& config, bool all) {
  std::map<std::string, std::string> lines;
  auto add = [&](const std::string& key) {
    const KeySource source = config.source_of(key);
    if (all || source.kind != KeySource::Kind::kFile) lines[key] = source.str();
  };
  for (const auto& section : config.sections) {
    if (!section.type.empty()) add(section.name + ".type");
    for (const auto& entry : section.params.values())
      add(section.name + "." + entry.first);
  }
  return lines;
}

RunProvenance provenance_of(const ResolvedConfig& config) {
  return RunProvenance{config.sources(), key_source_lines(config, true), inputs_of(config)};
}

void write_provenance(Connection& db, int64_t run_id, const RunProvenance& provenance) {
  Statement file(db,
                 "INSERT OR REPLACE INTO run_files (run_id, position, path, sha256) "
                 "VALUES (?, ?, ?, ?)");
  for (size_t i = 0; i < provenance.files.size(); ++i) {
    file.bind(1, run_id).bind(2, static_cast<int64_t>(i)).bind(3, provenance.files[i].path);
    file.bind(4, provenance.files[i].sha256);
    file.step();
    file.reset();
  }
  Statement key(db,
                "INSERT OR REPLACE INTO run_key_sources (run_id, key, source) VALUES (?, ?, ?)");
  for (const auto& [name, source] : provenance.key_sources) {
    key.bind(1, run_id).bind(2, name).bind(3, source);
    key.step();
    key.reset();
  }
  write_inputs(db, run_id, provenance.inputs);
}

std::vector<ConfigFile> read_run_files(Connection& db, int64_t run_id) {
  if (!has_table(db, "run_files")) return {};
  Statement q(db, "SELECT path, sha256 FROM run_files WHERE run_id = ? ORDER BY position",
              {run_id});
  std::vector<ConfigFile> files;
  while (q.step())
    files.push_back({q.text(0), q.text(1)});
  return files;
}

std::map<std::string, std::string> read_key_sources(Connection& db, int64_t run_id) {
  if (!has_table(db, "run_key_sources")) return {};
  Statement q(db, "SELECT key, source FROM run_key_sources WHERE run_id = ?", {run_id});
  std::map<std::string, std::string> sources;
  while (q.step())
    sources[q.text(0)] = q.text(1);
  return sources;
}

}  // namespace kiln
