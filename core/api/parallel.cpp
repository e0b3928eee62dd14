#include "core/api/parallel.h"

#include <map>
#include <unordered_map>

#include <torch/optim/optimizer.h>

#include "core/api/model.h"
#include "core/api/optimizer.h"

namespace kiln {

namespace {

std::map<std::string, WorldShapeRule>& world_shape_rules() {
  static std::map<std::string, WorldShapeRule> rules;
  return rules;
}

StateSlice whole_slice(std::string tensor, const at::Tensor& parameter, const at::Tensor& local,
                       bool writes) {
  return {std::move(tensor),
          parameter,
          local.sizes().vec(),
          std::vector<int64_t>(static_cast<size_t>(local.dim()), 0),
          local,
          writes};
}

}  // namespace

std::vector<StateSlice> whole_state_slices(Model& model, torch::optim::Optimizer* optimizer,
                                           bool writes) {
  std::vector<StateSlice> out;
  std::unordered_map<const void*, std::string> names;  // a tied weight is listed once
  for (const auto& item : model.named_parameters()) {
    const at::Tensor& p = item.value();
    if (!names.emplace(p.unsafeGetTensorImpl(), item.key()).second) continue;
    out.push_back(whole_slice("model/" + item.key(), p, p.detach(), writes));
  }
  for (const auto& item : model.named_buffers()) {
    out.push_back(whole_slice("model/" + item.key(), {}, item.value(), writes));
  }
  if (!optimizer) return out;
  for (auto& group : optimizer->param_groups()) {
    for (const auto& p : group.params()) {
      const auto name = names.find(p.unsafeGetTensorImpl());
      if (name == names.end()) continue;
      const std::vector<at::Tensor*> state = parameter_state(*optimizer, p);
      for (size_t i = 0; i < state.size(); ++i) {
        out.push_back(whole_slice("optimizer/" + name->second + "/" + std::to_string(i), p,
                                  *state[i], writes));
      }
    }
  }
  return out;
}

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
