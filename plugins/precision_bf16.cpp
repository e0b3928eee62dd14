// precision "bf16": the forward pass and the loss under autocast to bfloat16 (matmuls and
// convolutions in bf16, reductions and norms kept in fp32 by autocast's op lists), with fp32
// weights, gradients and optimizer state. bf16 has fp32's exponent range, so no loss scaling.
// Works on CUDA and on the CPU, where LibTorch runs autocast's bf16 products on oneDNN (on AMX's
// tiles where the CPU has them: core/kernels/cpu_runtime.h).
#include "core/api/precision.h"
#include "core/util/torch_compat.h"

namespace kiln {
namespace {

class Bf16 : public PrecisionPolicy {
 public:
  explicit Bf16(c10::DeviceType device) : device_(device) {}

  std::unique_ptr<Scope> forward_scope() override {
    struct Autocast : Scope {
      Autocast(c10::DeviceType d, at::ScalarType dtype) : guard(d, dtype) {}
      compat::AutocastGuard guard;
    };
    return std::make_unique<Autocast>(device_, compute_dtype());
  }
  at::ScalarType compute_dtype() const override { return at::kBFloat16; }

 private:
  c10::DeviceType device_;
};

const bool registered = PrecisionRegistry::add(
    {"bf16", "autocast to bfloat16 for forward and loss; fp32 weights, gradients, optimizer", {}},
    [](const Params&, c10::DeviceType device) { return std::make_shared<Bf16>(device); });

}  // namespace
}  // namespace kiln
