#include "core/util/env.h"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

std::optional<std::string> env_text(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::optional<int64_t> parse_integer(const std::string& text, int64_t min, int64_t max) {
  const size_t sign = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
  if (text.size() == sign || text.find_first_not_of("0123456789", sign) != std::string::npos) {
    return std::nullopt;
  }
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0' || value < min || value > max) return std::nullopt;
  return static_cast<int64_t>(value);
}

int64_t env_integer(const char* name, int64_t fallback, int64_t min, int64_t max) {
  const std::optional<std::string> text = env_text(name);
  if (!text) return fallback;
  if (const std::optional<int64_t> value = parse_integer(*text, min, max)) return *value;
  throw UserError(
      fmt::format("environment variable {}='{}' is not a whole number from {} to {}: set it to "
                  "one, or unset it",
                  name, *text, min, max));
}

}  // namespace kiln
