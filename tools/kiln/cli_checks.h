// Option checks the kiln commands share. CLI11's NonNegativeNumber / PositiveNumber name the whole
// double range in their message; these say what the option takes.
#pragma once

#include <exception>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

namespace kiln {

// A whole number of at least `bound`.
inline CLI::Validator at_least(long long bound) {
  return CLI::Validator(
      [bound](std::string& text) -> std::string {
        try {
          size_t used = 0;
          const long long value = std::stoll(text, &used);
          if (used == text.size() && value >= bound) return "";
        } catch (const std::exception&) {
        }
        return fmt::format("{} is not a whole number >= {}", text, bound);
      },
      fmt::format("INT >= {}", bound));
}

}  // namespace kiln
