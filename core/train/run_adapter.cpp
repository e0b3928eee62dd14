#include "core/train/run_adapter.h"

#include <string>

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

std::shared_ptr<Adapter> make_adapter(const ResolvedConfig& config,
                                      const ParallelStrategy& parallel, bool loading) {
  std::shared_ptr<Adapter> adapter;
  try {
    adapter = AdapterRegistry::create(config.type("adapter"), config.params("adapter"));
  } catch (const UserError& e) {
    throw UserError(fmt::format("{}: {}", config.where("adapter.type").str(), e.what()));
  }
  // Data parallelism splits the adapter's state like any trainable weights' (zero shards it);
  // the frozen base under tensor and pipeline parallelism is not built yet (fsdp says so at its
  // attach, where it meets the frozen weights).
  if (adapter->adapts() && !loading && (parallel.tensor_parallel() > 1 || parallel.stages() > 1)) {
    throw UserError(fmt::format(
        "{}: adapter '{}' trains where every rank holds every layer's whole weights "
        "(parallel.type = \"single\", \"ddp\" or \"zero\"), and this run's '{}' splits them: "
        "use one of those (an adapter's few weights fit every rank)",
        config.where("adapter.type").str(), config.type("adapter"), config.type("parallel")));
  }
  return adapter;
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
