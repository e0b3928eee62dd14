#include "core/api/parallel.h"

#include <map>

namespace kiln {

namespace {

std::map<std::string, WorldShapeRule>& world_shape_rules() {
  static std::map<std::string, WorldShapeRule> rules;
  return rules;
}

}  // namespace

bool add_world_shape_rule(const std::string& type, WorldShapeRule rule) {
  world_shape_rules()[type] = std::move(rule);
  return true;
}

WorldShape world_shape(const std::string& type, const Params& params, int world) {
  const auto rule = world_shape_rules().find(type);
  if (rule == world_shape_rules().end()) return WorldShape{world, 0};
  return rule->second(params, world);
}

}  // namespace kiln
