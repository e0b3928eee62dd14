#include "core/config/set_override.h"

#include <algorithm>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/config/toml_text.h"
#include "core/util/text.h"

namespace kiln {

SetOverride read_set_override(const std::string& assignment) {
  SourceLoc at{"--set " + assignment, 0, 0};
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    fail_at(at, "expected section.key=value, e.g. --set optimizer.lr=3e-3");
  }
  const std::string path = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  auto parts = split(path, '.');
  if (parts.size() < 2 ||
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); })) {
    fail_at(at, fmt::format("'{}' is not a section.key path, e.g. train.steps", path));
  }
  std::optional<toml::table> parsed = try_parse_toml("v = " + text);
  if (!parsed) {
    // Not a TOML value: the text as a bare string.
    if (!is_valid_utf8(text)) {
      fail_at(at,
              "the value is not valid UTF-8 (configs are UTF-8 text): write the characters "
              "themselves, or \\uXXXX escapes in a quoted string");
    }
    parsed = toml::table{{"v", text}};
  }
  // data.sources.web.weight's key is sources.web.weight.
  return SetOverride{parts[0], path.substr(parts[0].size() + 1), at, std::move(*parsed)};
}

}  // namespace kiln
