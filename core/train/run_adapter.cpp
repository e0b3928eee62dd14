#include "core/train/run_adapter.h"

#include <string>

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

std::shared_ptr<Adapter> make_adapter(const ResolvedConfig& config) {
  try {
    return AdapterRegistry::create(config.type("adapter"), config.params("adapter"));
  } catch (const UserError& e) {
    throw UserError(fmt::format("{}: {}", config.where("adapter.type").str(), e.what()));
  }
}

void attach_adapter(const ResolvedConfig& config, Adapter& adapter, Model& model, bool starts) {
  try {
    adapter.attach(model, starts);
  } catch (const UserError& e) {  // "adapter.KEY = ...: why"
    const std::string what = e.what();
    const std::string key = what.substr(0, what.find_first_of(" :"));
    throw UserError(fmt::format(
        "{}: {}", config.where(key.rfind("adapter.", 0) == 0 ? key : "adapter.type").str(), what));
  }
}

}  // namespace kiln
