// The one place where the LibTorch versions Kiln builds against differ for it: PyPI's torch 2.15
// (the default build, tools/requirements/torch.txt) and the older wheels GPU machines carry (2.11
// and on). Everything else calls these helpers instead of testing versions itself.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/optim/optimizer.h>
#include <torch/version.h>

namespace kiln::compat {

// "2.6.0": the LibTorch this Kiln was compiled against, for messages.
inline std::string torch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

// One AdamW step over lists of parameters with LibTorch's fused kernel (CUDA; on the CPU Kiln
// uses its own, core/kernels/fused_adamw.h); `steps` are float32 scalars on the parameters' device
// holding each parameter's step count after this step.
inline void fused_adamw(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                        at::TensorList exp_avg_sqs, at::TensorList steps, double lr, double beta1,
                        double beta2, double weight_decay, double eps) {
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr, beta1,
                    beta2, weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false);
}

// TCPStore's server: the classic one, ample for the handful of ranks a Kiln run has, rather than
// the libuv one LibTorch 2.4 made the default, which a LibTorch built without libuv lacks. A
// template, so that this header need not include c10d's.
template <class TCPStoreOptions>
void use_classic_store_server(TCPStoreOptions& options) {
  options.useLibUV = false;
}

// The key of a parameter's entry in Optimizer::state(): its TensorImpl's address.
inline auto optimizer_state_key(const at::Tensor& parameter) {
  using Key =
      typename std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;
  return static_cast<Key>(parameter.unsafeGetTensorImpl());
}

// Autocast for one device type while alive (on to `dtype`, or off when `on` is false),
// restoring what was there before.
class AutocastGuard {
 public:
  AutocastGuard(at::DeviceType device, at::ScalarType dtype, bool on = true)
      : device_(device), was_enabled_(enabled(device)), was_dtype_(dtype_of(device)) {
    set(device, on, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    // The cast cache lives as long as the outermost autocast region, as in torch.autocast.
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set(device_, was_enabled_, was_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

  // What autocast is now for `d`: whether it is on, and the type it casts to.
  static bool enabled(at::DeviceType d) { return at::autocast::is_autocast_enabled(d); }
  static at::ScalarType dtype_of(at::DeviceType d) { return at::autocast::get_autocast_dtype(d); }

 private:
  static void set(at::DeviceType d, bool on, at::ScalarType dtype) {
    at::autocast::set_autocast_dtype(d, dtype);
    at::autocast::set_autocast_enabled(d, on);
  }

  at::DeviceType device_;
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

// `optimizer` with its param groups' options set to `options`, one per group in order, as they
// were given. LibTorch 2.14's Optimizer constructor merges each group's options with the
// optimizer's defaults, keeping a group's value only where it differs from a default-constructed
// one's (an AdamW group's weight_decay of 0.01, AdamWOptions' own default, became the defaults'
// 0), and gives a group of options of a type it does not know (Muon's) the defaults outright.
// Setting them again after construction keeps every group as given.
template <class Options>
std::shared_ptr<torch::optim::Optimizer> with_group_options(
    std::shared_ptr<torch::optim::Optimizer> optimizer, const std::vector<Options>& options) {
  auto& groups = optimizer->param_groups();
  for (size_t i = 0; i < groups.size() && i < options.size(); ++i)
    groups[i].set_options(std::make_unique<Options>(options[i]));
  return optimizer;
}

}  // namespace kiln::compat
