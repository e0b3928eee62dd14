#include "core/config/params.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/config/canonical.h"
#include "core/util/fs.h"

namespace kiln {

const char* type_name(ParamType type) {
  switch (type) {
    case ParamType::kInt: return "int";
    case ParamType::kFloat: return "float";
    case ParamType::kBool: return "bool";
    case ParamType::kString: return "string";
  }
  return "?";
}

namespace {

// A plain key: the struct's defaults for everything else (hashed, no bounds, no choices).
ParamSpec plain_key(std::string name, ParamType type, ParamValue def, std::string doc) {
  ParamSpec spec;
  spec.name = std::move(name);
  spec.type = type;
  spec.default_value = std::move(def);
  spec.doc = std::move(doc);
  return spec;
}

}  // namespace

ParamSpec ParamSpec::integer(std::string name, int64_t def, std::string doc) {
  return plain_key(std::move(name), ParamType::kInt, def, std::move(doc));
}
ParamSpec ParamSpec::real(std::string name, double def, std::string doc) {
  return plain_key(std::move(name), ParamType::kFloat, def, std::move(doc));
}
ParamSpec ParamSpec::flag(std::string name, bool def, std::string doc) {
  return plain_key(std::move(name), ParamType::kBool, def, std::move(doc));
}
ParamSpec ParamSpec::text(std::string name, std::string def, std::string doc) {
  return plain_key(std::move(name), ParamType::kString, std::move(def), std::move(doc));
}

ParamSpec ParamSpec::family(std::string name, std::string doc, std::vector<ParamSpec> fields) {
  ParamSpec spec = text(std::move(name), "", std::move(doc));
  spec.fields = std::move(fields);
  return spec;
}

const ParamSpec* find_param(const std::vector<ParamSpec>& specs, const std::string& key) {
  const size_t dot = key.find('.');
  for (const auto& p : specs) {
    if (dot == std::string::npos) {
      if (p.name == key && !p.is_family()) return &p;
      continue;
    }
    if (!p.is_family() || key.compare(0, dot, p.name) != 0) continue;
    const size_t second = key.find('.', dot + 1);
    if (second == std::string::npos || second == dot + 1) return nullptr;
    const std::string field = key.substr(second + 1);
    for (const auto& f : p.fields) {
      if (f.name == field) return &f;
    }
    return nullptr;
  }
  return nullptr;
}

std::optional<std::string> entry_name_problem(const std::string& key) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::string name = key.substr(dot + 1, key.find('.', dot + 1) - dot - 1);
  const bool fits = !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-';
  });
  if (fits) return std::nullopt;
  return fmt::format("'{}' cannot name an entry of '{}': use letters, digits, '_' and '-'", name,
                     key.substr(0, dot));
}

std::optional<std::string> family_key_problem(const std::vector<ParamSpec>& specs,
                                              const std::string& section, const std::string& key) {
  for (const auto& p : specs) {
    if (!p.is_family() || key.compare(0, p.name.size(), p.name) != 0 ||
        (key.size() > p.name.size() && key[p.name.size()] != '.')) {
      continue;
    }
    std::vector<std::string> fields;
    for (const auto& f : p.fields)
      fields.push_back(f.name);
    if (std::count(key.begin(), key.end(), '.') == 2) {
      return fmt::format("unknown key '{}.{}': an entry of {}.{} takes: {}", section, key, section,
                         p.name, fmt::join(fields, ", "));
    }
    return fmt::format(
        "'{}.{}' is not a key: {}.{} holds named tables, one per entry: write "
        "[{}.{}.NAME] with its keys ({}), or --set {}.{}.NAME.KEY=VALUE",
        section, key, section, p.name, section, p.name, fmt::join(fields, ", "), section, p.name);
  }
  return std::nullopt;
}

std::vector<std::string> missing_keys(const ParamSpec& spec, const Params& params) {
  if (!spec.is_family()) {
    if (params.has(spec.name)) return {};
    return {spec.name};
  }
  std::vector<std::string> missing;
  for (const std::string& entry : params.entries(spec.name)) {
    for (const auto& field : spec.fields) {
      const std::string key = spec.name + "." + entry + "." + field.name;
      if (!params.has(key)) missing.push_back(key);
    }
  }
  return missing;
}

std::vector<std::string> Params::entries(const std::string& family) const {
  std::vector<std::string> names;
  const std::string prefix = family + ".";
  for (auto it = values_.lower_bound(prefix);
       it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    const size_t end = it->first.find('.', prefix.size());
    std::string name = it->first.substr(prefix.size(), end - prefix.size());
    if (names.empty() || names.back() != name) names.push_back(std::move(name));
  }
  return names;
}

