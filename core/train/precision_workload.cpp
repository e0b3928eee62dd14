// The workload key of precision "auto" (core/train/precision_workload.h).
#include "core/train/precision_workload.h"

#include <fmt/format.h>

#include "core/config/canonical.h"

namespace kiln {

namespace {

// "TYPE key=value ..." of a section, its keys in canonical order, but for the file it starts
// from: other weights of the same shapes are the same work.
std::string section_text(const std::map<std::string, std::string>& flat,
                         const ResolvedConfig& config, const std::string& section) {
  std::string out = config.type(section);
  const std::string prefix = section + ".";
  for (const auto& [key, value] : flat) {
    if (key.rfind(prefix, 0) != 0) continue;
    const std::string name = key.substr(prefix.size());
    if (name == "type" || name == "init_from") continue;
    out += " " + name + "=" + value;
  }
  return out;
}

}  // namespace

std::string precision_workload(const ResolvedConfig& config, const TrainOptions& train,
                               const ParallelStrategy& parallel) {
  const FlatConfig flat = config.flat();
  return fmt::format("{} | adapter {} | micro_batch {} x seq_len {} | tp {} | stages {}",
                     section_text(flat, config, "model"), section_text(flat, config, "adapter"),
                     train.micro_batch, train.seq_len, parallel.tensor_parallel(),
                     parallel.stages());
}

}  // namespace kiln
