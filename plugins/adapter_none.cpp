// adapter "none": no adapter; every weight of the model trains.
#include "core/api/adapter.h"

namespace kiln {
namespace {

const bool registered =
    AdapterRegistry::add({"none", "no adapter: every weight of the model trains", {}, true},
                         [](const Params&) { return std::make_shared<Adapter>(); });

}  // namespace
}  // namespace kiln