ParamSpec&& ParamSpec::at_least(double bound) && {
  min = bound;
  return std::move(*this);
}
ParamSpec&& ParamSpec::above(double bound) && {
  min = bound;
  min_exclusive = true;
  return std::move(*this);
}
ParamSpec&& ParamSpec::at_most(double bound) && {
  max = bound;
  return std::move(*this);
}
ParamSpec&& ParamSpec::one_of(std::vector<std::string> allowed) && {
  choices = std::move(allowed);
  return std::move(*this);
}
ParamSpec&& ParamSpec::added_later() && {
  hashed_when_set = true;
  return std::move(*this);
}

ParamSpec&& ParamSpec::unhashed() && {
  hashed = false;
  return std::move(*this);
}

ParamSpec&& ParamSpec::files() && {
  names_files = true;
  return std::move(*this);
}

ParamSpec&& ParamSpec::list() && {
  takes_list = true;
  return std::move(*this);
}

namespace {

// A choice "NAME:N" stands for NAME, a colon and a number of 1 to 4 digits (cuda:0, cuda:12).
bool matches_numbered_choice(const std::string& choice, const std::string& value) {
  if (choice.size() < 2 || choice.compare(choice.size() - 2, 2, ":N") != 0) return false;
  const size_t prefix = choice.size() - 1;  // NAME and the colon
  if (value.size() <= prefix || value.size() > prefix + 4) return false;
  if (value.compare(0, prefix, choice, 0, prefix) != 0) return false;
  return std::all_of(value.begin() + static_cast<std::ptrdiff_t>(prefix), value.end(),
                     [](unsigned char c) { return std::isdigit(c) != 0; });
}

}  // namespace

std::string ParamSpec::describe_range() const {
  if (!choices.empty()) {
    std::string s = "one of ";
    for (size_t i = 0; i < choices.size(); ++i)
      s += (i ? ", " : "") + quote_toml(choices[i]);
    return s;
  }
  const char* above = min_exclusive ? ">" : ">=";
  if (min && max) {
    if (min_exclusive) return fmt::format("> {} and <= {}", *min, *max);
    return fmt::format("between {} and {}", *min, *max);
  }
  if (min) return fmt::format("{} {}", above, *min);
  if (max) return fmt::format("<= {}", *max);
  return "any value";
}

std::optional<std::string> ParamSpec::check(const ParamValue& value) const {
  double number = 0;
  if (auto* i = std::get_if<int64_t>(&value)) number = static_cast<double>(*i);
  if (auto* d = std::get_if<double>(&value)) {
    if (!std::isfinite(*d)) return std::string("must be a finite number");
    number = *d;
  }
  if (type == ParamType::kInt || type == ParamType::kFloat) {
    const bool below = min && (min_exclusive ? number <= *min : number < *min);
    if (below || (max && number > *max)) {
      return fmt::format("is {}, out of range: must be {}", format_value(value), describe_range());
    }
  }
  if (auto* s = std::get_if<std::string>(&value); s && !choices.empty()) {
    for (const auto& c : choices) {
      if (c == *s || matches_numbered_choice(c, *s)) return std::nullopt;
    }
    return fmt::format("is {}, must be {}", quote_toml(*s), describe_range());
  }
  return std::nullopt;
}

namespace {
template <class T>
const T& typed(const std::map<std::string, ParamValue>& values, const std::string& key,
               const char* want) {
  auto it = values.find(key);
  if (it == values.end()) throw std::logic_error("parameter '" + key + "' was never declared");
  if (auto* v = std::get_if<T>(&it->second)) return *v;
  throw std::logic_error(fmt::format("parameter '{}' is not {}", key, want));
}
}  // namespace

int64_t Params::integer(const std::string& key) const {
  return typed<int64_t>(values_, key, "an int");
}
double Params::real(const std::string& key) const {
  return typed<double>(values_, key, "a float");
}
bool Params::flag(const std::string& key) const {
  return typed<bool>(values_, key, "a bool");
}
const std::string& Params::text(const std::string& key) const {
  return typed<std::string>(values_, key, "a string");
}
std::string Params::path(const std::string& key) const {
  const auto resolved = resolved_paths_.find(key);
  return resolved != resolved_paths_.end() ? resolved->second : absolute_path(text(key));
}

const ParamValue& Params::value(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw std::logic_error("parameter '" + key + "' was never declared");
  return it->second;
}

}  // namespace kiln
