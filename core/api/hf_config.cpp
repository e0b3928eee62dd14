#include "core/api/hf_config.h"

#include <map>
#include <utility>

#include <fmt/format.h>

#include "core/util/error.h"
#include "core/util/text.h"

namespace kiln {

using Json = nlohmann::json;

std::string shown(const Json& value) {
  if (!value.is_string()) return value.dump();
  std::string quoted = "'";  // appended: GCC 12 misreads "'" + string as an overlapping copy
  return quoted.append(value.get<std::string>()).append("'");
}

HfConfig::HfConfig(Json config, std::string path)
    : config_(std::move(config)), as_read_(config_), path_(std::move(path)) {}

const Json* HfConfig::present(const std::string& key) const {
  const auto it = config_.find(key);
  return it == config_.end() || it->is_null() ? nullptr : &*it;
}

Json HfConfig::raw(const std::string& key) const {
  const Json* value = present(key);
  return value ? *value : Json();
}

int64_t HfConfig::size(const std::string& key) {
  const Json* value = present(key);
  if (!value) {
    throw UserError(
        fmt::format("{} has no \"{}\": the model needs it; save the config with "
                    "transformers' save_pretrained",
                    path_, key));
  }
  return size_or(key, 0);
}

namespace {

// The field `key` of `value` (null: absent) as a T, or `hf_default`; a UserError naming the file
// when it is of another kind (`kind`: "a whole number", "a number", ...).
template <typename T>
T typed(const Json* value, const std::string& key, T hf_default, bool (Json::*is_kind)() const,
        const char* kind, const std::string& path) {
  if (value && !(value->*is_kind)()) {
    throw UserError(
        fmt::format("{}: \"{}\" is {}, not {}: fix the file", path, key, value->dump(), kind));
  }
  return value ? value->get<T>() : hf_default;
}

}  // namespace

int64_t HfConfig::size_or(const std::string& key, int64_t hf_default) {
  const int64_t out =
      typed(present(key), key, hf_default, &Json::is_number_integer, "a whole number", path_);
  as_read_[key] = out;
  return out;
}

double HfConfig::real(const std::string& key, double hf_default) {
  const double out = typed(present(key), key, hf_default, &Json::is_number, "a number", path_);
  as_read_[key] = out;
  return out;
}

bool HfConfig::flag(const std::string& key, bool hf_default) {
  const bool out = typed(present(key), key, hf_default, &Json::is_boolean, "true or false", path_);
  as_read_[key] = out;
  return out;
}

std::string HfConfig::text(const std::string& key, const std::string& hf_default) {
  std::string out = typed(present(key), key, hf_default, &Json::is_string, "a string", path_);
  as_read_[key] = out;
  return out;
}

void HfConfig::unsupported(const std::string& what, const std::string& why) const {
  throw UserError(fmt::format("{}: {} is not supported: {}", path_, what, why));
}

void HfConfig::require(const std::string& key, const Json& hf_default, const Json& expected,
                       const std::string& why) {
  const Json* value = present(key);
  const Json given = value ? *value : hf_default;
  if (given != expected) unsupported(key + " " + shown(given), why);
  as_read_[key] = given;
}

void HfConfig::read_as(const std::string& key, Json value,
                       const std::vector<std::string>& spelt_as) {
  for (const std::string& other : spelt_as)
    as_read_.erase(other);
  as_read_[key] = std::move(value);
}

namespace {

std::map<std::string, HfConfigReader>& readers() {
  static std::map<std::string, HfConfigReader> all;
  return all;
}

}  // namespace

bool add_hf_config_reader(const std::string& model_type, HfConfigReader reader) {
  readers()[model_type] = std::move(reader);
  return true;
}

bool has_hf_config_reader(const std::string& model_type) {
  return readers().count(model_type) > 0;
}

ReadHfConfig read_hf_config(const Json& config, const std::string& path) {
  const auto type = config.find("model_type");
  const std::string name =
      type != config.end() && type->is_string() ? type->get<std::string>() : std::string();
  const auto reader = readers().find(name);
  if (reader == readers().end()) {
    std::vector<std::string> known;
    for (const auto& entry : readers())
      known.push_back(entry.first);
    throw UserError(
        fmt::format("{}: model_type {} has no Kiln model: Kiln reads config.json of model_type {}",
                    path, type != config.end() ? type->dump() : "absent", join(known, ", ")));
  }
  HfConfig read(config, path);
  std::string section = reader->second(read);
  return {std::move(section), read.as_read()};
}

}  // namespace kiln
