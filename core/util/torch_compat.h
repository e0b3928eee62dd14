// The one place where LibTorch 1.13 (Debian, CPU) and LibTorch 2.x (PyTorch wheels, CUDA)
// differ for Kiln. Everything else calls these helpers instead of testing versions itself.
#pragma once

#include <cmath>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/optim/optimizer.h>
#include <torch/version.h>

#define KILN_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||       \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace kiln::compat {

// "2.6.0": the LibTorch this Kiln was compiled against, for messages.
inline std::string torch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

// AdamW's fused kernel (one launch for all parameters) came to CUDA in LibTorch 2.0 and to the
// CPU in 2.4.
// Float16 autocast on the CPU: LibTorch 1.13 has no kernels for it; 2.6 (the 2.x tried here)
// has. Slow, but it lets the fp16 policy's loss scaling run in the CPU tests.
constexpr bool cpu_autocast_has_fp16() {
  return KILN_TORCH_AT_LEAST(2, 6);
}

// LibTorch's fused AdamW kernel on CUDA (2.0+). On the CPU, Kiln uses its own on every version
// (core/api/fused_adamw.h).
inline bool has_cuda_fused_adamw() {
  return KILN_TORCH_AT_LEAST(2, 0);
}

// One AdamW step over lists of parameters with the fused kernel; `steps` are float32 scalars on
// the parameters' device holding each parameter's step count after this step. Call only where
// has_cuda_fused_adamw() holds.
inline void fused_adamw(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                        at::TensorList exp_avg_sqs, at::TensorList steps, double lr, double beta1,
                        double beta2, double weight_decay, double eps) {
#if KILN_TORCH_AT_LEAST(2, 0)
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr, beta1,
                    beta2, weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false);
#else
  (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs, (void)steps, (void)lr, (void)beta1,
      (void)beta2, (void)weight_decay, (void)eps;
  TORCH_CHECK(false, "fused AdamW needs LibTorch 2.0 or later");
#endif
}

// c10::Allocator::allocate lost its const in LibTorch 2.3, when copy_data joined the interface.
#if KILN_TORCH_AT_LEAST(2, 3)
#define KILN_ALLOCATE_CONST
#else
#define KILN_ALLOCATE_CONST const
#endif

// Causal self-attention over [batch, heads, time, head_dim] tensors by LibTorch's fused kernel,
// without dropout (Kiln's, core/api/dropout.h, needs the probabilities): LibTorch 2's
// scaled_dot_product_attention (flash / memory-efficient kernels on CUDA); nothing on 1.13,
// which has none, so the caller forms the probabilities itself. `visible` (bool, true where a
// query may see a key) replaces the causal mask: packed rows' block-diagonal one.
inline std::optional<at::Tensor> fused_causal_attention(const at::Tensor& q, const at::Tensor& k,
                                                        const at::Tensor& v,
                                                        const at::Tensor& visible = {}) {
#if TORCH_VERSION_MAJOR >= 2
  if (visible.defined()) return at::scaled_dot_product_attention(q, k, v, visible, 0.0, false);
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, 0.0, /*is_causal=*/true);
#else
  (void)q, (void)k, (void)v, (void)visible;
  return std::nullopt;
#endif
}

// TCPStore's server: LibTorch 2.4 made the libuv one the default, and Debian's LibTorch is built
// without it (joining then fails). The classic server is ample for the handful of ranks a Kiln
// run has. A template, so that this header need not include c10d's.
template <class TCPStoreOptions>
void use_classic_store_server(TCPStoreOptions& options) {
#if KILN_TORCH_AT_LEAST(2, 2)
  options.useLibUV = false;
#else
  (void)options;
#endif
}

// The key of a parameter's entry in Optimizer::state(): its TensorImpl's address, spelled as a
// string in LibTorch 1.x and as the pointer itself in 2.x. Deduced from the map's type, so no
// version number has to be guessed.
template <class Tensor = at::Tensor>  // a template, so that `if constexpr` drops the other branch
auto optimizer_state_key(const Tensor& parameter) {
  using Key =
      typename std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream address;  // as 1.x's c10::guts::to_string spelled it
    address << parameter.unsafeGetTensorImpl();
    return address.str();
  } else {
    return static_cast<Key>(parameter.unsafeGetTensorImpl());
  }
}

// Autocast for one device type while alive (on to `dtype`, or off when `on` is false),
// restoring what was there before. LibTorch 2.4 replaced the per-device functions
// (set_cpu_enabled, set_autocast_gpu_dtype, ...) with ones that take the device type.
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
#if KILN_TORCH_AT_LEAST(2, 4)
  static bool enabled(at::DeviceType d) {
    return at::autocast::is_autocast_enabled(d);
  }
  static at::ScalarType dtype_of(at::DeviceType d) {
    return at::autocast::get_autocast_dtype(d);
  }

 private:
  static void set(at::DeviceType d, bool on, at::ScalarType dtype) {
    at::autocast::set_autocast_dtype(d, dtype);
    at::autocast::set_autocast_enabled(d, on);
  }
#else
  static bool enabled(at::DeviceType d) {
    return d == at::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
  }
  static at::ScalarType dtype_of(at::DeviceType d) {
    return d == at::kCUDA ? at::autocast::get_autocast_gpu_dtype()
                          : at::autocast::get_autocast_cpu_dtype();
  }

 private:
  static void set(at::DeviceType d, bool on, at::ScalarType dtype) {
    if (d == at::kCUDA) {
      at::autocast::set_autocast_gpu_dtype(dtype);
      at::autocast::set_enabled(on);
    } else {
      at::autocast::set_autocast_cpu_dtype(dtype);
      at::autocast::set_cpu_enabled(on);
    }
  }
#endif

  at::DeviceType device_;
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

// `optimizer` with its param groups' options set to `options`, one per group in order, as they
// were given. LibTorch 2.14's Optimizer constructor merges each group's options with the
// optimizer's defaults, keeping a group's value only where it differs from a default-constructed
// one's (an AdamW group's weight_decay of 0.01, AdamWOptions' own default, became the defaults'
// 0), and gives a group of options of a type it does not know (Muon's) the defaults outright.
// Setting them again after construction keeps every group as given on 1.13, 2.6 and 2.14 alike.
template <class Options>
std::shared_ptr<torch::optim::Optimizer> with_group_options(
    std::shared_ptr<torch::optim::Optimizer> optimizer, const std::vector<Options>& options) {
  auto& groups = optimizer->param_groups();
  for (size_t i = 0; i < groups.size() && i < options.size(); ++i)
    groups[i].set_options(std::make_unique<Options>(options[i]));
  return optimizer;
}

}  // namespace kiln::compat
