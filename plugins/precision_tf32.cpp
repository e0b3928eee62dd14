// precision "tf32": fp32 everywhere, but matmuls and convolutions on CUDA tensor cores in TF32
// (fp32 range, 10-bit mantissa): the single switch build-nanogpt starts its speed-ups with.
#include <ATen/Context.h>

#include "core/api/precision.h"
#include "core/util/error.h"

namespace kiln {
namespace {

const bool registered = PrecisionRegistry::add(
    {"tf32", "fp32 with TF32 tensor-core matmuls on CUDA (Ampere and later)", {}},
    [](const Params&, c10::DeviceType device) -> std::shared_ptr<PrecisionPolicy> {
      if (device != c10::DeviceType::CUDA) {
        throw ParamError("type",
                         "precision tf32 is a CUDA tensor-core mode: use precision.type = "
                         "\"fp32\" (or \"bf16\") on the CPU");
      }
      at::globalContext().setFloat32MatmulPrecision("high");
      at::globalContext().setAllowTF32CuDNN(true);
      return std::make_shared<PrecisionPolicy>();
    });

}  // namespace
}  // namespace kiln
