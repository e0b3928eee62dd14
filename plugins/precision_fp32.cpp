// precision "fp32": weights, activations, gradients and optimizer state in float32. The
// reference every mixed-precision policy is compared against.
#include "core/api/precision.h"

namespace kiln {
namespace {

const bool registered = PrecisionRegistry::add(
    {"fp32", "everything in float32 (no autocast, no loss scaling)", {}, true},
    [](const Params&, c10::DeviceType) { return std::make_shared<PrecisionPolicy>(); });

}  // namespace
}  // namespace kiln
