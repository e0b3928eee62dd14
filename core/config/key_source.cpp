#include "core/config/key_source.h"

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

std::string SourceLoc::str() const {
  if (line <= 0) return file;
  return fmt::format("{}:{}:{}", file, line, column);
}

void fail_at(const SourceLoc& at, const std::string& what) {
  throw UserError(at.str() + ": " + what);
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
