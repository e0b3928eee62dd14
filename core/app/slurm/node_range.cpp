#include "core/app/slurm/node_range.h"

#include <numeric>

#include <fmt/format.h>

#include "core/config/options.h"
#include "core/train/step_batch.h"
#include "core/util/error.h"

namespace kiln {

std::vector<std::string> pin_global_batch(const std::string& base,
                                          const std::vector<std::string>& overrides,
                                          const SlurmOptions& slurm) {
  const int per_node = ranks_per_job(slurm) / slurm.nodes;
  const int most = slurm.nodes * per_node;
  std::vector<std::string> pin;
  if (train_options(load_config(base, overrides)).batch_tokens == 0) {
    pin.push_back(fmt::format("train.batch_tokens={}",
                              step_batch(load_config(base, overrides), most).tokens));
  }
  std::vector<std::string> pinned = overrides;
  pinned.insert(pinned.end(), pin.begin(), pin.end());
  const ResolvedConfig config = load_config(base, pinned);
  for (int nodes = slurm.nodes - 1; nodes >= slurm.min_nodes; --nodes) {
    const std::string why = cannot_shrink(config, most, nodes * per_node);
    if (why.empty()) continue;
    throw UserError(fmt::format(
        "--nodes {}-{}: a member that loses nodes would go on at {} node(s), {} rank(s), where it "
        "is not the same run: {}",
        slurm.min_nodes, slurm.nodes, nodes, nodes * per_node, why));
  }
  return pin;
}

std::string cannot_shrink(const ResolvedConfig& config, int now, int ranks) {
  const StepBatch before = step_batch(config, now);
  WorldShape shape;
  try {
    shape = world_shape(config.type("parallel"), config.params("parallel"), ranks);
  } catch (const UserError& e) {
    return fmt::format("{}, or raise the range's MIN", e.what());
  }
  const TrainOptions train = train_options(config);
  const int64_t per_micro_step = train.micro_batch * train.seq_len * shape.data_world;
  if (before.tokens % per_micro_step != 0) {
    const int64_t both = std::lcm(per_micro_step, before.tokens / before.micro_steps);
    return fmt::format(
        "its global batch of {} tokens is no whole number of micro-steps of micro_batch x seq_len "
        "x {} rank(s) reading data = {} x {} x {} = {} tokens there: set train.batch_tokens to a "
        "multiple of {}, or raise the range's MIN",
        before.tokens, shape.data_world, train.micro_batch, train.seq_len, shape.data_world,
        per_micro_step, both);
  }
  try {
    const StepBatch after = step_batch(config, train, ranks, shape);
    if (after.tokens == before.tokens) return "";
    return fmt::format(
        "its global batch would be {} tokens there instead of {} (train.batch_tokens = 0 follows "
        "the world): set train.batch_tokens = {}",
        after.tokens, before.tokens, before.tokens);
  } catch (const UserError& e) {
    return e.what();
  }
}

int rendezvous_port(int64_t job, int relaunch) {
  if (relaunch == 0) return 20000 + static_cast<int>(job % 20000);
  return 40000 + static_cast<int>(job % 2500) * 8 + (relaunch - 1) % 8;
}

}  // namespace kiln
