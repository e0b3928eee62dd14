#include "core/config/params.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

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

ParamSpec ParamSpec::integer(std::string name, int64_t def, std::string doc) {
  return ParamSpec{std::move(name), ParamType::kInt, def, std::move(doc), {}, {}, {}, true};
}
ParamSpec ParamSpec::real(std::string name, double def, std::string doc) {
  return ParamSpec{std::move(name), ParamType::kFloat, def, std::move(doc), {}, {}, {}, true};
}
ParamSpec ParamSpec::flag(std::string name, bool def, std::string doc) {
  return ParamSpec{std::move(name), ParamType::kBool, def, std::move(doc), {}, {}, {}, true};
}
ParamSpec ParamSpec::text(std::string name, std::string def, std::string doc) {
  return ParamSpec{
      std::move(name), ParamType::kString, std::move(def), std::move(doc), {}, {}, {}, true};
}

ParamSpec&& ParamSpec::at_least(double bound) && {
  min = bound;
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
  if (min && max) return fmt::format("between {} and {}", *min, *max);
  if (min) return fmt::format(">= {}", *min);
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
    if ((min && number < *min) || (max && number > *max)) {
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
