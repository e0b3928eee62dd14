// precision "bf32": fp32 everywhere, but the fused linear layers' products may round their fp32
// operands to bf16 inside oneDNN (its fpmath mode bf16; PyTorch's
// torch.set_float32_matmul_precision("medium") on the CPU), summing in fp32: the CPU's
// counterpart of CUDA's tf32. Nothing is stored in bf16, no autocast runs, and the weights,
// activations, gradients and optimizer state stay fp32. oneDNN takes the bf16 path only where
// the CPU multiplies bf16 in hardware on its matmul kernels (AMX in oneDNN 2.6); elsewhere the
// products are plain fp32 on the matmul primitive. The error is that of bf16 operands: a
// product's relative error up to 2^-8 per operand, against fp32's 2^-24 (docs/speed.md).
#include <string>

#include <ATen/Context.h>

#include "core/api/precision.h"
#include "core/util/error.h"
#include "core/util/onednn_matmul.h"

namespace kiln {
namespace {

// A float32 matmul precision by the name its string setter takes: the only setter LibTorch 2.x
// keeps.
const char* precision_name(at::Float32MatmulPrecision precision) {
  switch (precision) {
    case at::Float32MatmulPrecision::MEDIUM: return "medium";
    case at::Float32MatmulPrecision::HIGH: return "high";
    default: return "highest";
  }
}

// Sets the process's float32 matmul precision, which Kiln's linear layers read
// (core/api/onednn_linear.h), for the policy's life, as LibTorch's CPU matmuls read it too.
class Bf32 : public PrecisionPolicy {
 public:
  Bf32() : previous_(precision_name(at::globalContext().float32MatmulPrecision())) {
    at::globalContext().setFloat32MatmulPrecision("medium");
  }
  ~Bf32() override { at::globalContext().setFloat32MatmulPrecision(previous_); }
  // What `kiln bench` takes MFU against: bf16's peak where oneDNN rounds to bf16, fp32's elsewhere.
  at::ScalarType compute_dtype() const override {
    return onednn_bf32_rounds() ? at::kBFloat16 : at::kFloat;
  }
  // LibTorch's own linear layers on the CPU do not read the matmul precision.
  bool needs_fused_linear() const override { return true; }
  Bf32(const Bf32&) = delete;
  Bf32& operator=(const Bf32&) = delete;

 private:
  std::string previous_;
};

const bool registered = PrecisionRegistry::add(
    {"bf32",
     "fp32, with the fused linear layers' products on bf16-rounded operands inside oneDNN where "
     "the CPU multiplies bf16 natively (AMX), fp32 sums (the CPU's tf32; needs model.kernels = "
     "\"fused\" and a build with oneDNN's headers)",
     {}},
    [](const Params&, c10::DeviceType device) -> std::shared_ptr<PrecisionPolicy> {
      if (device != c10::DeviceType::CPU) {
        throw ParamError("type",
                         "precision bf32 is a CPU mode (oneDNN's bf16 fpmath): on CUDA use "
                         "precision.type = \"tf32\"");
      }
      if (!onednn_matmul_built()) {
        throw ParamError("type",
                         "precision bf32 needs oneDNN's matmul primitive, which this build lacks "
                         "(no oneDNN headers, or a LibTorch with its own oneDNN): use "
                         "precision.type = \"fp32\" or \"bf16\"");
      }
      return std::make_shared<Bf32>();
    });

}  // namespace
}  // namespace kiln
