#include "plugins/adam_params.h"

namespace kiln {

std::vector<ParamSpec> adam_params(const AdamDefaults& defaults) {
  return {
      ParamSpec::real("lr", defaults.lr, "peak learning rate (the schedule's base)").at_least(0),
      ParamSpec::real("beta1", 0.9, "decay of the first-moment average")
          .at_least(0)
          .at_most(0.999999),
      ParamSpec::real("beta2", defaults.beta2, "decay of the second-moment average")
          .at_least(0)
          .at_most(0.999999),
      ParamSpec::real("eps", 1e-8, "added to the denominator for stability").at_least(0),
      ParamSpec::real("weight_decay", defaults.weight_decay, defaults.weight_decay_is).at_least(0)};
}

}  // namespace kiln
