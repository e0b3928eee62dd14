// precision "bf16": the forward pass and the loss under autocast to bfloat16 (matmuls and
// convolutions in bf16, reductions and norms kept in fp32 by autocast's op lists), with fp32
// weights, gradients and optimizer state. bf16 has fp32's exponent range, so no loss scaling.
// Works on CUDA and on the CPU.
#include "core/precision.h"
#include "core/torch_compat.h"

namespace kiln {
namespace {

class Bf16 : public PrecisionPolicy {
 public:
  explicit Bf16(c10::DeviceType device) : device_(device) {}

  std::unique_ptr<Scope> forward_scope() override {
    struct Autocast : Scope {
      explicit Autocast(c10::DeviceType d) : guard(d, at::kBFloat16) {}
      compat::AutocastGuard guard;
    };
    return std::make_unique<Autocast>(device_);
  }

 private:
  c10::DeviceType device_;
};

const bool registered = PrecisionRegistry::add(
    {"bf16", "autocast to bfloat16 for forward and loss; fp32 weights, gradients, optimizer", {}},
    [](const Params&, c10::DeviceType device) { return std::make_shared<Bf16>(device); });

}  // namespace
}  // namespace kiln
