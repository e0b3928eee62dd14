// parallel "single": one process, one device; nothing to synchronise.
#include "core/api/parallel.h"

namespace kiln {
namespace {

const bool registered = ParallelRegistry::add(
    {"single", "one process on one device", {}, true},
    [](const Params&, c10::DeviceType) { return std::make_shared<ParallelStrategy>(); });

}  // namespace
}  // namespace kiln
