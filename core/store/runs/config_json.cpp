#include "core/store/runs/config_json.h"

#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/config/toml_text.h"

namespace kiln {

namespace {

nlohmann::json json_of(const toml::node& node) {
  if (const auto* table = node.as_table()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, value] : *table)
      out[std::string(key.str())] = json_of(value);
    return out;
  }
  if (const auto* array = node.as_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& value : *array)
      out.push_back(json_of(value));
    return out;
  }
  if (const auto* integer = node.as_integer()) return integer->get();
  if (const auto* real = node.as_floating_point()) {
    return std::isfinite(real->get()) ? nlohmann::json(real->get()) : nlohmann::json();
  }
  if (const auto* boolean = node.as_boolean()) return boolean->get();
  if (const auto* text = node.as_string()) return text->get();
  std::ostringstream date;  // a date, time or date-time: as TOML writes it
  node.visit([&](const auto& value) { date << value; });
  return date.str();
}

}  // namespace

std::string config_json(const std::string& config_toml) {
  const auto table = try_parse_toml(config_toml);
  return table ? json_of(*table).dump() : "{}";
}

}  // namespace kiln
