#include "core/api/kernel_choice.h"

namespace kiln {

std::vector<ParamSpec> with_kernel_choice(std::vector<ParamSpec> model_params) {
  model_params.push_back(ParamSpec::text("kernels", "fused",
                                         "fused (Kiln's own CPU kernels where they apply: GELU, "
                                         "layer and RMS norms, cross-entropy) or torch "
                                         "(LibTorch's ops only)")
                             .one_of({"fused", "torch"})
                             .unhashed());
  return model_params;
}

bool uses_fused_kernels(const Params& p) {
  return p.text("kernels") == "fused";
}

}  // namespace kiln
