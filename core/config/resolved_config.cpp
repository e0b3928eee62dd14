#include "core/config/resolved_config.h"

#include <stdexcept>

namespace kiln {

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

}  // namespace kiln
