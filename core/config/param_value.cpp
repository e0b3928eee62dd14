#include "core/config/param_value.h"

#include <sstream>

#include <fmt/format.h>

namespace kiln {
namespace {

std::string describe(const toml::node& node) {
  std::ostringstream s;
  if (node.is_table()) return "a table";
  if (node.is_array()) return "an array";
  s << node.type() << " ";
  node.visit([&](auto&& v) {
    if constexpr (toml::is_value<decltype(v)>) s << v;
  });
  return s.str();
}

// An array of names as the comma-separated string the key holds: ["q_proj", "v_proj"] is
// "q_proj,v_proj". A name that is not a string, or holds a comma, could not be told apart.
std::string joined_names(const toml::array& names, const SourceLoc& at, const std::string& path) {
  std::string joined;
  for (const toml::node& name : names) {
    const auto* text = name.as_string();
    if (!text || text->get().find(',') != std::string::npos) {
      fail_at(at, fmt::format("'{}' takes an array of names without commas, and one is {}: write "
                              "each name as a string, [\"q_proj\", \"v_proj\"]",
                              path, describe(name)));
    }
    joined += (joined.empty() ? "" : ",") + text->get();
  }
  return joined;
}

}  // namespace

ParamValue param_value(const ParamSpec& spec, const toml::node& node, const SourceLoc& at,
                       const std::string& path) {
  const std::string what =
      spec.takes_list ? "a string or an array of strings" : type_name(spec.type);
  auto wrong = [&]() {
    fail_at(at, fmt::format("'{}' must be {} ({}), got {}", path, what, spec.doc, describe(node)));
  };
  ParamValue value;
  switch (spec.type) {
    case ParamType::kInt:
      if (!node.is_integer()) wrong();
      value = node.as_integer()->get();
      break;
    case ParamType::kFloat:
      if (node.is_integer()) {
        value = static_cast<double>(node.as_integer()->get());
      } else if (node.is_floating_point()) {
        value = node.as_floating_point()->get();
      } else {
        wrong();
      }
      break;
    case ParamType::kBool:
      if (!node.is_boolean()) wrong();
      value = node.as_boolean()->get();
      break;
    case ParamType::kString:
      if (spec.takes_list && node.is_array()) {
        value = joined_names(*node.as_array(), at, path);
      } else if (node.is_string()) {
        value = node.as_string()->get();
      } else {
        wrong();
      }
      break;
  }
  if (auto problem = spec.check(value)) fail_at(at, "'" + path + "' " + *problem);
  return value;
}

}  // namespace kiln
