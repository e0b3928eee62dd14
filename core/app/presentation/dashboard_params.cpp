#include "core/app/presentation/dashboard_params.h"

#include <charconv>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

std::string param(const DashboardParams& params, const std::string& key,
                  const std::string& fallback) {
  auto it = params.find(key);
  return it == params.end() || it->second.empty() ? fallback : it->second;
}

int64_t parse_whole(const std::string& key, const std::string& text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [stop, failure] = std::from_chars(text.data(), end, value);
  if (failure != std::errc() || stop != end || value < 0) {
    throw UserError(fmt::format("{}={} is not a whole number >= 0", key, text));
  }
  return value;
}

int64_t whole_param(const DashboardParams& params, const std::string& key, int64_t fallback) {
  const std::string text = param(params, key);
  return text.empty() ? fallback : parse_whole(key, text);
}

int64_t required_id(const DashboardParams& params, const std::string& key) {
  const std::string text = param(params, key);
  if (text.empty())
    throw UserError(fmt::format("{}= is missing: pass a run id, as in {}=1", key, key));
  return parse_whole(key, text);
}

std::vector<std::string> list_param(const DashboardParams& params, const std::string& key) {
  std::vector<std::string> items;
  for (const auto& item : split(param(params, key), ','))
    if (!item.empty()) items.push_back(item);
  return items;
}

}  // namespace kiln
