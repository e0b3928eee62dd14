#include "core/config/config.h"

#include <stdexcept>

#include <fmt/format.h>

namespace kiln {

std::string SourceLoc::str() const {
  if (line <= 0) return file;
  return fmt::format("{}:{}:{}", file, line, column);
}

const Section& ResolvedConfig::section(const std::string& name) const {
  for (const auto& s : sections) {
    if (s.name == name) return s;
  }
  throw std::logic_error("config has no section '" + name + "'");
}

KeySource ResolvedConfig::source_of(const std::string& key_path) const {
  auto it = key_sources_.find(key_path);
  return it != key_sources_.end() ? it->second : KeySource{};
}

SourceLoc ResolvedConfig::where(const std::string& key_path) const {
  const KeySource source = source_of(key_path);
  if (source.kind != KeySource::Kind::kDefault) return source.at;
  return SourceLoc{experiment + " (default of " + key_path + ")", 0, 0};
}

std::string KeySource::str() const {
  switch (kind) {
    case Kind::kFile: return fmt::format("{}:{}", at.file, at.line);
    case Kind::kSet: return "--set";
    case Kind::kDefault: break;
  }
  return plugin.empty() ? "default" : "default (plugin " + plugin + ")";
}

}  // namespace kiln
