#include "core/train/rank_figures.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/api/optimizer.h"
#include "core/train/memory_check.h"

namespace kiln {

std::vector<int64_t> every_rank(const AssembledRun& run, int64_t mine) {
  at::Tensor slots = at::zeros({run.parallel->world_size()}, at::TensorOptions().dtype(at::kLong));
  slots[run.parallel->rank()].fill_(mine);
  const at::Tensor all = run.parallel->sum(slots.to(run.device)).cpu();
  return {all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + all.numel()};
}

std::string state_per_rank_line(const AssembledRun& run) {
  const std::vector<int64_t> optimizer = every_rank(run, optimizer_state_bytes(*run.optimizer));
  const std::vector<int64_t> training =
      every_rank(run, training_state_bytes(*run.model, *run.optimizer));
  const auto mib = [](const std::vector<int64_t>& bytes) {
    std::string out;
    for (size_t r = 0; r < bytes.size(); ++r)
      out += fmt::format("{}{:.2f}", r ? ", " : "", static_cast<double>(bytes[r]) / (1 << 20));
    return out;
  };
  return fmt::format(
      "optimizer state per rank: {} MiB | training state per rank: {} MiB (parameters, "
      "gradients, optimizer)",
      mib(optimizer), mib(training));
}

}  // namespace kiln
