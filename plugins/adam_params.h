// The parameters optimizers "adam" and "adamw" declare alike: lr, the decays of the two moment
// averages, eps and weight_decay, in that order, each plugin with its own defaults and its own
// weight decay (an L2 term in the gradient for adam, decoupled for adamw). schedule_free_adamw
// names the same keys but bounds and means its betas otherwise (beta1 interpolates between two
// points), so it declares its own.
#pragma once

#include <string>
#include <vector>

#include "core/config/params.h"

namespace kiln {

struct AdamDefaults {
  double lr = 0;
  double beta2 = 0;
  double weight_decay = 0;
  std::string weight_decay_is;  // what weight_decay does, as `kiln plugins` says it
};

std::vector<ParamSpec> adam_params(const AdamDefaults& defaults);

}  // namespace kiln
