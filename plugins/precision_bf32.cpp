// precision "bf32": fp32 everywhere, but the products of the linear layers and matmuls may round
// their fp32 operands to bf16 inside oneDNN (its fpmath mode bf16), summing in fp32: PyTorch's
// torch.set_float32_matmul_precision("medium") on the CPU, the counterpart of CUDA's tf32. Nothing
// is stored in bf16, no autocast runs, and the weights, activations, gradients and optimizer
// state stay fp32. LibTorch sends such products to oneDNN where the CPU multiplies bf16 in
// hardware (AMX or AVX512-BF16: brg_matmul with attr-fpmath:bf16 under ONEDNN_VERBOSE); elsewhere
// they stay plain fp32 on MKL. The error is that of bf16 operands: a product's relative error up
// to 2^-8 per operand, against fp32's 2^-24 (docs/speed.md).
#include <string>

#include <ATen/Context.h>

#include "core/api/precision.h"
#include "core/kernels/cpu_features.h"
#include "core/util/error.h"

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

// Sets the process's float32 matmul precision, which LibTorch's CPU matmuls read, for the
// policy's life.
class Bf32 : public PrecisionPolicy {
 public:
  Bf32() : previous_(precision_name(at::globalContext().float32MatmulPrecision())) {
    at::globalContext().setFloat32MatmulPrecision("medium");
  }
  ~Bf32() override { at::globalContext().setFloat32MatmulPrecision(previous_); }
  // What `kiln bench` takes MFU against: bf16's peak where the CPU multiplies bf16 natively (the
  // products are rounded then), fp32's elsewhere.
  at::ScalarType compute_dtype() const override {
    const CpuFeatures cpu = read_cpu_features();
    return cpu.avx512_bf16 || cpu.amx_bf16 ? at::kBFloat16 : at::kFloat;
  }
  Bf32(const Bf32&) = delete;
  Bf32& operator=(const Bf32&) = delete;

 private:
  std::string previous_;
};

const bool registered = PrecisionRegistry::add(
    {"bf32",
     "fp32, with the products of linear layers and matmuls on bf16-rounded operands inside "
     "oneDNN where the CPU multiplies bf16 natively (AMX, AVX512-BF16), fp32 sums (the CPU's "
     "tf32)",
     {}},
    [](const Params&, c10::DeviceType device) -> std::shared_ptr<PrecisionPolicy> {
      if (device != c10::DeviceType::CPU) {
        throw ParamError("type",
                         "precision bf32 is a CPU mode (oneDNN's bf16 fpmath): on CUDA use "
                         "precision.type = \"tf32\"");
      }
      return std::make_shared<Bf32>();
    });

}  // namespace
}  // namespace kiln
